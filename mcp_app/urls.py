from django.urls import re_path

from mcp_app.http import mcp_endpoint

urlpatterns = [
    re_path(r"^mcp/?$", mcp_endpoint, name="mcp"),  # /mcp too: a POST cannot follow a slash redirect
]
