"""Budgets: a limit on the tokens or the cost of a tenant, a user, a project or an API key per day, week, month
or rolling window of hours; what each period has used (kept as usage arrives); the crossings of its alert
thresholds; and every change made to it (docs/budgets.md)."""

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone as django_timezone

from sessions_app.models.tenancy import ApiKey, Tenant

# The documented bounds of a budget's numbers (docs/budgets.md): a value outside them is refused with a 400.
TOKEN_LIMIT_MAX = 10**15
USD_LIMIT_MIN = "0.01"
USD_LIMIT_MAX = 10**9
THRESHOLD_MIN, THRESHOLD_MAX = 1, 1000
THRESHOLDS_MAX_COUNT = 10
DEFAULT_THRESHOLDS = (80, 100)
WINDOW_HOURS_MIN, WINDOW_HOURS_MAX = 1, 720
EMAILS_MAX_COUNT = 20


def default_thresholds() -> list[int]:
    return list(DEFAULT_THRESHOLDS)


class BudgetScope(models.TextChoices):
    TENANT = "tenant", "the whole tenant"
    USER = "user_id", "one user_id"
    PROJECT = "project", "one project"
    API_KEY = "api_key", "one API key"


class BudgetUnit(models.TextChoices):
    TOKENS = "tokens", "tokens (total_tokens)"
    USD = "usd", "cost in USD"


class BudgetPeriod(models.TextChoices):
    DAY = "day", "per day"
    WEEK = "week", "per week (from Monday)"
    MONTH = "month", "per month"
    ROLLING = "rolling", "rolling window of hours"


class Budget(models.Model):
    """A limit on usage in a period, with alert thresholds and their channels. Changed only through
    `services.budgets` (API and admin alike), which keeps a BudgetChange for every change."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="budgets")
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=16, choices=BudgetScope.choices, default=BudgetScope.TENANT)
    scope_value = models.CharField(
        max_length=255, blank=True, help_text="The user_id or project the budget is about (scope user_id, project)"
    )
    api_key = models.ForeignKey(
        ApiKey,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="budgets",
        verbose_name="API key",
        help_text="Scope api_key",
    )
    unit = models.CharField(max_length=8, choices=BudgetUnit.choices, default=BudgetUnit.TOKENS)
    limit = models.DecimalField(max_digits=24, decimal_places=6, help_text="Tokens, or USD")
    period = models.CharField(max_length=8, choices=BudgetPeriod.choices, default=BudgetPeriod.MONTH)
    window_hours = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text=f"Period rolling: the window, {WINDOW_HOURS_MIN}–{WINDOW_HOURS_MAX} hours"
    )
    timezone = models.CharField(max_length=64, default="UTC", help_text="Where days, weeks and months begin")
    thresholds = models.JSONField(
        default=default_thresholds, help_text=f"Percentages of the limit that alert, {THRESHOLD_MIN}–{THRESHOLD_MAX}"
    )
    emails = models.JSONField(default=list, blank=True, help_text="Addresses alerted by email")
    feishu_url = models.URLField(
        "Feishu URL", max_length=500, blank=True, help_text="A Feishu (Lark) custom bot's webhook"
    )
    feishu_secret = models.CharField(
        "Feishu secret", max_length=200, blank=True, help_text="The bot's signing secret, if set"
    )
    dingtalk_url = models.URLField(
        "DingTalk URL", max_length=500, blank=True, help_text="A DingTalk custom robot's webhook"
    )
    dingtalk_secret = models.CharField(
        "DingTalk secret", max_length=200, blank=True, help_text="The robot's signing secret (SEC…)"
    )
    hard_limit = models.BooleanField(
        default=False, help_text="Refuse new messages and turns (429) while the period's usage is at the limit"
    )
    active = models.BooleanField(default=True)
    # Maintained by the write that reaches the limit of a hard-limit budget: until when writes are refused.
    blocked_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=django_timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="budget_tenant_name"),
            models.CheckConstraint(condition=Q(limit__gt=0), name="budget_limit_positive"),
            # NaN is above every number in PostgreSQL (so `limit > 0` lets it through), never below a bound.
            models.CheckConstraint(condition=Q(limit__lte=TOKEN_LIMIT_MAX), name="budget_limit_within_bounds"),
        ]

    def __str__(self):
        return self.name


class BudgetUsage(models.Model):
    """What a budget's period used: one row per period (its start) for days, weeks and months, one per UTC hour
    for a rolling window (the window sums its hours). Added to by every write, in the write's statement."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="usage", db_index=False)
    bucket = models.DateTimeField()
    used = models.DecimalField(max_digits=30, decimal_places=12, default=0)

    class Meta:
        verbose_name_plural = "budget usage"
        # tenant_id last in the unique index: lookups by budget keep using it (docs/scaling.md).
        constraints = [models.UniqueConstraint(fields=["budget", "bucket", "tenant"], name="budget_usage_key")]

    def __str__(self):
        return f"{self.bucket:%Y-%m-%d %H:%M} {self.used}"


class BudgetCrossing(models.Model):
    """A threshold crossed in a period: at most one per (budget, period start, threshold), which is what
    makes "alert once per crossing" hold between concurrent writers. `alerts` records each channel's outcome."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="crossings", db_index=False)
    period_start = models.DateTimeField()
    threshold = models.PositiveSmallIntegerField()
    used = models.DecimalField(max_digits=30, decimal_places=12)
    limit = models.DecimalField(max_digits=24, decimal_places=6)
    crossed_at = models.DateTimeField(default=django_timezone.now)
    payload = models.JSONField(default=dict)
    alerts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-crossed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "period_start", "threshold", "tenant"], name="budget_crossing_once"
            )
        ]

    def __str__(self):
        return f"{self.budget_id} {self.threshold}% at {self.crossed_at:%Y-%m-%d %H:%M}"


class BudgetChangeAction(models.TextChoices):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


class BudgetChange(models.Model):
    """The audit log of budgets: who changed which budget, when, and each field's value before and after.
    Kept when the budget is deleted (it names the budget by id, not by a foreign key)."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    budget_id = models.UUIDField("budget ID", db_index=True)
    budget_name = models.CharField(max_length=100)
    action = models.CharField(max_length=8, choices=BudgetChangeAction.choices)
    actor = models.CharField(max_length=255, help_text="The API key or admin user that made the change")
    changes = models.JSONField(default=dict, help_text="{field: [before, after]}")
    changed_at = models.DateTimeField(default=django_timezone.now)

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self):
        return f"{self.budget_name} {self.action} by {self.actor}"
