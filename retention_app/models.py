"""Retention: how long a tenant keeps message content, what each retention run did, and the audit trail of
every change to the policies and record TTLs (docs/retention.md). A record TTL itself is memory_app.RecordTtl:
the database keeps each record's `expires_at` from it.

Purging a message's content keeps the message row — its ids, seq, role, conversation, times, model, tokens,
request and tool names — so every counter, roll-up, cost and record provenance stays exact.
"""

import uuid

from django.db import models
from django.utils import timezone

from sessions_app.models import Tenant

# Days of message content a policy may keep: at least one day, at most a hundred years.
CONTENT_DAYS_MIN = 1
CONTENT_DAYS_MAX = 36_500


class RetentionPolicy(models.Model):
    """One tenant's retention of message content. No row (or `message_content_days` empty): kept forever."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="retention_policy")
    message_content_days = models.IntegerField(
        null=True,
        blank=True,
        help_text=f"Purge the content of messages older than this many days ({CONTENT_DAYS_MIN}–{CONTENT_DAYS_MAX}); "
        "empty: keep it forever",
    )
    roles = models.JSONField(
        default=list, blank=True, help_text='The roles whose content is purged, e.g. ["toolResult"]; empty: every role'
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "retention policy"
        verbose_name_plural = "retention policies"

    def __str__(self):
        days = self.message_content_days
        return f"{self.tenant}: message content {'kept forever' if days is None else f'kept {days} days'}"


class RetentionRun(models.Model):
    """One application (or dry run) of a tenant's retention: what it purged or expired, or would have."""

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "daily schedule"
        COMMAND = "command", "ace_retention"
        ADMIN = "admin", "admin"
        API = "api", "API"

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    dry_run = models.BooleanField(help_text="A preview: nothing was changed")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    content_cutoff = models.DateTimeField(
        null=True, blank=True, help_text="Messages created before this time had their content purged"
    )
    messages_purged = models.BigIntegerField(default=0)
    oldest_message_at = models.DateTimeField(null=True, blank=True)
    newest_message_at = models.DateTimeField(null=True, blank=True)
    records_expired = models.BigIntegerField(default=0, help_text="Expired records kept (no longer recalled)")
    records_purged = models.BigIntegerField(default=0, help_text="Expired records deleted")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["tenant", "-started_at"], name="retentionrun_tenant_started")]

    def __str__(self):
        return f"{'dry run' if self.dry_run else 'run'} {self.started_at:%Y-%m-%d %H:%M}"


class RetentionEvent(models.Model):
    """The audit trail of retention: a policy set or changed, a record TTL created, changed or deleted, a record
    deleted because it expired. Kept when what it describes is gone."""

    class Action(models.TextChoices):
        POLICY_SET = "policy_set", "retention policy set"
        TTL_CREATED = "ttl_created", "record TTL created"
        TTL_UPDATED = "ttl_updated", "record TTL changed"
        TTL_DELETED = "ttl_deleted", "record TTL deleted"
        RECORD_PURGED = "record_purged", "expired record deleted"

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    action = models.CharField(max_length=32, choices=Action.choices)
    actor = models.CharField(max_length=255, help_text="api, admin:<user>, command or schedule")
    subject_id = models.CharField(
        "subject ID", max_length=64, blank=True, help_text="The policy, TTL or record concerned"
    )
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="retentionevent_tenant_created")]

    def __str__(self):
        return f"{self.get_action_display()} {self.subject_id}"
