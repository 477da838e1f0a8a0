"""Usage plans: creating, changing and deleting them, with one set of rules for the API and the admin
(docs/accounting.md, "Plan windows"). A preset fills the figures the caller leaves out; every figure stays editable."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from sessions_app.models import PlanPreset, Tenant, TokenCounting, UsagePlan, Weekday
from sessions_app.models.plans import (
    COST_LIMIT_MAX,
    COST_LIMIT_MIN,
    LIMIT_FIELDS,
    MESSAGE_LIMIT_MAX,
    NOTES_MAX_LENGTH,
    PLAN_PRESETS,
    TOKEN_LIMIT_MAX,
)

EDITABLE_FIELDS = ("user_id", "preset", *LIMIT_FIELDS, "token_counting", "week_starts_on", "week_start_hour", "notes")
_WHOLE_LIMITS = {
    "token_limit": TOKEN_LIMIT_MAX,
    "message_limit": MESSAGE_LIMIT_MAX,
    "weekly_token_limit": TOKEN_LIMIT_MAX,
    "weekly_message_limit": MESSAGE_LIMIT_MAX,
}
_COST_LIMITS = ("cost_limit", "weekly_cost_limit")


class PlanInvalid(ValidationError):
    """Bad plan input: `message_dict` says, field by field, what to fix."""


def preset_figures(preset: str) -> dict:
    """The preset's limits, by field name."""
    figures = PLAN_PRESETS[preset]
    return {name: getattr(figures, name) for name in LIMIT_FIELDS}


def _cost_error(value) -> str | None:
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return "Must be a number."
    if isinstance(value, bool) or not amount.is_finite():
        return "Must be a number."
    if not COST_LIMIT_MIN <= amount <= COST_LIMIT_MAX or amount.as_tuple().exponent < -6:
        return f"USD from {COST_LIMIT_MIN} to {COST_LIMIT_MAX}, with at most 6 decimals, or null for no limit."
    return None


def plan_errors(values: dict) -> dict[str, list[str]]:
    """What is wrong with a plan's complete set of values (the stored ones with a change applied)."""
    errors: dict[str, str] = {}
    user_id = values.get("user_id")
    if not isinstance(user_id, str) or len(user_id) > 255:
        errors["user_id"] = "A user_id of up to 255 characters, or empty for the tenant's plan."
    for name, choices in (
        ("preset", PlanPreset),
        ("token_counting", TokenCounting),
        ("week_starts_on", Weekday),
    ):
        if values.get(name) not in choices.values:
            errors[name] = f"Use one of: {', '.join(choices.values)}."
    for name, maximum in _WHOLE_LIMITS.items():
        value = values.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum):
            errors[name] = f"A whole number from 1 to {maximum}, or null for no limit."
    for name in _COST_LIMITS:
        value = values.get(name)
        if value is not None and (error := _cost_error(value)):
            errors[name] = error
    hour = values.get("week_start_hour")
    if isinstance(hour, bool) or not isinstance(hour, int) or not 0 <= hour <= 23:
        errors["week_start_hour"] = "The UTC hour the week resets, a whole number from 0 to 23."
    notes = values.get("notes")
    if not isinstance(notes, str) or len(notes) > NOTES_MAX_LENGTH:
        errors["notes"] = f"Text of up to {NOTES_MAX_LENGTH} characters."
    return {field: [message] for field, message in errors.items()}


def _save(plan: UsagePlan, values: dict) -> UsagePlan:
    errors = plan_errors(values)
    if errors:
        raise PlanInvalid(errors)
    for name, value in values.items():
        setattr(plan, name, Decimal(str(value)) if name in _COST_LIMITS and value is not None else value)
    try:
        with transaction.atomic():
            plan.save()
    except IntegrityError:
        whose = f"user {values['user_id']!r}" if values["user_id"] else "the tenant"
        raise PlanInvalid({"user_id": [f"A plan for {whose} exists already: change that one."]}) from None
    return plan


def plan_values(*, plan: UsagePlan | None, fields: dict) -> dict:
    """A plan's complete values after a change: a new plan's defaults, or the plan's values; then the figures of the
    preset `fields` names, when it is new or another than the plan's; then `fields`."""
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise TypeError(f"Not a plan's field: {', '.join(sorted(unknown))}")
    if plan is None:
        values = {name: UsagePlan._meta.get_field(name).get_default() for name in EDITABLE_FIELDS}
    else:
        values = {name: getattr(plan, name) for name in EDITABLE_FIELDS}
    preset = fields.get("preset", values["preset"])
    if preset in PLAN_PRESETS and (plan is None or preset != plan.preset):
        values.update(preset_figures(preset))
    values.update(fields)
    return values


def plan_create(*, tenant: Tenant, **fields) -> UsagePlan:
    """A plan for the tenant (`user_id` empty, the default) or one user: the preset's figures (`custom`: none), with
    those given in their place."""
    return _save(UsagePlan(tenant=tenant), plan_values(plan=None, fields=fields))


def plan_update(*, tenant: Tenant, plan_id, **fields) -> UsagePlan:
    """Change some of the plan's fields. A new preset brings its figures for the limits not given with it."""
    with transaction.atomic():
        plan = UsagePlan.objects.select_for_update().get(tenant=tenant, pk=plan_id)
        return _save(plan, plan_values(plan=plan, fields=fields))


def plan_delete(*, tenant: Tenant, plan_id) -> None:
    UsagePlan.objects.filter(tenant=tenant, pk=plan_id).delete()
