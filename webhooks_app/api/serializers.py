from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from platform_kit.api.fields import RejectUnknownFieldsMixin, StrictCharField
from platform_kit.api.serializers import ModelSerializer
from platform_kit.redaction import redact_url
from webhooks_app.events import DELIVERY_EVENTS, Event
from webhooks_app.models import (
    MAX_DESCRIPTION_LENGTH,
    MAX_URL_LENGTH,
    BreakerState,
    DeliveryStatus,
    Webhook,
    WebhookAttempt,
    WebhookChange,
    WebhookDelivery,
)
from webhooks_app.services.webhooks import SECRET_MAX_LENGTH, SECRET_MIN_LENGTH

WEBHOOK_FIELDS = ["id", "url", "events", "description", "active", "breaker", "created_at", "updated_at"]


class BreakerSerializer(serializers.Serializer):
    """The webhook's circuit breaker (docs/webhooks.md): open, its pending deliveries are held, not attempted."""

    state = serializers.ChoiceField(
        choices=BreakerState.choices,
        source="breaker_state",
        help_text="closed: deliveries go; open: held until next_probe_at; half-open: one delivery is being tried",
    )
    since = serializers.DateTimeField(source="breaker_opened_at", allow_null=True, help_text="Open since (or null)")
    consecutive_failures = serializers.IntegerField(
        help_text="Attempts failed in a row: timeouts, connection errors, 408, 429, 5xx"
    )
    next_probe_at = serializers.DateTimeField(
        source="breaker_probe_at", allow_null=True, help_text="When one held delivery is tried again (or null)"
    )


class ShownUrlField(serializers.CharField):
    """The URL without its secrets (a token in the query, a password): stored and called whole, never shown."""

    def to_representation(self, value):
        return redact_url(super().to_representation(value))


class WebhookSerializer(ModelSerializer):
    url = ShownUrlField(
        read_only=True,
        help_text="Its secret query parameters (token, key, sig…) shown as [REDACTED]; send it back unchanged to "
        "keep them",
    )
    events = serializers.ListField(child=serializers.ChoiceField(choices=Event.choices))
    breaker = BreakerSerializer(source="*", read_only=True)

    class Meta:
        model = Webhook
        fields = WEBHOOK_FIELDS
        read_only_fields = fields


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(
        read_only=True, help_text="Signs every delivery: shown here once, never again (keep it with the receiver)"
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WEBHOOK_FIELDS, "secret"]
        read_only_fields = fields


class WebhookWriteSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """Input of create and PATCH; the service checks the URL and the event names (webhooks_app/services)."""

    url = StrictCharField(max_length=MAX_URL_LENGTH, help_text="http:// or https://, without credentials")
    events = serializers.ListField(
        child=StrictCharField(max_length=100),
        min_length=1,
        max_length=len(Event.values),
        help_text=f"Event names, from: {', '.join(Event.values)}",
    )
    description = StrictCharField(max_length=MAX_DESCRIPTION_LENGTH, required=False, allow_blank=True)
    active = serializers.BooleanField(required=False)
    secret = StrictCharField(
        min_length=SECRET_MIN_LENGTH,
        max_length=SECRET_MAX_LENGTH,
        required=False,
        write_only=True,
        trim_whitespace=False,
        help_text="Leave it out on create to have one generated (returned once); on PATCH, replaces the secret",
    )


class WebhookDeliverySerializer(ModelSerializer):
    event = serializers.ChoiceField(choices=DELIVERY_EVENTS, read_only=True)
    status = serializers.ChoiceField(choices=DeliveryStatus.choices, read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id", "webhook", "event", "event_id", "status", "attempts", "next_attempt_at", "response_status",
            "response_headers", "response_body", "error", "duration_ms", "redelivery_of", "requested_by",
            "created_at", "delivered_at", "payload",
        ]  # fmt: skip
        read_only_fields = fields


class WebhookAttemptSerializer(ModelSerializer):
    class Meta:
        model = WebhookAttempt
        fields = [
            "number", "started_at", "duration_ms", "outcome", "response_status", "response_headers", "response_body",
            "error",
        ]  # fmt: skip
        read_only_fields = fields


class WebhookDeliveryDetailSerializer(WebhookDeliverySerializer):
    attempt_log = WebhookAttemptSerializer(many=True, read_only=True, help_text="Every attempt, first first")

    class Meta(WebhookDeliverySerializer.Meta):
        fields = [*WebhookDeliverySerializer.Meta.fields, "attempt_log"]
        read_only_fields = fields


class WebhookChangeSerializer(ModelSerializer):
    changes = serializers.SerializerMethodField()

    class Meta:
        model = WebhookChange
        fields = ["action", "actor", "changes", "created_at"]
        read_only_fields = fields

    @extend_schema_field({"type": "object", "additionalProperties": True})
    def get_changes(self, change) -> dict:
        return change.changes


class DeliveryQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=DeliveryStatus.choices, required=False)
    event = serializers.ChoiceField(choices=DELIVERY_EVENTS, required=False)
