"""Usage plans: the limits a coding-agent user lives with — per 5-hour block (Claude Code's usage windows, as ccusage's
`blocks` computes them) and per week — so that a block's or a week's usage can be shown as a percent of them, next to
its API-equivalent cost (docs/accounting.md, "Plan windows").

A plan belongs to a tenant (`user_id` empty: every user's plan) and may be overridden for one user (`user_id` set).
Anthropic publishes no token limits: the presets are the figures the community's monitors use, and every figure is
stored on the plan, so each can be edited."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal

from django.db import models
from django.db.models import Q
from django.utils import timezone

from sessions_app.models.tenancy import Tenant

# The documented bounds of a plan's numbers: a value outside them is refused with a 400.
TOKEN_LIMIT_MAX = 10**15
MESSAGE_LIMIT_MAX = 10**9
COST_LIMIT_MIN, COST_LIMIT_MAX = Decimal("0.01"), Decimal(10**9)
NOTES_MAX_LENGTH = 2000


class PlanPreset(models.TextChoices):
    PRO = "pro", "Claude Pro"
    MAX5 = "max5", "Claude Max 5×"
    MAX20 = "max20", "Claude Max 20×"
    CUSTOM = "custom", "custom limits"


class TokenCounting(models.TextChoices):
    """Which tokens count against a plan's token limits."""

    INPUT_OUTPUT = "input_output", "input + output (as Claude-Code-Usage-Monitor, whose figures the presets are)"
    ALL = "all", "input + output + cache read + cache write (as ccusage's --token-limit)"


class Weekday(models.TextChoices):
    MONDAY = "monday"
    TUESDAY = "tuesday"
    WEDNESDAY = "wednesday"
    THURSDAY = "thursday"
    FRIDAY = "friday"
    SATURDAY = "saturday"
    SUNDAY = "sunday"


WEEKDAY_NUMBERS = {day: number for number, day in enumerate(Weekday.values)}  # Monday 0, as datetime.weekday()


@dataclass(frozen=True)
class PresetFigures:
    token_limit: int | None
    cost_limit: Decimal | None
    message_limit: int | None
    weekly_token_limit: int | None = None
    weekly_cost_limit: Decimal | None = None
    weekly_message_limit: int | None = None


# Per 5-hour block: tokens (input + output), cost in USD, messages (the block's usage entries: API responses).
# Source: Claude-Code-Usage-Monitor (github.com/Maciek-roboblog/Claude-Code-Usage-Monitor),
# src/claude_monitor/core/plans.py, PLAN_LIMITS, at commit 06f0fe11e694b8619f63f8b0db10dbdc5e7e5a44 (v3, July 2025);
# it compares the token limit with a block's input + output tokens (data/analysis.py, "totalTokens").
# Weekly limits: Anthropic states them in hours of model use, not tokens, and no monitor has a figure for them: none
# is preset; set the ones you have measured.
PLAN_PRESETS: dict[str, PresetFigures] = {
    PlanPreset.PRO: PresetFigures(token_limit=19_000, cost_limit=Decimal("18.00"), message_limit=250),
    PlanPreset.MAX5: PresetFigures(token_limit=88_000, cost_limit=Decimal("35.00"), message_limit=1_000),
    PlanPreset.MAX20: PresetFigures(token_limit=220_000, cost_limit=Decimal("140.00"), message_limit=2_000),
    PlanPreset.CUSTOM: PresetFigures(token_limit=None, cost_limit=None, message_limit=None),
}
PRESETS_SOURCE = (
    "https://github.com/Maciek-roboblog/Claude-Code-Usage-Monitor/blob/06f0fe11e694b8619f63f8b0db10dbdc5e7e5a44/"
    "src/claude_monitor/core/plans.py"
)
LIMIT_FIELDS = (
    "token_limit",
    "cost_limit",
    "message_limit",
    "weekly_token_limit",
    "weekly_cost_limit",
    "weekly_message_limit",
)


class UsagePlan(models.Model):
    """A tenant's plan (`user_id` empty) or one user's (overriding the tenant's). Every limit may be empty: no limit
    of that kind. Changed through `services.plans` (API and admin alike), which checks the bounds."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="usage_plans")
    user_id = models.CharField(
        "user ID", max_length=255, blank=True, help_text="Empty: the tenant's plan, for every user without their own"
    )
    preset = models.CharField(
        max_length=8,
        choices=PlanPreset.choices,
        default=PlanPreset.CUSTOM,
        help_text="Where the figures started from; the figures below are what counts",
    )
    token_limit = models.BigIntegerField(null=True, blank=True, help_text="Tokens per 5-hour block")
    token_counting = models.CharField(
        max_length=16,
        choices=TokenCounting.choices,
        default=TokenCounting.INPUT_OUTPUT,
        help_text="Which tokens count against the token limits",
    )
    cost_limit = models.DecimalField(
        max_digits=16, decimal_places=6, null=True, blank=True, help_text="API-equivalent USD per 5-hour block"
    )
    message_limit = models.BigIntegerField(
        null=True, blank=True, help_text="Messages (API responses: the block's requests) per 5-hour block"
    )
    weekly_token_limit = models.BigIntegerField(null=True, blank=True, help_text="Tokens per week")
    weekly_cost_limit = models.DecimalField(
        max_digits=16, decimal_places=6, null=True, blank=True, help_text="API-equivalent USD per week"
    )
    weekly_message_limit = models.BigIntegerField(null=True, blank=True, help_text="Requests per week")
    week_starts_on = models.CharField(
        max_length=9, choices=Weekday.choices, default=Weekday.SUNDAY, help_text="The weekday the week resets (UTC)"
    )
    week_start_hour = models.PositiveSmallIntegerField(default=0, help_text="The UTC hour it resets, 0–23")
    notes = models.TextField(blank=True, max_length=NOTES_MAX_LENGTH)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant", "user_id"]
        verbose_name = "usage plan"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user_id"], name="usage_plan_tenant_user"),
            models.CheckConstraint(condition=Q(week_start_hour__lte=23), name="usage_plan_week_start_hour"),
        ]

    def __str__(self):
        return f"{self.get_preset_display()} · {self.user_id or 'every user'}"
