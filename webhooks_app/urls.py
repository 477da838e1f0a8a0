from rest_framework.routers import DefaultRouter

from webhooks_app.api import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("webhooks", views.WebhookViewSet, basename="webhook")
router.register("webhook-deliveries", views.WebhookDeliveryViewSet, basename="webhook-delivery")

urlpatterns = router.urls
