"""Strategies: versioned rules that turn a session's messages into records, and the auditable runs of them."""

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory_app.models import Record, RecordType
from platform_kit.db import finite
from sessions_app.models import Session, Tenant


class Extractor(models.TextChoices):
    AUTO = "auto", "auto: the LLM when ACE_LLM_BASE_URL is set, else rules"
    RULES = "rules", "rules (built in, no network)"
    LLM = "llm", "LLM (OpenAI-compatible chat completions)"


class Trigger(models.TextChoices):
    TOOL_RESULT = "tool_result", "tool-call completion"
    STATE_CHANGE = "state_change", "task stage change"
    SCHEDULE = "schedule", "schedule"
    THRESHOLD = "threshold", "confidence threshold"
    MANUAL = "manual", "manual"


class Strategy(models.Model):
    """A tenant's rule for what is worth remembering. The editable settings live here; every change to
    them is frozen into a new StrategyVersion, and records and runs point to the version that made them.
    `enabled` is an operational switch, not part of a version."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    name = models.SlugField(max_length=100, help_text="Unique within the tenant; records carry it as `strategy`")
    description = models.TextField(blank=True)
    type = models.CharField(
        max_length=16, choices=RecordType.choices, help_text="What it extracts, and the type of its records"
    )
    enabled = models.BooleanField(default=True)
    builtin = models.BooleanField(default=False, editable=False)
    # -- versioned settings (any change makes a new version) --
    prompt = models.TextField(help_text="Instructions for the LLM extractor. Placeholders: see the docs")
    extractor = models.CharField(max_length=8, choices=Extractor.choices, default=Extractor.AUTO)
    on_tool_result = models.BooleanField(
        default=False, help_text="Run when a tool result arrives or a turn with tool calls completes"
    )
    on_state_keys = models.JSONField(
        default=list, blank=True, help_text='Run when one of these state keys changes value, e.g. ["stage"]'
    )
    message_threshold = models.FloatField(
        null=True, blank=True, help_text="Run when one new message scores at least this (0–1); blank: off"
    )
    accumulated_threshold = models.FloatField(
        null=True, blank=True, help_text="Run when the scores of unprocessed messages add up to this; blank: off"
    )
    schedule_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="Also run every N minutes over sessions with new messages; blank: off"
    )
    version = models.PositiveIntegerField(default=1, editable=False)
    # One strategy per periodic task (the unique constraint below, with tenant_id for co-location).
    periodic_task = models.ForeignKey(
        "django_celery_beat.PeriodicTask",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    VERSIONED_FIELDS = (
        "type",
        "description",
        "prompt",
        "extractor",
        "on_tool_result",
        "on_state_keys",
        "message_threshold",
        "accumulated_threshold",
        "schedule_minutes",
    )

    class Meta:
        verbose_name_plural = "strategies"
        ordering = ["tenant", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="strategy_name_unique"),
            models.UniqueConstraint(fields=["periodic_task", "tenant"], name="strategy_periodic_task"),
            models.CheckConstraint(
                condition=finite("message_threshold") & finite("accumulated_threshold"),
                name="strategy_thresholds_finite",
            ),
        ]

    def __str__(self):
        return f"{self.name} v{self.version}"

    def settings_snapshot(self) -> dict:
        return {name: getattr(self, name) for name in self.VERSIONED_FIELDS}


class StrategyVersion(models.Model):
    """An immutable snapshot of a strategy's settings. Version 1 is the strategy as created."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    strategy = models.ForeignKey(Strategy, on_delete=models.CASCADE, related_name="versions", db_index=False)
    version = models.PositiveIntegerField()
    type = models.CharField(max_length=16, choices=RecordType.choices)
    description = models.TextField(blank=True)
    prompt = models.TextField()
    extractor = models.CharField(max_length=8, choices=Extractor.choices)
    settings = models.JSONField(default=dict, help_text="Trigger settings of this version")
    actor = models.CharField(max_length=255, help_text="api, admin, or install")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["strategy", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["strategy", "version", "tenant"], name="strategy_version_unique")
        ]

    def __str__(self):
        return f"{self.strategy.name} v{self.version}"


class Watermark(models.Model):
    """How far one strategy has read one session: messages with seq <= last_seq are processed.

    A run claims the row (SELECT … FOR UPDATE) for its whole transaction, so two runs of one strategy on one
    session never overlap; whatever one commits, the next starts after. `pending_score` adds up the scorer's
    ratings of messages that arrived since, for the accumulated-confidence trigger.
    """

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    strategy = models.ForeignKey(Strategy, on_delete=models.CASCADE, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    last_seq = models.BigIntegerField(default=0)
    pending_score = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["strategy", "session", "tenant"], name="watermark_unique")]

    def __str__(self):
        return f"{self.strategy_id}@{self.session_id}: {self.last_seq}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"


class StrategyRun(models.Model):
    """One execution of one strategy version over one session's new messages (or a user's sessions)."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    strategy = models.ForeignKey(Strategy, on_delete=models.CASCADE, related_name="runs", db_index=False)
    strategy_version = models.ForeignKey(StrategyVersion, on_delete=models.PROTECT, related_name="runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    trigger_detail = models.CharField(max_length=255, blank=True)
    state_changes = models.JSONField(default=dict, blank=True, help_text="{key: [old, new]} of a state trigger")
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user_id = models.CharField("user ID", max_length=255, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    extractor = models.CharField(max_length=8, blank=True, help_text="The extractor that actually ran")
    from_seq = models.BigIntegerField(null=True, blank=True, help_text="First message seq read (single session)")
    to_seq = models.BigIntegerField(null=True, blank=True, help_text="Last message seq read (single session)")
    sessions_processed = models.PositiveIntegerField(default=0)
    messages_processed = models.PositiveIntegerField(default=0)
    candidates = models.PositiveIntegerField(default=0)
    added = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    invalidated = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    decisions = models.JSONField(default=list, blank=True, help_text="[{action, record, content, reason, ...}]")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    llm_latency_ms = models.FloatField("LLM latency (ms)", default=0.0)
    duration_ms = models.FloatField("duration (ms)", null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last sign of life: beaten by the worker while the run is running, set when it is queued again",
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-queued_at"]
        indexes = [
            models.Index(fields=["tenant", "-queued_at"], name="run_tenant_queued"),
            models.Index(fields=["strategy", "-queued_at"], name="run_strategy_queued"),
            models.Index(fields=["session", "-queued_at"], name="run_session_queued"),
            # "is a run of this strategy for this session already waiting?" (triggers coalesce into it)
            models.Index(fields=["strategy", "session", "trigger"], name="run_waiting", condition=Q(status="queued")),
            # the sweep of lost runs (every 15 s) reads the unfinished ones only
            models.Index(
                fields=["status", "heartbeat_at"], name="run_unfinished", condition=Q(status__in=["queued", "running"])
            ),
        ]

    def __str__(self):
        return f"{self.strategy.name} run of {self.queued_at:%Y-%m-%d %H:%M:%S}"


class RunRecord(models.Model):
    """Which records a run touched, and how: the index from a record back to the runs that shaped it."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    run = models.ForeignKey(StrategyRun, on_delete=models.CASCADE, related_name="record_links", db_index=False)
    record = models.ForeignKey(Record, on_delete=models.CASCADE, related_name="strategy_runs")
    action = models.CharField(max_length=16)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "record", "action", "tenant"], name="run_record_unique")]

    def __str__(self):
        return f"{self.action} {self.record_id}"
