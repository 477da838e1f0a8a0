"""Weekly usage, as ccusage's `weekly` report sums it, per user or per machine, with the percent of the users' plans
and the current week's projection (docs/accounting.md, "Plan windows").

A week is seven days in UTC from a weekday and hour: those of `start_of_week`/`start_hour` when given, else of the
user's plan (Anthropic resets a plan's weekly limits at a fixed weekday and time of each account), else Sunday 00:00
(ccusage's default `--start-of-week`, with its days in UTC). Weeks start on whole UTC hours, so a week is a sum of
hourly roll-ups: this reads them, never messages."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import DateField, DateTimeField, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from sessions_app.models import Tenant, UsageHourly, Weekday
from sessions_app.models.plans import WEEKDAY_NUMBERS
from sessions_app.pricing import Cost, PriceBook, money
from sessions_app.schema import LONG_CONTEXT_FIELDS
from sessions_app.selectors.blocks import ENTRY_TOKENS, ONE_HOUR
from sessions_app.selectors.plans import Amounts, Limits, plan_body, plan_for, plan_usage, plans_for

WEEK = timedelta(days=7)
HOUR = timedelta(hours=1)
DEFAULT_WEEKS = 8  # the current week and the seven before it
WEEKS_MAX = 53
WEEKLY_GROUP_BY = ("user_id", "machine")
COUNTED = ("requests", "messages", *ENTRY_TOKENS)
# 2001-01-01 was a Monday: the week origin of each weekday and hour is an offset from it.
_MONDAY = datetime(2001, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class WeekStart:
    weekday: str = Weekday.SUNDAY
    hour: int = 0

    @property
    def origin(self) -> datetime:
        return _MONDAY + timedelta(days=WEEKDAY_NUMBERS[self.weekday], hours=self.hour)

    def floor(self, moment: datetime) -> datetime:
        """The start of the week that holds `moment`."""
        return self.origin + (moment - self.origin) // WEEK * WEEK

    def ceil(self, moment: datetime) -> datetime:
        start = self.floor(moment)
        return start if start == moment else start + WEEK


def week_start_for(*, plan, weekday: str | None, hour: int | None) -> WeekStart:
    """The arguments', else the plan's, else Sunday 00:00 UTC."""
    default = WeekStart(plan.week_starts_on, plan.week_start_hour) if plan is not None else WeekStart()
    return WeekStart(weekday or default.weekday, default.hour if hour is None else hour)


def week_window(
    *, week: WeekStart, since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """[since, until) rounded out to whole weeks; by default the current week and the seven before it."""
    until = week.ceil(until) if until is not None else week.floor(now) + WEEK
    since = week.floor(since) if since is not None else until - DEFAULT_WEEKS * WEEK
    return since, until


def usage_weekly(
    *,
    tenant: Tenant,
    user_id: str | None = None,
    machine: str | None = None,
    tool: str | None = None,
    project: str | None = None,
    group_by: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    start_of_week: str | None = None,
    start_hour: int | None = None,
    now: datetime | None = None,
    book: PriceBook | None = None,
) -> dict:
    """Usage per week (and per user or machine with `group_by`): requests, messages, tokens, cost; for a known user
    (`user_id`, or grouped by user) the percent of their plan's weekly limits, and the current week's projection
    at its pace so far. One grouped read of the hourly roll-ups."""
    now = now or timezone.now()
    book = book or PriceBook.load()
    plan = plan_for(tenant=tenant, user_id=user_id or "")  # the user's, else the tenant's: whose reset starts the weeks
    week = week_start_for(plan=plan, weekday=start_of_week, hour=start_hour)
    since, until = week_window(week=week, since=since, until=until, now=now)

    rows = UsageHourly.objects.filter(tenant=tenant, hour__gte=since, hour__lt=until)
    for name, value in (("user_id", user_id), ("machine", machine), ("tool", tool), ("project", project)):
        if value is not None:
            rows = rows.filter(**{name: value})
    week_sql = "%s::timestamptz + floor(extract(epoch from hour - %s::timestamptz) / 604800) * interval '7 days'"
    keys = ["week", "model", "day", *([group_by] if group_by else [])]  # by day: each day at its own prices
    rows = (
        rows.annotate(
            week=RawSQL(week_sql, (week.origin, week.origin), output_field=DateTimeField()),
            day=RawSQL("(hour AT TIME ZONE 'UTC')::date", (), output_field=DateField()),
        )
        .values(*keys)
        .annotate(**{name: Sum(name) for name in (*COUNTED, ONE_HOUR, *LONG_CONTEXT_FIELDS)})
        .order_by()
    )

    sums: dict = defaultdict(lambda: dict.fromkeys(COUNTED, 0))
    costs: dict = defaultdict(Cost)
    for row in rows:
        key = (row["week"], row[group_by] if group_by else None)
        for name in COUNTED:
            sums[key][name] += row[name] or 0
        priced = {name: row[name] or 0 for name in (*ENTRY_TOKENS, ONE_HOUR, *LONG_CONTEXT_FIELDS)}
        costs[key].add(book, row["model"], priced, row["day"])

    if group_by == "user_id":
        plans = plans_for(tenant=tenant, user_ids={key for _, key in sums})
    else:
        plans = {user_id: plan} if user_id is not None else {}
    results = []
    totals, total_cost = dict.fromkeys(COUNTED, 0), Cost()
    for (start, key), counted in sorted(sums.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        whose = key if group_by == "user_id" else user_id
        user_plan = plans.get(whose) if whose is not None else None
        results.append(_week_row(start, key, counted, costs[(start, key)], now=now, plan=user_plan))
        for name in COUNTED:
            totals[name] += counted[name]
        total_cost.merge(costs[(start, key)])
    return {
        "group_by": group_by,
        "user_id": user_id,
        "machine": machine,
        "tool": tool,
        "project": project,
        "since": since,
        "until": until,
        "now": now,
        "start_of_week": week.weekday,
        "start_hour": week.hour,
        "plan": plan_body(plan) if user_id is not None else None,
        "results": results,
        "totals": {**totals, "all_tokens": _all_tokens(totals), **total_cost.as_fields()},
        "unpriced_models": sorted(total_cost.unpriced_models),
    }


def current_week(*, tenant: Tenant, user_id: str, now: datetime, book: PriceBook, **scope) -> dict:
    """A user's current week against their plan: its row of `usage_weekly`, or, before anything is used in it (just
    after the weekly reset, say), a row of zeros with the plan's 0%."""
    weekly = usage_weekly(tenant=tenant, user_id=user_id, since=now, now=now, book=book, **scope)
    row = next((week for week in weekly["results"] if week["is_current"]), None)
    if row is None:
        plan = plan_for(tenant=tenant, user_id=user_id)
        row = _week_row(weekly["since"], None, dict.fromkeys(COUNTED, 0), Cost(), now=now, plan=plan)
    return row


def _all_tokens(counted: dict) -> int:
    return sum(counted[name] for name in ENTRY_TOKENS)


def _week_row(start: datetime, key, counted: dict, cost: Cost, *, now: datetime, plan) -> dict:
    end = start + WEEK
    current = start <= now < end
    all_tokens = _all_tokens(counted)
    input_output = counted["input_tokens"] + counted["output_tokens"]
    projection = None
    if current:
        # Budgets' projection (selectors/budgets.py): the pace so far, over the hours run (at least one), for the week.
        scale = Decimal(int(WEEK.total_seconds())) / Decimal(repr(max(now - start, HOUR).total_seconds()))
        projection = {
            "all_tokens": int(all_tokens * scale),
            "input_output_tokens": int(input_output * scale),
            "cost_usd": money(cost.usd * scale),
            "requests": int(counted["requests"] * scale),
        }
    usage = None
    if plan is not None:
        limits = Limits.per_week(plan)
        used = Amounts(
            limits.counted_tokens(input_output=input_output, all_tokens=all_tokens), cost.usd, counted["requests"]
        )
        projected = None
        if projection is not None:
            projected = Amounts(
                limits.counted_tokens(
                    input_output=projection["input_output_tokens"], all_tokens=projection["all_tokens"]
                ),
                cost.usd * scale,
                projection["requests"],
            )
        usage = plan_usage(limits=limits, used=used, projected=projected)
    return {
        "week": start.date().isoformat(),
        "week_start": start,
        "week_end": end,
        "key": key,
        "is_current": current,
        **counted,
        "all_tokens": all_tokens,
        **cost.as_fields(),
        "projection": projection,
        "plan_usage": usage,
    }
