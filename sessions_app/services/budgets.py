"""Budgets: creating, changing and deleting them (every change kept as a BudgetChange), and keeping what their
periods used exact as usage arrives — in the statement that adds a write's usage to the roll-ups — with the
crossing of a threshold detected by the write that crosses it (docs/budgets.md).

How a write is counted: the ledger's unit of work (services.ledger, step 5) checks the hard limit
(`hard_limit_check`) and adds `usage_clause(...)` to its one statement. That files the write's usage (per hour
and model) into the period rows (`BudgetUsage`) of every active budget that covers the session, and returns each
row's new value and what the write added (`usage_evaluate` reads them). A row is locked by the upsert until the
write commits, so concurrent writers to one budget take turns and each sees the others' usage: the write that
takes a period from below a threshold to or over it is the one that records the crossing (`BudgetCrossing`,
unique per budget, period and threshold), and the alerts go out after it commits.
"""

from __future__ import annotations

import json
import re
import uuid
import zoneinfo
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from urllib.parse import parse_qs, urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import connection, transaction
from django.utils import timezone

from platform_kit import outbound
from platform_kit.db import Clause
from platform_kit.tasks import enqueue_or_leave_to_sweep
from sessions_app.models import (
    ApiKey,
    Budget,
    BudgetChange,
    BudgetChangeAction,
    BudgetCrossing,
    BudgetPeriod,
    BudgetScope,
    BudgetUnit,
    BudgetUsage,
    ModelPrice,
    Session,
    Tenant,
    UsageHourly,
)
from sessions_app.models.budgets import (
    EMAILS_MAX_COUNT,
    THRESHOLD_MAX,
    THRESHOLD_MIN,
    THRESHOLDS_MAX_COUNT,
    TOKEN_LIMIT_MAX,
    USD_LIMIT_MAX,
    USD_LIMIT_MIN,
    WINDOW_HOURS_MAX,
    WINDOW_HOURS_MIN,
)
from sessions_app.pricing import PRICED_TOKEN_FIELDS, PriceBook, cost_sql, normalize_model
from sessions_app.selectors.budgets import (
    HOUR,
    amount,
    budget_blocking,
    budget_bounds,
    budget_status,
    budgets_blocked,
    floor_hour,
    period_bounds,
)
from sessions_app.signals import budget_crossed

# What a client may set; the rest is kept by the service.
EDITABLE_FIELDS = (
    "name",
    "scope",
    "scope_value",
    "api_key",
    "unit",
    "limit",
    "period",
    "window_hours",
    "timezone",
    "thresholds",
    "emails",
    "feishu_url",
    "feishu_secret",
    "dingtalk_url",
    "dingtalk_secret",
    "hard_limit",
    "active",
)
SECRET_FIELDS = ("feishu_secret", "dingtalk_secret")
# A change to one of these changes what the budget counts: its current period is counted again.
COUNTING_FIELDS = ("scope", "scope_value", "api_key", "unit", "period", "window_hours", "timezone", "active")
FEISHU_PATH = re.compile(r"^/open-apis/bot/v2/hook/[\w-]+$")
DINGTALK_PATH = "/robot/send"
TIMEZONES = zoneinfo.available_timezones()


class BudgetInvalid(ValidationError):
    """Bad budget input: `message_dict` says, field by field, what to fix."""


# -- validation: one set of rules for the API and the admin -------------------------------------------------
def _limit_error(unit: str, limit) -> str | None:
    if isinstance(limit, bool) or not isinstance(limit, int | float | Decimal | str):
        return "Must be a number."
    try:
        value = Decimal(str(limit))
    except InvalidOperation:
        return "Must be a number."
    if not value.is_finite():
        return "Must be a number."
    if unit == BudgetUnit.TOKENS:
        if value != value.to_integral_value() or not 1 <= value <= TOKEN_LIMIT_MAX:
            return f"A token budget's limit is a whole number of tokens from 1 to {TOKEN_LIMIT_MAX}."
    elif not Decimal(USD_LIMIT_MIN) <= value <= USD_LIMIT_MAX or value.as_tuple().exponent < -6:
        return f"A USD budget's limit is from {USD_LIMIT_MIN} to {USD_LIMIT_MAX}, with at most 6 decimals."
    return None


def _thresholds_error(thresholds) -> str | None:
    if not isinstance(thresholds, list) or not thresholds or len(thresholds) > THRESHOLDS_MAX_COUNT:
        return f"Send a list of 1 to {THRESHOLDS_MAX_COUNT} percentages, e.g. [80, 100]."
    if any(
        isinstance(t, bool) or not isinstance(t, int) or not THRESHOLD_MIN <= t <= THRESHOLD_MAX for t in thresholds
    ):
        return f"Each threshold is a whole percentage from {THRESHOLD_MIN} to {THRESHOLD_MAX}."
    if len(set(thresholds)) != len(thresholds):
        return "A threshold appears twice."
    return None


def _bot_url_error(url: str, *, bot: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Must be an http(s) URL."
    if bot == "feishu" and not FEISHU_PATH.match(parts.path):
        return "A Feishu bot's webhook looks like https://open.feishu.cn/open-apis/bot/v2/hook/<token>."
    if bot == "dingtalk" and (parts.path != DINGTALK_PATH or not parse_qs(parts.query).get("access_token")):
        return "A DingTalk robot's webhook looks like https://oapi.dingtalk.com/robot/send?access_token=<token>."
    return outbound.url_refusal(url)


def budget_errors(values: dict, *, tenant: Tenant) -> dict[str, list[str]]:
    """What is wrong with a budget's complete set of values (the stored ones with a change applied)."""
    errors: dict[str, str] = {}
    name = values.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        errors["name"] = "A name of 1 to 100 characters."
    scope = values.get("scope")
    if scope not in BudgetScope.values:
        errors["scope"] = f"Use one of: {', '.join(BudgetScope.values)}."
    elif scope in (BudgetScope.USER, BudgetScope.PROJECT):
        value = values.get("scope_value")
        if not isinstance(value, str) or not value or len(value) > 255:
            errors["scope_value"] = f"Name the {scope} this budget is about (1 to 255 characters)."
    elif scope == BudgetScope.API_KEY:
        api_key = values.get("api_key")
        if api_key is None or api_key.tenant_id != tenant.pk:
            errors["api_key"] = "Name one of your API keys (its id)."
    if scope in (BudgetScope.TENANT, BudgetScope.API_KEY) and values.get("scope_value"):
        errors["scope_value"] = f"A budget of scope {scope} takes no scope_value."
    unit = values.get("unit")
    if unit not in BudgetUnit.values:
        errors["unit"] = f"Use one of: {', '.join(BudgetUnit.values)}."
    else:
        limit_error = _limit_error(unit, values.get("limit"))
        if limit_error:
            errors["limit"] = limit_error
    period = values.get("period")
    window = values.get("window_hours")
    if period not in BudgetPeriod.values:
        errors["period"] = f"Use one of: {', '.join(BudgetPeriod.values)}."
    elif period == BudgetPeriod.ROLLING:
        if (
            isinstance(window, bool)
            or not isinstance(window, int)
            or not WINDOW_HOURS_MIN <= window <= WINDOW_HOURS_MAX
        ):
            errors["window_hours"] = (
                f"A rolling budget needs window_hours, a whole number from {WINDOW_HOURS_MIN} to {WINDOW_HOURS_MAX}."
            )
    elif window is not None:
        errors["window_hours"] = "Only a rolling budget has window_hours (leave it out or null)."
    if values.get("timezone") not in TIMEZONES:
        errors["timezone"] = "An IANA time zone name, e.g. UTC, Asia/Shanghai, Europe/Berlin."
    thresholds_error = _thresholds_error(values.get("thresholds"))
    if thresholds_error:
        errors["thresholds"] = thresholds_error
    emails = values.get("emails")
    if not isinstance(emails, list) or len(emails) > EMAILS_MAX_COUNT:
        errors["emails"] = f"A list of up to {EMAILS_MAX_COUNT} email addresses."
    else:
        for email in emails:
            try:
                validate_email(email if isinstance(email, str) else "")
            except ValidationError:
                errors["emails"] = f"Not an email address: {email!r}."
                break
    for bot in ("feishu", "dingtalk"):
        url = values.get(f"{bot}_url") or ""
        url_error = _bot_url_error(url, bot=bot) if url else None
        if url_error:
            errors[f"{bot}_url"] = url_error
        if values.get(f"{bot}_secret") and not url:
            errors[f"{bot}_secret"] = f"A secret without {bot}_url: set the URL too."
    return {field: [message] for field, message in errors.items()}


# -- create, change, delete -----------------------------------------------------------------------------
def _values(budget: Budget) -> dict:
    values = {name: getattr(budget, name) for name in EDITABLE_FIELDS if name != "api_key"}
    values["api_key"] = budget.api_key if budget.api_key_id else None
    return values


def _shown(name: str, value):
    """A field's value as the audit log keeps it (secrets never)."""
    if name in SECRET_FIELDS:
        return "(set)" if value else ""
    if isinstance(value, ApiKey):
        return str(value.pk)
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return value


def _normalise(fields: dict) -> dict:
    fields = {name: value for name, value in fields.items() if name in EDITABLE_FIELDS}
    if isinstance(fields.get("name"), str):
        fields["name"] = fields["name"].strip()
    if "limit" in fields and isinstance(fields["limit"], int | float | str) and not isinstance(fields["limit"], bool):
        try:
            fields["limit"] = Decimal(str(fields["limit"]))
        except InvalidOperation:
            pass
    if isinstance(fields.get("thresholds"), list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in fields["thresholds"]
    ):
        fields["thresholds"] = sorted(fields["thresholds"])
    return fields


def _check(values: dict, *, tenant: Tenant, budget_id=None) -> None:
    errors = budget_errors(values, tenant=tenant)
    name = values.get("name")
    if "name" not in errors and Budget.objects.filter(tenant=tenant, name=name).exclude(pk=budget_id).exists():
        errors["name"] = ["You have a budget of this name already."]
    if errors:
        raise BudgetInvalid(errors)


def _lock_usage() -> None:
    """Hold writers of usage back while a budget's period is counted from the roll-ups: a write that added to
    them before is in the count; one after sees the budget and adds to it itself (see the module docstring)."""
    with connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {UsageHourly._meta.db_table} IN SHARE MODE")


def budget_create(*, tenant: Tenant, actor: str, **fields) -> Budget:
    """A new budget, its current period counted from the roll-ups (an API-key budget counts from now: usage is
    not rolled up by key). Raises BudgetInvalid."""
    values = {name: Budget._meta.get_field(name).get_default() for name in EDITABLE_FIELDS if name != "api_key"}
    values.update(api_key=None, window_hours=None)
    values.update(_normalise(fields))
    _check(values, tenant=tenant)
    with transaction.atomic():
        _lock_usage()
        budget = Budget.objects.create(tenant=tenant, **values)
        _recount(budget)
        _record(
            budget, BudgetChangeAction.CREATED, actor, {n: [None, _shown(n, v)] for n, v in _values(budget).items()}
        )
        _alert_thresholds_already_crossed(budget, cause="budget_created")
    return budget


def budget_update(*, tenant: Tenant, budget_id, actor: str, **fields) -> Budget:
    """Change a budget; a change to what it counts counts its current period again. Raises BudgetInvalid,
    Budget.DoesNotExist."""
    with transaction.atomic():
        budget = (
            Budget.objects.select_for_update(of=("self",)).select_related("api_key").get(pk=budget_id, tenant=tenant)
        )
        before = _values(budget)
        values = before | _normalise(fields)
        if values.get("period") != BudgetPeriod.ROLLING and "window_hours" not in fields:
            values["window_hours"] = None
        _check(values, tenant=tenant, budget_id=budget.pk)
        changes = {
            name: [_shown(name, before[name]), _shown(name, values[name])]
            for name in EDITABLE_FIELDS
            if before[name] != values[name]
        }
        for name in SECRET_FIELDS:
            if name in changes and changes[name] == ["(set)", "(set)"]:
                changes[name] = ["(set)", "(changed)"]
        if not changes:
            return budget
        for name, value in values.items():
            setattr(budget, name, value)
        budget.save()
        if any(name in changes for name in COUNTING_FIELDS):
            _lock_usage()
            _recount(budget)
        else:
            _mark_blocked(budget)
        _record(budget, BudgetChangeAction.UPDATED, actor, changes)
        if any(name in changes for name in (*COUNTING_FIELDS, "limit", "thresholds")):
            _alert_thresholds_already_crossed(budget, cause="budget_changed")
    return budget


def budget_delete(*, tenant: Tenant, budget_id, actor: str) -> None:
    """Delete a budget with its usage and crossings; the audit log keeps it. Raises Budget.DoesNotExist."""
    with transaction.atomic():
        budget = (
            Budget.objects.select_for_update(of=("self",)).select_related("api_key").get(pk=budget_id, tenant=tenant)
        )
        _record(
            budget, BudgetChangeAction.DELETED, actor, {n: [_shown(n, v), None] for n, v in _values(budget).items()}
        )
        budget.delete()


def budget_recount(*, budget: Budget) -> None:
    """Count the budget's current period again from the roll-ups (after correcting a price, for one)."""
    with transaction.atomic():
        _lock_usage()
        _recount(Budget.objects.select_for_update().get(pk=budget.pk))


def user_budgets_forget(*, tenant_id, user_id: str) -> dict[str, int]:
    """Forgetting a user (services.forget, inside its transaction, before their messages go): the budgets scoped
    to them go with their usage, crossings and change log (which name them), and what they used is taken out of
    the tenant's other budgets (the tenant's, their projects', their keys'), period by period. Rows per model."""
    from platform_kit.db import cascade_delete
    from sessions_app.selectors.recount import sessions_hourly_tokens

    scoped = "tenant_id = %s AND scope = %s AND scope_value = %s"
    params = [tenant_id, BudgetScope.USER.value, user_id]
    budget_table = Budget._meta.db_table
    # The change log keeps a budget by id: its rows of the user's budgets, and any that show the user as a
    # scope_value once set ({field: [before, after]}).
    deleted = cascade_delete(
        BudgetChange,
        f"tenant_id = %s AND (budget_id IN (SELECT id FROM {budget_table} WHERE {scoped})"
        " OR changes -> 'scope_value' @> to_jsonb(%s::text))",
        [tenant_id, *params, user_id],
    )
    deleted.update(cascade_delete(Budget, scoped, params))
    sessions = {s.pk: s for s in Session.objects.filter(tenant_id=tenant_id, user_id=user_id)}
    usage = sessions_hourly_tokens(tenant_id=tenant_id, session_ids=list(sessions)) if sessions else {}
    entries = [
        (sessions[session_id], {key: {name: -count for name, count in tokens.items()} for key, tokens in hours.items()})
        for session_id, hours in usage.items()
    ]
    clauses, params, select, select_params = usage_sql(entries=entries, now=timezone.now())
    if clauses:
        with connection.cursor() as cursor:
            cursor.execute(f"WITH {clauses} {select}", [*params, *select_params])
            changed = {row[0] for row in cursor.fetchall()}
        # A period the budget never counted (before it was made) has no row to take from: nothing to keep.
        BudgetUsage.objects.filter(budget_id__in=changed, used__lte=0).delete()
        for budget in Budget.objects.filter(pk__in=changed, hard_limit=True):
            _mark_blocked(budget)
        if changed:
            deleted["sessions_app.Budget (usage withdrawn)"] = len(changed)
    return deleted


def _alert_thresholds_already_crossed(budget: Budget, *, cause: str) -> None:
    """A budget created (or given a lower limit, new thresholds, another scope) while its current period is
    already at or over some of its thresholds: each such threshold is crossed now, alerted once like any other
    crossing, unless this period has a crossing of it already (no usage write will cross it again)."""
    if not budget.active:
        return
    now = timezone.now()
    status = budget_status(budget, now=now)
    over = [t for t in budget.thresholds if status.used >= budget.limit * t / 100]
    if not over:
        return
    alerted = set(
        BudgetCrossing.objects.filter(
            budget=budget, threshold__in=over, crossed_at__gte=status.period_start
        ).values_list("threshold", flat=True)
    )
    crossings = [
        _crossing(budget, status.period_start, status.period_end, threshold, status.used, now, cause=cause)
        for threshold in over
        if threshold not in alerted
    ]
    if crossings:
        _record_crossings(crossings)


def _record(budget: Budget, action: str, actor: str, changes: dict) -> None:
    BudgetChange.objects.create(
        tenant_id=budget.tenant_id,
        budget_id=budget.pk,
        budget_name=budget.name,
        action=action,
        actor=actor[:255],
        changes=changes,
    )


def _recount(budget: Budget) -> None:
    """Replace the budget's usage rows with its current period counted from the hourly roll-ups."""
    BudgetUsage.objects.filter(budget=budget).delete()
    if budget.active and budget.scope != BudgetScope.API_KEY:
        start, end = budget_bounds(budget, timezone.now())
        rows = UsageHourly.objects.filter(tenant_id=budget.tenant_id, hour__gte=start, hour__lt=end)
        if budget.scope == BudgetScope.USER:
            rows = rows.filter(user_id=budget.scope_value)
        elif budget.scope == BudgetScope.PROJECT:
            rows = rows.filter(project=budget.scope_value)
        book = PriceBook.load() if budget.unit == BudgetUnit.USD else None
        used: dict[datetime, Decimal] = defaultdict(Decimal)
        for row in rows.values("hour", "model", "total_tokens", *PRICED_TOKEN_FIELDS):
            bucket = row["hour"] if budget.period == BudgetPeriod.ROLLING else start
            if book is None:
                used[bucket] += row["total_tokens"]
            else:
                price = book.price_for(row["model"], row["hour"].astimezone(UTC).date())
                used[bucket] += price.cost(row) if price else Decimal(0)
        BudgetUsage.objects.bulk_create(
            BudgetUsage(budget=budget, tenant_id=budget.tenant_id, bucket=bucket, used=value)
            for bucket, value in used.items()
            if value
        )
    _mark_blocked(budget)


# -- as usage arrives ----------------------------------------------------------------------------------
# The write's usage per session and hour: the budgets covering each, the period row each hour falls in (the
# period's start in the budget's zone, or the hour for a rolling window), and what it adds: total_tokens, or
# the tokens priced with the model's price (exact name, else the longest prefix; unpriced models add nothing).
# The caller makes `usage` a WITH clause of its statement and selects from `budget_rows`.
_USAGE_SQL = """
budget_deltas AS (
  SELECT b.id AS budget_id, b.tenant_id,
    CASE WHEN b.period = 'rolling' THEN v.hour
         ELSE date_trunc(b.period, v.hour AT TIME ZONE b.timezone) AT TIME ZONE b.timezone END AS bucket,
    SUM(CASE WHEN b.unit = 'tokens' THEN v.total_tokens::numeric
        ELSE COALESCE(({cost}) / 1000000, 0) END) AS delta
  FROM {budget} b
  JOIN (VALUES {values}) AS v(tenant_id, user_id, project, api_key_id, hour, model,
    {value_tokens})
    ON b.tenant_id = v.tenant_id::uuid
  LEFT JOIN LATERAL (
    SELECT * FROM {price} p
    WHERE b.unit = 'usd' AND ((p.match = 'exact' AND p.model = v.model)
      OR (p.match = 'prefix' AND v.model <> '' AND starts_with(v.model, p.model)))
      AND (p.effective_from IS NULL OR p.effective_from <= (v.hour AT TIME ZONE 'UTC')::date)
    ORDER BY p.match = 'exact' DESC, length(p.model) DESC, p.effective_from DESC NULLS LAST LIMIT 1
  ) p ON true
  WHERE b.active AND (b.scope = 'tenant' OR (b.scope = 'user_id' AND b.scope_value = v.user_id)
    OR (b.scope = 'project' AND b.scope_value = v.project)
    OR (b.scope = 'api_key' AND b.api_key_id = v.api_key_id::uuid))
  GROUP BY 1, 2, 3
),
budget_added AS (
  INSERT INTO {usage} (budget_id, tenant_id, bucket, used)
  SELECT budget_id, tenant_id, bucket, delta FROM budget_deltas WHERE delta <> 0 ORDER BY 1, 3
  ON CONFLICT (budget_id, bucket, tenant_id) DO UPDATE SET used = {usage}.used + EXCLUDED.used
  RETURNING budget_id, bucket, used
)"""
# One row per period row the write added to: its new value, what the write added, and for a rolling window the
# window's other hours (as they were when the statement began: nobody else writes an hour gone by).
_BUDGET_ROWS_SQL = """
SELECT a.budget_id, a.bucket, a.used, d.delta, b.limit, b.thresholds, b.period, b.window_hours, b.timezone,
  b.hard_limit,
  CASE WHEN b.period = 'rolling' THEN (
    SELECT COALESCE(SUM(o.used), 0) FROM {usage} o
    WHERE o.budget_id = a.budget_id AND o.bucket > %s - make_interval(hours => b.window_hours) AND o.bucket <= %s
      AND o.bucket NOT IN (SELECT d2.bucket FROM budget_deltas d2 WHERE d2.budget_id = a.budget_id)) END
FROM budget_added a JOIN budget_deltas d USING (budget_id, bucket) JOIN {budget} b ON b.id = a.budget_id"""
_VALUE_TOKENS = ("total_tokens", *PRICED_TOKEN_FIELDS)
_VALUE_ROW = "(%s, %s, %s, %s, %s::timestamptz, %s, " + ", ".join(["%s::bigint"] * len(_VALUE_TOKENS)) + ")"


def usage_sql(*, entries: list[tuple[Session, dict]], now: datetime) -> tuple[str, list, str, list]:
    """(the WITH clauses, their parameters, the SELECT of the budget rows, its parameters) that file the usage of
    `entries` ({(hour, model): counters} per session, as the roll-ups get them) into the covering budgets; empty
    strings when the write added no tokens."""
    rows = []
    for session, deltas in entries:
        api_key = str(session.api_key_id) if session.api_key_id else None
        for (hour, model), delta in deltas.items():
            tokens = [delta.get(name, 0) for name in _VALUE_TOKENS]
            if any(tokens):
                rows.append([str(session.tenant_id), session.user_id, session.project, api_key, hour, model, *tokens])
    if not rows:
        return "", [], "", []
    for row in rows:
        row[5] = normalize_model(row[5])
    tables = {
        "budget": Budget._meta.db_table,
        "usage": BudgetUsage._meta.db_table,
        "price": ModelPrice._meta.db_table,
    }
    clauses = _USAGE_SQL.format(
        values=", ".join([_VALUE_ROW] * len(rows)),
        value_tokens=", ".join(_VALUE_TOKENS),
        cost=cost_sql("v", "p"),
        **tables,
    )
    current_hour = floor_hour(now)
    return clauses, [value for row in rows for value in row], _BUDGET_ROWS_SQL.format(**tables), [current_hour] * 2


def usage_clause(*, entries: list[tuple[Session, dict]], now: datetime) -> Clause | None:
    """`usage_sql` as the tail of a statement of data-modifying WITH clauses (`platform_kit.db.together`'s
    `select`): its clauses, then the SELECT of the budget rows. None when the write added no tokens."""
    clauses, params, select, select_params = usage_sql(entries=entries, now=now)
    return (f", {clauses} {select}", [*params, *select_params]) if clauses else None


def usage_evaluate(*, rows: list[tuple], now: datetime) -> None:
    """After the statement of `usage_sql`, in the writer's transaction: record the thresholds the write crossed
    in each budget's current period, mark hard-limit budgets it took to their limit, and have the alerts sent
    after the commit."""
    by_budget: dict[uuid.UUID, list[tuple]] = defaultdict(list)
    for row in rows:
        by_budget[row[0]].append(row)
    crossed: list[BudgetCrossing] = []
    for budget_id, budget_rows in by_budget.items():
        _, _, _, _, limit, thresholds, period, window_hours, tz, hard_limit, others = budget_rows[0]
        start, end = period_bounds(period=period, window_hours=window_hours, tz=tz, now=now)
        current = [row for row in budget_rows if start <= row[1] < end]
        if not current:
            continue  # usage dated in another period (an import of old logs): counted, never alerted
        after = (others or Decimal(0)) + sum((row[2] for row in current), Decimal(0))
        before = after - sum((row[3] for row in current), Decimal(0))
        reached = [
            t
            for t in (json.loads(thresholds) if isinstance(thresholds, str) else thresholds)
            if before < limit * t / 100 <= after
        ]
        if not reached and not (hard_limit and after >= limit):
            continue  # the usual case: no budget row to read
        budget = Budget.objects.get(pk=budget_id)
        crossed.extend(_crossing(budget, start, end, threshold, after, now) for threshold in reached)
        if hard_limit and after >= limit:
            _mark_blocked(budget, now=now)
    if crossed:
        _record_crossings(crossed)


def _crossing(
    budget: Budget, start, end, threshold: int, used: Decimal, now: datetime, *, cause: str = "usage"
) -> BudgetCrossing:
    percent = float((used * 100 / budget.limit).quantize(Decimal("0.01")))
    payload = {
        "budget": {
            "id": str(budget.pk),
            "name": budget.name,
            "scope": budget.scope,
            "scope_value": budget.scope_value,
            "api_key": str(budget.api_key_id) if budget.api_key_id else None,
            "unit": budget.unit,
            "period": budget.period,
            "window_hours": budget.window_hours,
            "timezone": budget.timezone,
        },
        "threshold": threshold,
        "period_start": start.isoformat(),
        "period_end": end.isoformat(),
        "used": _json_amount(budget, used),
        "limit": _json_amount(budget, budget.limit),
        "percent": percent,
        "crossed_at": now.isoformat(),
        "cause": cause,
    }
    return BudgetCrossing(
        tenant_id=budget.tenant_id,
        budget=budget,
        period_start=start,
        threshold=threshold,
        used=used,
        limit=budget.limit,
        crossed_at=now,
        payload=payload,
    )


def _json_amount(budget: Budget, value: Decimal):
    shown = amount(budget, value)
    return shown if isinstance(shown, int) else float(shown)


def _record_crossings(crossings: list[BudgetCrossing]) -> None:
    """Insert the crossings; one already recorded (a concurrent writer's, or a period counted again) is skipped.
    The projection is added to each payload here, from the usage as this write leaves it."""
    recorded = []
    table = BudgetCrossing._meta.db_table
    with connection.cursor() as cursor:
        for crossing in crossings:
            status = budget_status(crossing.budget, now=crossing.crossed_at)
            at = status.projected_exhaustion_at
            crossing.payload["projected_exhaustion_at"] = at.isoformat() if at else None
            crossing.payload["crossing_id"] = str(crossing.pk)
            cursor.execute(
                f'INSERT INTO {table} (id, tenant_id, budget_id, period_start, threshold, used, "limit", crossed_at,'
                " payload, alerts) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, '{}'::jsonb)"
                " ON CONFLICT (budget_id, period_start, threshold, tenant_id) DO NOTHING RETURNING id",
                [
                    crossing.pk,
                    crossing.tenant_id,
                    crossing.budget_id,
                    crossing.period_start,
                    crossing.threshold,
                    crossing.used,
                    crossing.limit,
                    crossing.crossed_at,
                    json.dumps(crossing.payload),
                ],
            )
            if cursor.fetchone():
                recorded.append(crossing)
    if recorded:
        transaction.on_commit(lambda: _announce(recorded))


def _announce(crossings: list[BudgetCrossing]) -> None:
    for crossing in crossings:
        budget_crossed.send(
            sender=Budget,
            tenant_id=crossing.tenant_id,
            budget_id=crossing.budget_id,
            threshold=crossing.threshold,
            payload=crossing.payload,
        )
        enqueue_or_leave_to_sweep(
            "sessions_app.tasks.send_budget_alert",
            str(crossing.pk),
            what=f"the alerts of budget crossing {crossing.pk}",
            sweep="send_pending_budget_alerts",
        )


# -- hard limits -------------------------------------------------------------------------------------
class BudgetUsedUp(Exception):
    """A used-up hard-limit budget covers the write: it is refused (429, docs/budgets.md)."""

    def __init__(self, budget: Budget):
        super().__init__(budget.name)
        self.budget = budget


def hard_limit_check(*, sessions: list[Session], api_key_id, now: datetime) -> None:
    """Raise BudgetUsedUp when a used-up hard-limit budget covers a write by `api_key_id` into one of `sessions`
    (the ledger's unit of work, step 5, for the ways in a used-up budget refuses): one small query on the budgets
    the writes that reached their limits marked, whatever the number of budgets."""
    blocked = budgets_blocked(tenant_id=sessions[0].tenant_id, now=now)
    for session in sessions:
        budget = budget_blocking(session=session, api_key_id=api_key_id, blocked=blocked)
        if budget is not None:
            raise BudgetUsedUp(budget)


def _mark_blocked(budget: Budget, *, now: datetime | None = None) -> None:
    """Set when writes covered by a hard-limit budget are refused until: the period's end (for a rolling window,
    the hour its oldest usage slides out far enough to fall under the limit), or never (null)."""
    now = now or timezone.now()
    until = None
    if budget.active and budget.hard_limit:
        status = budget_status(budget, now=now)
        if status.exhausted:
            until = status.period_end
            if budget.period == BudgetPeriod.ROLLING:
                until = _rolling_free_at(budget, status.period_start, status.period_end, status.used)
    if until != budget.blocked_until:
        Budget.objects.filter(pk=budget.pk).update(blocked_until=until)
        budget.blocked_until = until


def _rolling_free_at(budget: Budget, start: datetime, end: datetime, used: Decimal) -> datetime:
    """When the window, sliding on, leaves behind enough of its oldest hours to fall under the limit."""
    hours = BudgetUsage.objects.filter(budget=budget, bucket__gte=start, bucket__lt=end).order_by("bucket")
    for hour in hours:
        used -= hour.used
        if used < budget.limit:
            return hour.bucket + budget.window_hours * HOUR
    return end + (budget.window_hours - 1) * HOUR
