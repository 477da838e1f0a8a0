from django.urls import path
from rest_framework.routers import DefaultRouter

from retention_app import api

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("record-ttls", api.RecordTtlViewSet, basename="record-ttl")
router.register("retention/runs", api.RetentionRunViewSet, basename="retention-run")
router.register("retention/events", api.RetentionEventViewSet, basename="retention-event")

urlpatterns = [
    path("retention/", api.RetentionPolicyView.as_view(), name="retention-policy"),
    path("retention/preview/", api.RetentionPreviewView.as_view(), name="retention-preview"),
    *router.urls,
]
