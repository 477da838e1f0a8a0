from csp.constants import NONCE, SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from aceproject.celery import app as celery_app
from gateway_app.views import gateway_elsewhere
from memory_app.embedders.health import embedder_health
from platform_kit.api.docs import redoc_bundle
from platform_kit.health import healthz
from platform_kit.site import doc, favicon, home

admin.autodiscover()  # the apps' admin modules (platform_kit.admin.apps.AdminConfig leaves them to the URLs)
admin.site.site_header = "Open ACE"
admin.site.site_title = "Open ACE"
admin.site.index_title = "Sessions, usage and memory"
# The lists need the width (a 1400-pixel screen would lose a fifth of it); the breadcrumbs lead back to the index.
admin.site.enable_nav_sidebar = False

# Swagger UI and ReDoc start with an inline script (given the page's nonce) and style their widgets inline;
# ReDoc's search runs in a worker it makes from a blob. Everything still comes from this origin.
api_docs_policy = csp_update(
    {"script-src": [NONCE], "style-src": [UNSAFE_INLINE], "worker-src": [SELF, "blob:"], "img-src": ["blob:"]}
)

urlpatterns = [
    path("", home, name="home"),
    path("favicon.ico", favicon, name="favicon"),
    path("docs/", doc, name="docs"),
    path("docs/<slug:page>/", doc, name="doc"),
    # The probe is the kit's; what it probes is the project's: its Celery app's broker, the memory's embedder.
    path("healthz", healthz, {"broker": celery_app, "embedder_status": embedder_health}, name="healthz"),
    path("api/v1/", include("sessions_app.urls")),
    path("api/v1/", include("ingest_app.urls")),
    path("api/v1/", include("portability_app.urls")),  # before memory_app's: records/export/ is not records/{id}/
    path("api/v1/", include("memory_app.urls")),
    path("api/v1/", include("strategies_app.urls")),
    path("api/v1/", include("webhooks_app.urls")),
    path("api/v1/", include("retention_app.urls")),
    path("api/v1/", include("gateway_app.urls")),
    path("v1/", include("ingest_app.otlp.urls")),  # the OTLP/HTTP receiver (docs/otel.md)
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", api_docs_policy(SpectacularSwaggerView.as_view(url_name="schema")), name="api-docs"),
    path("api/redoc/redoc.standalone.js", redoc_bundle, name="api-redoc-bundle"),
    path("api/redoc/", api_docs_policy(SpectacularRedocView.as_view(url_name="schema")), name="api-redoc"),
    path("gateway/<path:rest>", gateway_elsewhere, name="gateway-elsewhere"),  # served by the gateway process
    path("admin/", admin.site.urls),
    path("", include("mcp_app.urls")),  # /mcp/: the MCP server over streamable HTTP (docs/mcp.md)
]

handler404 = "platform_kit.api.errors.json_404"
handler500 = "platform_kit.api.errors.json_500"
