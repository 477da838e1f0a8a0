"""Reads of usage plans: the plan that applies to a user (their own, else their tenant's), and a window's usage — a
5-hour block's or a week's — as a percent of the plan's limits (docs/accounting.md, "Plan windows")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from sessions_app.models import TokenCounting, UsagePlan

# A window projected past this share of a limit is a warning (ccusage's BLOCKS_WARNING_THRESHOLD, 0.8).
WARNING_PERCENT = 80


def plans_for(*, tenant, user_ids: Iterable[str]) -> dict[str, UsagePlan | None]:
    """{user_id: the plan that applies to them}, in one query: a user's own plan, else the tenant's, else none."""
    user_ids = set(user_ids)
    plans = {plan.user_id: plan for plan in UsagePlan.objects.filter(tenant=tenant, user_id__in=[*user_ids, ""])}
    return {user_id: plans.get(user_id) or plans.get("") for user_id in user_ids}


def plan_for(*, tenant, user_id: str) -> UsagePlan | None:
    return plans_for(tenant=tenant, user_ids=[user_id])[user_id]


@dataclass(frozen=True)
class Limits:
    """A plan's limits for one kind of window (None: no limit of that kind)."""

    tokens: int | None
    cost: Decimal | None
    messages: int | None
    token_counting: str = TokenCounting.INPUT_OUTPUT

    @classmethod
    def per_block(cls, plan: UsagePlan) -> Limits:
        return cls(plan.token_limit, plan.cost_limit, plan.message_limit, plan.token_counting)

    @classmethod
    def per_week(cls, plan: UsagePlan) -> Limits:
        return cls(plan.weekly_token_limit, plan.weekly_cost_limit, plan.weekly_message_limit, plan.token_counting)

    def counted_tokens(self, *, input_output: int, all_tokens: int) -> int:
        return all_tokens if self.token_counting == TokenCounting.ALL else input_output


@dataclass(frozen=True)
class Amounts:
    """What a window used (or is projected to use), in the units of the limits."""

    tokens: int  # as the limits count them (Limits.counted_tokens)
    cost: Decimal
    messages: int


def _percent(value, limit) -> float | None:
    if limit is None:
        return None
    return float((Decimal(value) * 100 / Decimal(limit)).quantize(Decimal("0.01")))


def _percents(amounts: Amounts, limits: Limits) -> dict[str, float | None]:
    return {
        "tokens": _percent(amounts.tokens, limits.tokens),
        "cost": _percent(amounts.cost, limits.cost),
        "messages": _percent(amounts.messages, limits.messages),
    }


def _highest(percents: dict) -> float | None:
    values = [value for value in percents.values() if value is not None]
    return max(values) if values else None


def plan_usage(*, limits: Limits, used: Amounts, projected: Amounts | None = None) -> dict:
    """A window's usage against the limits: each kind's percent, `percent` (the highest: the limit nearest to being
    reached), the same of the projection when there is one, and `status` — `exceeds` over 100 %, `warning` over
    80 %, else `ok` (of the projection when there is one, as ccusage's token-limit status; null with no limits)."""
    percents = _percents(used, limits)
    projected_percents = _percents(projected, limits) if projected is not None else None
    percent = _highest(percents)
    projected_percent = _highest(projected_percents) if projected_percents is not None else None
    judged = projected_percent if projected is not None else percent
    if judged is None:
        status = None
    elif judged > 100:
        status = "exceeds"
    elif judged > WARNING_PERCENT:
        status = "warning"
    else:
        status = "ok"
    return {
        "token_counting": limits.token_counting,
        "tokens": used.tokens,
        "token_limit": limits.tokens,
        "tokens_percent": percents["tokens"],
        "cost_usd": used.cost,
        "cost_limit": limits.cost,
        "cost_percent": percents["cost"],
        "messages": used.messages,
        "message_limit": limits.messages,
        "messages_percent": percents["messages"],
        "percent": percent,
        "projected_tokens": projected.tokens if projected is not None else None,
        "projected_percent": projected_percent,
        "status": status,
    }


def plan_body(plan: UsagePlan | None) -> dict | None:
    """The plan as a report shows it: its figures and whether it is the user's own or the tenant's."""
    if plan is None:
        return None
    return {
        "id": plan.pk,
        "applies": "user" if plan.user_id else "tenant",
        "user_id": plan.user_id,
        "preset": plan.preset,
        "token_counting": plan.token_counting,
        "token_limit": plan.token_limit,
        "cost_limit": plan.cost_limit,
        "message_limit": plan.message_limit,
        "weekly_token_limit": plan.weekly_token_limit,
        "weekly_cost_limit": plan.weekly_cost_limit,
        "weekly_message_limit": plan.weekly_message_limit,
        "week_starts_on": plan.week_starts_on,
        "week_start_hour": plan.week_start_hour,
    }
