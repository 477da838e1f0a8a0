from django.urls import path
from rest_framework.routers import DefaultRouter

from memory_app import retention_api, views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("records", views.RecordViewSet, basename="record")
router.register("record-ttls", retention_api.RecordTtlViewSet, basename="record-ttl")
router.register("retention/runs", retention_api.RetentionRunViewSet, basename="retention-run")
router.register("retention/events", retention_api.RetentionEventViewSet, basename="retention-event")

urlpatterns = [
    path("retention/", retention_api.RetentionPolicyView.as_view(), name="retention-policy"),
    path("retention/preview/", retention_api.RetentionPreviewView.as_view(), name="retention-preview"),
    path("recall/", views.RecallView.as_view(), name="recall"),
    path("memory/status/", views.MemoryStatusView.as_view(), name="memory-status"),
    path("sessions/<uuid:pk>/context/", views.SessionContextView.as_view(), name="session-context"),
    *router.urls,
]
