"""What an OpenTelemetry exporter sent that is not a message: events other than prompts and API calls (tool
results, tool decisions, API errors, …), the calls a log import had already stored, and metric points. Kept
so that nothing a client sent is lost, and never counted (ingest_app.otlp, docs/otel.md)."""

import uuid

from django.db import models
from django.utils import timezone

from platform_kit.db import finite
from sessions_app.models import Message, Session, Tenant


class TelemetryKind(models.TextChoices):
    EVENT = "event", "event (log record)"
    METRIC = "metric", "metric point"


class TelemetryRecord(models.Model):
    """One log record or one metric data point, as received (its attributes flattened to JSON)."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="telemetry", db_index=False
    )
    # The stored message this event is the same fact as (a call or a prompt a log import stored first).
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    kind = models.CharField(max_length=8, choices=TelemetryKind.choices)
    name = models.CharField(max_length=255)
    time = models.DateTimeField()
    # A digest of what was sent: an exporter's retry of the same batch stores nothing new.
    key = models.CharField(max_length=64)
    attributes = models.JSONField(default=dict, blank=True)
    resource = models.JSONField(default=dict, blank=True)
    # Metric points: the delta this point adds (a cumulative point is turned into one per series), the value
    # as sent, the start of its series and the series itself (a digest of name, attributes and resource).
    value = models.FloatField(null=True, blank=True)
    sent_value = models.FloatField(null=True, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    series = models.CharField(max_length=64, blank=True)
    received_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-time"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "key"], name="telemetryrecord_tenant_key"),
            models.CheckConstraint(
                condition=finite("value") & finite("sent_value"), name="telemetryrecord_value_finite"
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-time"], name="telemetry_tenant_time"),
            models.Index(fields=["session", "name"], name="telemetry_session_name"),
            models.Index(fields=["message"], name="telemetry_message", condition=models.Q(message__isnull=False)),
            models.Index(
                fields=["tenant", "series", "-time"], name="telemetry_series_time", condition=~models.Q(series="")
            ),
        ]

    def __str__(self):
        return f"{self.name} @ {self.time:%Y-%m-%d %H:%M:%S}"
