from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from aceproject.health import healthz

admin.autodiscover()  # the apps' admin modules (aceproject.admin_app.AdminConfig leaves them to the URLs)
admin.site.site_header = "Open ACE"
admin.site.site_title = "Open ACE"
admin.site.index_title = "Sessions, usage and memory"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include("sessions_app.urls")),
    path("api/v1/", include("memory_app.urls")),
    path("api/v1/", include("strategies_app.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("admin/", admin.site.urls),
]

handler404 = "platform_kit.api.errors.json_404"
handler500 = "platform_kit.api.errors.json_500"
