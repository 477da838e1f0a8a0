"""Creating and changing strategies. Every change to a versioned setting freezes a new StrategyVersion."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from memory_app.models import RecordType
from platform_kit.redaction import redact_fields
from sessions_app.models import Tenant
from strategies_app.models import Extractor, Strategy, StrategyVersion
from strategies_app.prompts import BUILTIN, prompt_validate

SCHEDULED_TASK = "strategies_app.tasks.strategy_scheduled"
# A tenant's own words, stored and sent to the extractor's model with every run: redacted like a message.
REDACTED_FIELDS = ("prompt", "description")


def _validate(values: dict) -> None:
    errors: dict[str, list[str]] = {}
    if "type" in values and values["type"] not in RecordType.values:
        errors["type"] = [f"Unknown type {values['type']!r}; one of: {', '.join(RecordType.values)}."]
    if "extractor" in values and values["extractor"] not in Extractor.values:
        errors["extractor"] = [f"Unknown extractor {values['extractor']!r}; one of: {', '.join(Extractor.values)}."]
    if "prompt" in values:
        try:
            prompt_validate(values["prompt"])
        except ValidationError as error:
            errors.update(error.message_dict)
    keys = values.get("on_state_keys")
    if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) and k.strip() for k in keys)):
        errors["on_state_keys"] = ['A list of state keys (non-empty strings), e.g. ["stage"].']
    threshold = values.get("message_threshold")
    if threshold is not None and not 0 < threshold <= 1:
        errors["message_threshold"] = ["A message score between 0 (exclusive) and 1, or null (off)."]
    accumulated = values.get("accumulated_threshold")
    if accumulated is not None and not accumulated > 0:
        errors["accumulated_threshold"] = ["A positive sum of message scores, or null (off)."]
    minutes = values.get("schedule_minutes")
    if minutes is not None and not 1 <= minutes <= 7 * 24 * 60:
        errors["schedule_minutes"] = ["Between 1 and 10080 minutes (a week), or null (off)."]
    if errors:
        raise ValidationError(errors)


def _freeze(strategy: Strategy, *, actor: str) -> StrategyVersion:
    snapshot = strategy.settings_snapshot()
    return StrategyVersion.objects.create(
        strategy=strategy,
        tenant_id=strategy.tenant_id,
        version=strategy.version,
        type=snapshot.pop("type"),
        description=snapshot.pop("description"),
        prompt=snapshot.pop("prompt"),
        extractor=snapshot.pop("extractor"),
        settings=snapshot,
        actor=actor,
    )


def schedule_sync(strategy: Strategy) -> None:
    """Keep the strategy's django-celery-beat task in step: every `schedule_minutes`, enabled with it.

    The periodic task is an ordinary one, editable in the admin (a crontab instead of the interval, say);
    it is only rewritten here when the strategy's schedule or enabled flag changes.
    """
    wanted = strategy.enabled and strategy.schedule_minutes is not None
    task = strategy.periodic_task
    if task is None and not wanted:
        return
    if task is None:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=strategy.schedule_minutes, period=IntervalSchedule.MINUTES
        )
        task = PeriodicTask.objects.create(
            name=f"memory strategy {strategy.name} of {strategy.tenant.name} ({strategy.pk})",
            task=SCHEDULED_TASK,
            kwargs=json.dumps({"strategy_id": str(strategy.pk)}),
            interval=interval,
            enabled=True,
            description="Runs the strategy over sessions with new messages. Created by Open ACE; "
            "edit the schedule here or as the strategy's schedule_minutes.",
        )
        Strategy.objects.filter(pk=strategy.pk).update(periodic_task=task)
        strategy.periodic_task = task
        return
    if strategy.schedule_minutes is not None:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=strategy.schedule_minutes, period=IntervalSchedule.MINUTES
        )
        task.interval, task.crontab = interval, None
    task.enabled = wanted
    task.save()


@transaction.atomic
def strategy_create(*, tenant: Tenant, name: str, type: str, actor: str = "api", builtin: bool = False, **settings):
    """A new strategy and its version 1. Settings not given take the model's defaults."""
    values = redact_fields({"type": type, **settings}, REDACTED_FIELDS)
    _validate(values)
    if Strategy.objects.filter(tenant=tenant, name=name).exists():
        raise ValidationError({"name": [f"A strategy named {name!r} exists already."]})
    strategy = Strategy.objects.create(tenant=tenant, name=name, builtin=builtin, **values)
    _freeze(strategy, actor=actor)
    schedule_sync(strategy)
    return strategy


@transaction.atomic
def strategy_update(*, tenant: Tenant, strategy_id, actor: str = "api", **changes) -> Strategy:
    """Change a strategy; a change to a versioned setting makes a new version (the old ones stay)."""
    strategy = Strategy.objects.select_for_update().get(pk=strategy_id, tenant=tenant)
    unknown = set(changes) - {*Strategy.VERSIONED_FIELDS, "enabled", "name"}
    if unknown:
        raise ValidationError({name: ["This field cannot be changed."] for name in sorted(unknown)})
    changes = redact_fields(changes, REDACTED_FIELDS)
    _validate(changes)
    if "name" in changes and changes["name"] != strategy.name:
        if strategy.builtin:
            raise ValidationError({"name": ["A built-in strategy keeps its name (records refer to it)."]})
        if Strategy.objects.filter(tenant=tenant, name=changes["name"]).exists():
            raise ValidationError({"name": [f"A strategy named {changes['name']!r} exists already."]})
    before = strategy.settings_snapshot()
    schedule_before = (strategy.enabled, strategy.schedule_minutes)
    for field, value in changes.items():
        setattr(strategy, field, value)
    if strategy.settings_snapshot() != before:
        strategy.version += 1
        _freeze(strategy, actor=actor)
    strategy.updated_at = timezone.now()
    strategy.save()
    if (strategy.enabled, strategy.schedule_minutes) != schedule_before:
        schedule_sync(strategy)
    return strategy


def builtin_strategies_ensure(*, tenant: Tenant) -> list[Strategy]:
    """The three built-in strategies (profile, task, facts), enabled, extractor `auto`. Safe to re-run."""
    out = []
    for type, spec in BUILTIN.items():
        spec = dict(spec)
        name = spec.pop("name")
        existing = Strategy.objects.filter(tenant=tenant, name=name).first()
        out.append(
            existing or strategy_create(tenant=tenant, name=name, type=type, actor="install", builtin=True, **spec)
        )
    return out


def strategy_names_handler(sender, tenant_id, **kwargs) -> list[str]:
    """The tenant's strategy names, for memory_app's `strategy_names_wanted`: what a record TTL may name."""
    return list(Strategy.objects.filter(tenant_id=tenant_id).values_list("name", flat=True))
