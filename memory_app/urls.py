from rest_framework.routers import DefaultRouter

from memory_app import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("records", views.RecordViewSet, basename="record")

urlpatterns = router.urls
