"""Reads of budgets: a budget's current period, what it has used, the burn rate and when, at this pace, it runs
out (docs/budgets.md). Everything reads the budgets' own usage rows, kept as usage arrives, never messages."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.utils import timezone

from sessions_app.models import Budget, BudgetCrossing, BudgetPeriod, BudgetUnit, BudgetUsage, Session

HOUR = timedelta(hours=1)


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def period_bounds(*, period: str, window_hours: int | None, tz: str, now: datetime) -> tuple[datetime, datetime]:
    """The period that holds `now`, [start, end). Days, weeks (from Monday) and months begin at midnight in the
    budget's time zone; a rolling window is the current UTC hour and the `window_hours - 1` before it (so it
    slides on the hour). The same arithmetic as the SQL that files usage into periods (services.budgets)."""
    if period == BudgetPeriod.ROLLING:
        hour = floor_hour(now.astimezone(ZoneInfo("UTC")))
        return hour - (window_hours - 1) * HOUR, hour + HOUR
    local = now.astimezone(ZoneInfo(tz))
    start = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == BudgetPeriod.WEEK:
        start = (start - timedelta(days=start.weekday())).replace(tzinfo=start.tzinfo)
        end = start + timedelta(days=7)
    elif period == BudgetPeriod.MONTH:
        start = start.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    else:
        end = start + timedelta(days=1)
    # Wall-clock arithmetic above; the offsets of the new wall times (DST) come from the zone.
    return _exact(start), _exact(end)


def _exact(local: datetime) -> datetime:
    """A local wall time as the UTC instant it names (the zone's offset at that wall time)."""
    return local.replace(fold=0).astimezone(ZoneInfo("UTC"))


def budget_bounds(budget: Budget, now: datetime) -> tuple[datetime, datetime]:
    return period_bounds(period=budget.period, window_hours=budget.window_hours, tz=budget.timezone, now=now)


def amount(budget: Budget, value: Decimal) -> int | Decimal:
    """A used or limit amount as it is shown: whole tokens, or USD to six decimals."""
    if budget.unit == BudgetUnit.TOKENS:
        return int(value)
    return value.quantize(Decimal("0.000001"))


@dataclass(frozen=True)
class BudgetStatus:
    """Where a budget stands in its current period, and the projection at the current pace.

    `rate_per_hour` is what the period used divided by the hours it has run so far (at least one);
    `projected_used` is that rate over the whole period; `projected_exhaustion_at` is when the rate reaches the
    limit, given only when that falls within the period (null: at this pace it lasts; or it is already used up:
    then `exhausted` is true)."""

    budget: Budget
    period_start: datetime
    period_end: datetime
    used: Decimal
    rate_per_hour: Decimal
    projected_used: Decimal
    projected_exhaustion_at: datetime | None

    @property
    def limit(self) -> Decimal:
        return self.budget.limit

    @property
    def remaining(self) -> Decimal:
        return max(self.limit - self.used, Decimal(0))

    @property
    def percent(self) -> Decimal:
        return (self.used * 100 / self.limit).quantize(Decimal("0.01"))

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit

    def as_dict(self) -> dict:
        budget = self.budget
        return {
            "used": amount(budget, self.used),
            "remaining": amount(budget, self.remaining),
            "percent": float(self.percent),
            "period_start": self.period_start,
            "period_end": self.period_end,
            "rate_per_hour": amount(budget, self.rate_per_hour),
            "projected_used": amount(budget, self.projected_used),
            "projected_exhaustion_at": self.projected_exhaustion_at,
            "exhausted": self.exhausted,
        }


def _status(budget: Budget, used: Decimal, now: datetime) -> BudgetStatus:
    start, end = budget_bounds(budget, now)
    hours_run = max((now - start) / HOUR, 1.0)
    rate = used / Decimal(str(hours_run))
    projected = rate * Decimal(str((end - start) / HOUR))
    exhaustion = None
    if used < budget.limit and rate > 0:
        # Compared in hours before any date is made: at a slow pace a large limit lasts millennia, past the
        # last date Python can hold, and that is "it lasts the period" like any other date after its end.
        hours_left = (budget.limit - used) / rate
        if hours_left < Decimal(str((end - now) / HOUR)):
            exhaustion = now + timedelta(hours=float(hours_left))
    return BudgetStatus(budget, start, end, used, rate, projected, exhaustion)


def budgets_status(budgets: list[Budget], *, now: datetime | None = None) -> dict:
    """{budget id: BudgetStatus} for `budgets`, in one query of their usage rows."""
    now = now or timezone.now()
    windows = {budget.pk: budget_bounds(budget, now) for budget in budgets}
    used: dict = defaultdict(Decimal)
    if budgets:
        earliest = min(start for start, _ in windows.values())
        rows = BudgetUsage.objects.filter(budget__in=[b.pk for b in budgets], bucket__gte=earliest).values_list(
            "budget_id", "bucket", "used"
        )
        for budget_id, bucket, value in rows:
            start, end = windows[budget_id]
            if start <= bucket < end:
                used[budget_id] += value
    return {budget.pk: _status(budget, used[budget.pk], now) for budget in budgets}


def budget_status(budget: Budget, *, now: datetime | None = None) -> BudgetStatus:
    return budgets_status([budget], now=now)[budget.pk]


def budget_crossings(budget: Budget, *, limit: int = 20) -> list[BudgetCrossing]:
    return list(BudgetCrossing.objects.filter(budget=budget).order_by("-crossed_at")[:limit])


def budget_covers(budget: Budget, *, session: Session, api_key_id) -> bool:
    """Whether a write by `api_key_id` into `session` is one the budget limits."""
    if budget.scope == "tenant":
        return True
    if budget.scope == "user_id":
        return budget.scope_value == session.user_id
    if budget.scope == "project":
        return budget.scope_value == session.project
    return budget.api_key_id is not None and budget.api_key_id in (api_key_id, session.api_key_id)


def budgets_blocked(*, tenant_id, now: datetime | None = None) -> list[Budget]:
    """The tenant's hard-limit budgets used up now, latest to reopen first: one small query on the budgets the
    writes that reached their limits marked (`blocked_until`), whatever the number of budgets. Usually none."""
    now = now or timezone.now()
    return list(
        Budget.objects.filter(tenant_id=tenant_id, active=True, hard_limit=True, blocked_until__gt=now).order_by(
            "-blocked_until"
        )
    )


def budget_blocking(
    *, session: Session, api_key_id, now: datetime | None = None, blocked: list[Budget] | None = None
) -> Budget | None:
    """The hard-limit budget that refuses a write into `session` now, if any (of `blocked`, when the caller has
    read them already)."""
    blocked = budgets_blocked(tenant_id=session.tenant_id, now=now) if blocked is None else blocked
    return next((budget for budget in blocked if budget_covers(budget, session=session, api_key_id=api_key_id)), None)
