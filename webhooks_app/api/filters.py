import django_filters

from webhooks_app.events import DELIVERY_EVENTS
from webhooks_app.models import DeliveryStatus, WebhookDelivery


class WebhookDeliveryFilter(django_filters.FilterSet):
    webhook = django_filters.UUIDFilter(field_name="webhook_id")
    status = django_filters.ChoiceFilter(choices=DeliveryStatus.choices)
    event = django_filters.ChoiceFilter(choices=[(name, name) for name in DELIVERY_EVENTS])

    class Meta:
        model = WebhookDelivery
        fields = ["webhook", "status", "event"]
