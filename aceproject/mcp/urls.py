from django.urls import path

from aceproject.mcp.http import mcp_endpoint

# Mounted at "mcp": clients are configured with /mcp/ or /mcp, and a POST cannot follow a slash redirect.
urlpatterns = [
    path("/", mcp_endpoint, name="mcp"),
    path("", mcp_endpoint, name="mcp-without-slash"),
]
