from rest_framework.routers import DefaultRouter

from gateway_app.api import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("providers", views.ProviderViewSet, basename="provider")

urlpatterns = router.urls
