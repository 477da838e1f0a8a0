"""Webhooks: a tenant's subscriptions, every delivery of an event to one of them, each attempt, every change."""

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from platform_kit.redaction import redact_url
from sessions_app.models import Tenant
from webhooks_app.events import DELIVERY_EVENTS, Event

MAX_URL_LENGTH = 2000
MAX_DESCRIPTION_LENGTH = 1000


class BreakerState(models.TextChoices):
    CLOSED = "closed", "closed"
    OPEN = "open", "open"
    HALF_OPEN = "half-open", "half-open"


class Webhook(models.Model):
    """Where to POST a tenant's events, and which ones. Deleting one keeps it (and its deliveries) for audit."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    url = models.CharField("URL", max_length=MAX_URL_LENGTH, help_text="http:// or https://; receives a POST per event")
    events = ArrayField(models.CharField(max_length=40, choices=Event.choices), help_text="The events it subscribes to")
    # Kept readable: each delivery is signed with it (HMAC needs the secret itself, not a digest of it).
    secret = models.CharField(max_length=256, editable=False)
    active = models.BooleanField(default=True, help_text="Inactive: no new deliveries, and none retried")
    description = models.CharField(max_length=MAX_DESCRIPTION_LENGTH, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Deleted through the API or the admin")
    # The circuit breaker (services/breakers.py): open while breaker_opened_at is set; its deliveries are held
    # until breaker_probe_at, when one of them is tried (the probe) and closes it or opens it for longer.
    consecutive_failures = models.PositiveIntegerField(
        default=0, help_text="Attempts failed in a row (timeouts, connection errors, 408, 429, 5xx)"
    )
    breaker_opened_at = models.DateTimeField(
        "breaker open since", null=True, blank=True, help_text="Open: its deliveries are held, not attempted"
    )
    breaker_probe_at = models.DateTimeField(
        "next probe at", null=True, blank=True, help_text="When one held delivery is tried to see if it recovered"
    )
    breaker_trips = models.PositiveIntegerField(
        default=0, help_text="Times opened since it last closed (each doubles the cool-down)"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="webhook_tenant_created")]

    def __str__(self):
        return self.description or redact_url(self.url)

    @property
    def breaker_state(self) -> str:
        """closed (deliveries go), open (held until the probe), or half-open (the probe is due or under way)."""
        if self.breaker_opened_at is None:
            return BreakerState.CLOSED
        if self.breaker_probe_at is not None and self.breaker_probe_at > timezone.now():
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"  # waiting for its next attempt (the first, or a retry)
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"  # given up: an answer not worth retrying, or every attempt used


class WebhookDelivery(models.Model):
    """One event sent to one webhook: its payload as signed, where it stands, and its last answer."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    event = models.CharField(max_length=40, choices=[(name, name) for name in DELIVERY_EVENTS])
    event_id = models.UUIDField(
        "event ID", help_text="The same for every delivery of one event: a receiver's idempotency key"
    )
    payload = models.JSONField(help_text="The body sent: {id, type, created_at, tenant, data}")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # While pending, when it is due; during an attempt, when that attempt is taken for lost (its lease).
    next_attempt_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    # During an attempt, its lease (as next_attempt_at); what the per-tenant limit counts. Cleared after it.
    claimed_until = models.DateTimeField(null=True, blank=True, editable=False)
    response_status = models.PositiveIntegerField(null=True, blank=True, help_text="The last attempt's HTTP status")
    response_headers = models.JSONField(default=dict, blank=True)
    response_body = models.TextField(blank=True, help_text="The start of the last answer's body")
    error = models.TextField(blank=True, help_text="Why the last attempt failed")
    duration_ms = models.FloatField("duration (ms)", null=True, blank=True, help_text="The last attempt's")
    redelivery_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="redeliveries"
    )
    requested_by = models.CharField(max_length=255, blank=True, help_text="Who asked: an event, a test, a redelivery")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["webhook", "-created_at"], name="delivery_webhook_created"),
            models.Index(fields=["tenant", "-created_at"], name="delivery_tenant_created"),
            models.Index(fields=["next_attempt_at"], name="delivery_pending_due", condition=models.Q(status="pending")),
            models.Index(
                fields=["tenant", "next_attempt_at"], name="delivery_tenant_due", condition=models.Q(status="pending")
            ),
            models.Index(
                fields=["tenant", "claimed_until"],
                name="delivery_tenant_in_flight",
                condition=models.Q(status="pending", claimed_until__isnull=False),
            ),
        ]

    def __str__(self):
        return f"{self.event} → {self.webhook_id} ({self.status})"


class DeliveryLane(models.Model):
    """A tenant's place in the turns of the delivery workers: the next free turn goes to the tenant served least
    recently, and a claim locks its tenant's lane, so that the tenant's limit of attempts at once holds across
    processes and hosts (services/claims.py)."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, primary_key=True, related_name="+")
    last_served_at = models.DateTimeField(null=True, blank=True, help_text="When one of its deliveries last got a turn")

    def __str__(self):
        return f"delivery lane of {self.tenant_id}"


class WebhookAttempt(models.Model):
    """One POST of a delivery and what came back."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.FloatField("duration (ms)", null=True, blank=True)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_headers = models.JSONField(default=dict, blank=True)
    response_body = models.TextField(blank=True)
    error = models.TextField(blank=True)
    outcome = models.CharField(max_length=16, help_text="succeeded, retry or failed")

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number", "tenant"], name="attempt_delivery_number")]

    def __str__(self):
        return f"attempt {self.number}: {self.outcome}"


class WebhookChange(models.Model):
    """Who changed a webhook, when and how: created, updated (each field's old and new value; a new secret is
    noted, never shown), deleted, a delivery redelivered, a test sent."""

    class Action(models.TextChoices):
        CREATE = "create", "created"
        UPDATE = "update", "updated"
        DELETE = "delete", "deleted"
        REDELIVER = "redeliver", "redelivered"
        TEST = "test", "test sent"
        BREAKER_OPEN = "breaker_open", "breaker opened"
        BREAKER_CLOSE = "breaker_close", "breaker closed"
        BREAKER_RESET = "breaker_reset", "breaker reset"

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="changes")
    action = models.CharField(max_length=16, choices=Action.choices)
    actor = models.CharField(max_length=255, help_text="api:<key prefix>, admin:<user>")
    changes = models.JSONField(default=dict, blank=True, help_text="{field: [old, new]}")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.get_action_display()} by {self.actor}"
