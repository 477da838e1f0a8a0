from django.urls import path
from rest_framework.routers import DefaultRouter

from memory_app import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("records", views.RecordViewSet, basename="record")

urlpatterns = [
    path("recall/", views.RecallView.as_view(), name="recall"),
    path("memory/status/", views.MemoryStatusView.as_view(), name="memory-status"),
    path("sessions/<uuid:pk>/context/", views.SessionContextView.as_view(), name="session-context"),
    *router.urls,
]
