"""Reads of usage: a session's counters, grouped usage and cost, the top sessions. Everything here reads
maintained counters (the session rows, the hourly and daily roll-ups, the sessions' usage by model) and never
scans messages; `selectors.recount` audits those counters against the messages."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db import connection
from django.db.models import Count, Sum

from sessions_app.models import Session, SessionModelUsage, Tenant, UsageDaily, UsageHourly
from sessions_app.models.ledger import ALL_TOKENS
from sessions_app.pricing import (
    ALL_TOKEN_FIELDS,
    PRICED_TOKEN_FIELDS,
    RECONCILE_FIELDS,
    Cost,
    PriceBook,
    rates_per_token,
)
from sessions_app.schema import LONG_CONTEXT_FIELDS, REPORTED_COST_FIELDS, STATS_FIELDS

GROUP_BY = ("day", "tool", "user_id", "project", "machine", "model", "session")
# What grouped usage adds to the counters: sessions started, and cost.
USAGE_FIELDS = ("sessions", *STATS_FIELDS)
# What a session's cost is computed from, and its sources' own cost compared with.
SESSION_TOKEN_FIELDS = (*RECONCILE_FIELDS, *PRICED_TOKEN_FIELDS)
# What a grouped usage row sums to be priced and reconciled, besides its counters.
SUMMED_FIELDS = (*USAGE_FIELDS, *LONG_CONTEXT_FIELDS, *REPORTED_COST_FIELDS)
# The aggregate the roll-ups' columns are summed with: bigint into bigint (migration 0030), several times cheaper per
# row than SUM(bigint), which accumulates in a 128-bit state and returns numeric. An overflow is an error with either.
SUM_BIGINT = "ace_sum_bigint"


def _sums(fields) -> str:
    return ", ".join(f"{SUM_BIGINT}({field}) AS {field}" for field in fields)


def all_tokens(counters) -> int:
    """input + output + cache read + cache write of a usage row or a session."""
    get = counters.get if isinstance(counters, dict) else lambda field: getattr(counters, field, 0)
    return sum(int(get(field) or 0) for field in ALL_TOKEN_FIELDS)


def counters_of(obj, *, conversations: int | None = None) -> dict[str, int]:
    """The stats API's counters of a session or conversation (STATS_FIELDS: not its other measures, which a list
    of sessions read with `.only(*STATS_FIELDS)` does not load)."""
    values = {field: getattr(obj, field, 0) for field in STATS_FIELDS if field != "conversations"}
    values["conversations"] = conversations if conversations is not None else getattr(obj, "conversations", 0)
    return {field: values[field] for field in STATS_FIELDS}


def session_stats(*, session: Session, with_cost: bool = False) -> dict:
    """The session's counters; with its cost too (one query: the session's usage by model)."""
    stats = counters_of(session)
    if with_cost:
        cost = session_costs(sessions=[session])[session.pk]
        stats.update(cost.as_fields(), unpriced_models=sorted(cost.unpriced_models))
    return stats


def session_costs(*, sessions: list[Session], book: PriceBook | None = None) -> dict:
    """{session id: Cost} from the sessions' usage by model and day."""
    book = book or PriceBook.load()
    costs = defaultdict(Cost)
    rows = SessionModelUsage.objects.filter(
        tenant_id__in={s.tenant_id for s in sessions}, session_id__in=[s.pk for s in sessions]
    ).values("session_id", "model", "day", *SESSION_TOKEN_FIELDS)
    for row in rows:
        costs[row["session_id"]].add(book, row["model"], row, row["day"])
    return costs


def _floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _ceil_hour(moment: datetime) -> datetime:
    floor = _floor_hour(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


@dataclass(frozen=True)
class UsageFilter:
    """What a usage query is narrowed to. `since`/`until` select roll-up hours, or session start times.
    `tenant` None: every tenant's usage, summed (the admin's dashboard; the API always names its tenant)."""

    tenant: Tenant | None
    since: datetime | None = None
    until: datetime | None = None
    tool: str | None = None
    user_id: str | None = None
    project: str | None = None
    machine: str | None = None
    model: str | None = None

    def rollups(self) -> tuple:
        """The filtered roll-up rows, the window they cover (rounded out to whole UTC hours), and the SQL of
        their UTC day. A window of whole UTC days (or none) reads the daily roll-ups, else the hourly."""
        window = {
            "since": _floor_hour(self.since) if self.since is not None else None,
            "until": _ceil_hour(self.until) if self.until is not None else None,
        }
        if all(moment is None or moment.astimezone(UTC).hour == 0 for moment in window.values()):
            rows, day = UsageDaily.objects.all(), "day"
            if window["since"] is not None:
                rows = rows.filter(day__gte=window["since"].astimezone(UTC).date())
            if window["until"] is not None:
                rows = rows.filter(day__lt=window["until"].astimezone(UTC).date())
        else:
            rows, day = UsageHourly.objects.all(), "(hour AT TIME ZONE 'UTC')::date"
            if window["since"] is not None:
                rows = rows.filter(hour__gte=window["since"])
            if window["until"] is not None:
                rows = rows.filter(hour__lt=window["until"])
        if self.tenant is not None:
            rows = rows.filter(tenant=self.tenant)
        for field in ("tool", "user_id", "project", "machine", "model"):
            if getattr(self, field) is not None:
                rows = rows.filter(**{field: getattr(self, field)})
        return rows, window, day

    def sessions(self):
        sessions = Session.objects.all() if self.tenant is None else Session.objects.filter(tenant=self.tenant)
        if self.since is not None:
            sessions = sessions.filter(started_at__gte=self.since)
        if self.until is not None:
            sessions = sessions.filter(started_at__lt=self.until)
        for field in ("tool", "user_id", "project", "machine"):
            if getattr(self, field) is not None:
                sessions = sessions.filter(**{field: getattr(self, field)})
        return sessions


def _usage_row(counters: dict, cost: Cost) -> dict:
    return {**{field: int(counters.get(field) or 0) for field in USAGE_FIELDS}, **cost.as_fields()}


def usage_grouped(
    *,
    tenant: Tenant,
    group_by: str,
    since: datetime | None = None,
    until: datetime | None = None,
    tool: str | None = None,
    user_id: str | None = None,
    project: str | None = None,
    machine: str | None = None,
    model: str | None = None,
    limit: int = 100,
    book: PriceBook | None = None,
) -> dict:
    """Usage counters and cost grouped by day, tool, user, project, machine, model (roll-ups) or session (session
    counters). One query: the roll-ups summed per (group, model), each model's sums priced.

    Roll-ups are hourly, so `since` is rounded down and `until` up to whole UTC hours (a window of whole
    UTC days reads the daily roll-ups); the window that was actually counted is returned. Grouped by
    session, the window selects sessions by start time (and `model` cannot narrow sessions: a session has
    many models).
    """
    usage = UsageFilter(
        tenant=tenant,
        since=since,
        until=until,
        tool=tool,
        user_id=user_id,
        project=project,
        machine=machine,
        model=model,
    )
    book = book or PriceBook.load()
    if group_by == "session":
        return _usage_by_session(usage=usage, limit=limit, book=book)

    return usage_breakdowns(usage=usage, group_bys=[group_by], book=book)[group_by]


# Each grouping's key in a roll-up row ("day": UTC days, from UsageFilter.rollups; "tenant_id": for the admin's
# usage of every tenant, never the API's).
_GROUP_KEYS = ("day", "tenant_id", "tool", "user_id", "project", "machine", "model")


def usage_breakdowns(*, usage: UsageFilter, group_bys, book: PriceBook | None = None) -> dict[str, dict]:
    """Several groupings of the same roll-up rows in one scan (GROUP BY GROUPING SETS): {group_by: the body
    of usage_grouped}. Each set sums per (key, model, price epoch), so that each model's token sums can be
    priced at the prices in force when they were used; the model grouping is summed from another set when
    there is one."""
    book = book or PriceBook.load()
    rows, window, day = usage.rollups()
    where, params = rows.query.where.as_sql(rows.query.get_compiler(connection=connection), connection)
    epoch, epoch_params = book.epochs_sql(day)
    expressions = {name: name for name in _GROUP_KEYS} | {"day": day}
    scanned = [name for name in group_bys if name != "model"] or ["model"]
    names = [name for name in _GROUP_KEYS if name in scanned or name == "model"]
    sets = ", ".join(f"({expressions[g]}, model, epoch)" if g != "model" else "(model, epoch)" for g in scanned)
    # GROUPING(...) has a bit set for each key a row is not grouped by: it tells which set a row sums.
    grouping_of = {
        sum(1 << (len(names) - 1 - i) for i, other in enumerate(names) if other not in (name, "model")): name
        for name in scanned
    }
    rollups = f"(SELECT *, {epoch} AS epoch FROM {rows.model._meta.db_table} WHERE {where}) AS rollups"
    dimensions = [name for name in names if name not in ("day", "model")]
    if "day" in scanned and len(dimensions) > 1:
        # Hashing every roll-up row once per grouping is most of the time: the rows are summed per combination of the
        # dimensions first (a few thousand, where a quarter has tens of thousands of rows), beside the days, and the
        # combinations then grouped by each dimension. The day bit added back keeps grouping_set as in one level.
        combinations = ", ".join(dimensions)
        mask_of = {name: mask for mask, name in grouping_of.items()}
        sql = f"""
            WITH firsts AS (
                SELECT GROUPING({day}) AS by_dimensions, {day} AS day, {combinations}, model, epoch,
                       {_sums(SUMMED_FIELDS)}
                FROM {rollups}
                GROUP BY GROUPING SETS (({day}, model, epoch), ({combinations}, model, epoch))
            )
            SELECT {mask_of["day"]} AS grouping_set, day, {combinations}, model, epoch, {", ".join(SUMMED_FIELDS)}
            FROM firsts WHERE by_dimensions = 0
            UNION ALL
            SELECT {1 << (len(names) - 1)} + GROUPING({combinations}, model), NULL, {combinations}, model, epoch,
                   {_sums(SUMMED_FIELDS)}
            FROM firsts WHERE by_dimensions = 1
            GROUP BY GROUPING SETS ({", ".join(f"({name}, model, epoch)" for name in dimensions)})
        """
    else:
        sql = f"""
            SELECT GROUPING({", ".join(expressions[n] for n in names)}) AS grouping_set,
                   {", ".join(f"{expressions[n]} AS {n}" for n in names)}, epoch,
                   {_sums(SUMMED_FIELDS)}
            FROM {rollups}
            GROUP BY GROUPING SETS ({sets})
        """
    params = [*epoch_params, *params]
    folds = {name: _GroupSums() for name in group_bys}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = [c.name for c in cursor.description]
        for values in cursor.fetchall():
            row = dict(zip(columns, values, strict=True))
            name = grouping_of[row["grouping_set"]]
            folds[name].add(row[name], row)
            if name == scanned[0] and "model" in folds and name != "model":
                folds["model"].add(row["model"], row)
    return {
        name: {"group_by": name, **window, **folds[name].body(book=book, sort_by_key=name == "day")}
        for name in group_bys
    }


_PRICED_SUMS = (*RECONCILE_FIELDS, *PRICED_TOKEN_FIELDS)  # what a (key, model, epoch) is priced and reconciled from


class _GroupSums:
    """The rows of one grouping: counters summed per key; token sums per (key, model, price epoch), priced once
    each."""

    def __init__(self):
        self.counters: dict[object, dict] = {}
        self.tokens: dict[tuple, dict] = {}

    def add(self, key, row: dict) -> None:
        key = key.isoformat() if hasattr(key, "isoformat") else (key or None)
        # A (key, model, epoch) comes once per grouping set, except in the model grouping summed from another set: a
        # copy of the row's sums the first time, added to after that.
        counters = self.counters.get(key)
        if counters is None:
            self.counters[key] = {field: row[field] for field in USAGE_FIELDS}
        else:
            for field in USAGE_FIELDS:
                counters[field] += row[field]
        token_key = (key, row["model"], row["epoch"])
        tokens = self.tokens.get(token_key)
        if tokens is None:
            self.tokens[token_key] = {field: row[field] for field in _PRICED_SUMS}
        else:
            for field in _PRICED_SUMS:
                tokens[field] += row[field]

    def body(self, *, book: PriceBook, sort_by_key: bool) -> dict:
        costs: dict = defaultdict(Cost)
        for (key, model, epoch), tokens in self.tokens.items():
            costs[key].add(book, model, tokens, epoch or date.min)
        total_counters = dict.fromkeys(USAGE_FIELDS, 0)
        total_cost = Cost()
        results = []
        for key, counters in self.counters.items():
            for field in USAGE_FIELDS:
                total_counters[field] += counters[field]
            total_cost.merge(costs[key])
            results.append({"key": key, **_usage_row(counters, costs[key])})
        if sort_by_key:
            results.sort(key=lambda r: r["key"])
        else:
            results.sort(key=lambda r: (-r["total_tokens"], -r["messages"], r["key"] or ""))
        return {
            "results": results,
            "totals": _usage_row(total_counters, total_cost),
            "unpriced_models": sorted(total_cost.unpriced_models),
        }


def _usage_by_session(*, usage: UsageFilter, limit: int, book: PriceBook) -> dict:
    sessions = usage.sessions()
    # Deleted sessions stay in the totals (their usage happened) but are not listed: the API hides them.
    top = list(
        sessions.filter(deleted_at__isnull=True)
        .order_by("-total_tokens", "-messages", "-started_at")
        .only("id", "tenant", "name", "tool", "user_id", "project", "machine", "started_at", *STATS_FIELDS)[:limit]
    )
    costs = session_costs(sessions=top, book=book)
    results = [
        {
            "key": str(s.pk),
            "name": s.name,
            "tool": s.tool,
            "user_id": s.user_id,
            "project": s.project,
            "machine": s.machine,
            "started_at": s.started_at,
            **_usage_row({**counters_of(s), "sessions": 1}, costs[s.pk]),
        }
        for s in top
    ]
    totals = sessions.aggregate(sessions=Count("id"), **{field: Sum(field) for field in STATS_FIELDS})
    total_cost = Cost()
    by_model = (
        SessionModelUsage.objects.filter(session__in=sessions.values("pk"))
        .values("model", "day")
        .annotate(**{field: Sum(field) for field in SESSION_TOKEN_FIELDS})
        .order_by()
    )
    for row in by_model:
        total_cost.add(book, row["model"], row, row["day"])
    return {
        "group_by": "session",
        "since": usage.since,
        "until": usage.until,
        "results": results,
        "totals": _usage_row(totals, total_cost),
        "unpriced_models": sorted(total_cost.unpriced_models),
    }


def top_sessions_by_cost(*, usage: UsageFilter, limit: int = 20, book: PriceBook | None = None) -> list[dict]:
    """The `limit` costliest sessions started in the window: their usage by model priced in SQL (the
    prices of the tenant's models passed as a VALUES list), summed per session, highest first. Ranked by
    their priced tokens; each entry still reports its unpriced tokens."""
    book = book or PriceBook.load()
    if usage.tenant is not None:
        models = SessionModelUsage.objects.filter(tenant=usage.tenant).values_list("model", flat=True).distinct()
    else:  # every tenant's models: the daily roll-ups name them in far fewer rows
        models = UsageDaily.objects.values_list("model", flat=True).distinct().order_by()
    # Each model's prices over time: (model, from, until, a rate per token kind), joined on the day of the usage.
    prices = [
        (model, start, until, rates_per_token(price)) for model in models for start, until, price in book.periods(model)
    ]
    if not prices:
        return []
    # Only the kinds some price charges: the long-context kinds add nothing where no model has a long-context tier.
    kinds = [kind for kind in PRICED_TOKEN_FIELDS if any(rates[kind] for *_, rates in prices)]
    dated = any(start is not None or until is not None for _, start, until, _ in prices)
    sessions = usage.sessions().filter(deleted_at__isnull=True).order_by()
    session_sql, session_params = sessions.values("pk").query.sql_with_params()
    row = "(%s, %s::date, %s::date" + ", %s::float8" * len(kinds) + ")"
    value_params = [
        value for model, start, until, rates in prices for value in (model, start, until, *(rates[k] for k in kinds))
    ]
    # Ranked in floating point (numeric arithmetic over every row costs ~3x more); the costs shown are then computed
    # exactly for the sessions ranked. With no dated price the join is on the model alone: a condition on the day
    # would make PostgreSQL expect a few rows and look up each one's session by its index.
    sql = f"""
        SELECT u.session_id, SUM({" + ".join(f"u.{kind}::float8 * p.{kind}" for kind in kinds) or "0"}) AS cost
        FROM {SessionModelUsage._meta.db_table} u
        JOIN (VALUES {", ".join([row] * len(prices))}) AS p(model, since, until{"".join(f", {k}" for k in kinds)})
          ON p.model = u.model
             {"AND (p.since IS NULL OR u.day >= p.since) AND (p.until IS NULL OR u.day < p.until)" if dated else ""}
        WHERE {"u.tenant_id = %s AND" if usage.tenant is not None else ""} u.session_id IN ({session_sql})
        GROUP BY u.session_id
        ORDER BY cost DESC
        LIMIT %s
    """
    tenant_params = [usage.tenant.pk] if usage.tenant is not None else []
    with connection.cursor() as cursor:
        cursor.execute(sql, [*value_params, *tenant_params, *session_params, limit])
        ranked = cursor.fetchall()
    by_id = Session.objects.only(
        "id", "tenant", "name", "tool", "user_id", "project", "machine", "started_at", *STATS_FIELDS
    ).in_bulk([session_id for session_id, _ in ranked])
    costs = session_costs(sessions=list(by_id.values()), book=book)
    return [_session_entry(by_id[session_id], costs[session_id]) for session_id, _ in ranked if session_id in by_id]


def top_sessions_by_tokens(*, usage: UsageFilter, limit: int = 20, book: PriceBook | None = None) -> list[dict]:
    """The `limit` sessions with the most tokens (input, output, cache read and write: `ALL_TOKENS`) started in
    the window (index session_tenant_all_tokens)."""
    top = list(
        usage.sessions()
        .filter(deleted_at__isnull=True)
        .order_by(ALL_TOKENS.desc())
        .only("id", "tenant", "name", "tool", "user_id", "project", "machine", "started_at", *STATS_FIELDS)[:limit]
    )
    costs = session_costs(sessions=top, book=book)
    return [_session_entry(s, costs[s.pk]) for s in top]


def _session_entry(session: Session, cost: Cost) -> dict:
    return {"session": session, **counters_of(session), "sessions": 1, **cost.as_fields()}


def sessions_by_model(*, usage: UsageFilter) -> dict[str | None, int]:
    """{model (None for no model): how many sessions started in the window used it}, from the sessions' usage
    by model: a session that used three models counts under each. (The roll-ups count a session once, under
    the model of its first message, a user's prompt of no model: they cannot say this.)"""
    # The distinct (model, session) pairs, then counted per model: a hash of the pairs, where COUNT(DISTINCT) sorts
    # every row (one per session, model and day).
    session_sql, session_params = usage.sessions().order_by().values("pk").query.sql_with_params()
    sql = f"""
        SELECT model, count(*) FROM (
            SELECT DISTINCT model, session_id FROM {SessionModelUsage._meta.db_table}
            WHERE {"tenant_id = %s AND" if usage.tenant is not None else ""} session_id IN ({session_sql})
        ) AS used
        GROUP BY model
    """
    tenant_params = [usage.tenant.pk] if usage.tenant is not None else []
    with connection.cursor() as cursor:
        cursor.execute(sql, [*tenant_params, *session_params])
        return {model or None: sessions for model, sessions in cursor.fetchall()}


def cost_reconciliation(*, usage: UsageFilter, book: PriceBook | None = None, limit: int = 50) -> list[dict]:
    """The tools' own cost beside ours, per UTC day and model, for the usage in the window that reported a cost: one
    read of the roll-up rows that have any (`reported_cost_requests` > 0). Each row: day, model, requests and those
    that reported a cost, our cost and theirs where every request reported one, the difference and `cost_flagged`
    (over 1%); flagged rows first, then the latest days."""
    book = book or PriceBook.load()
    rows, _, day = usage.rollups()
    where, params = rows.query.where.as_sql(rows.query.get_compiler(connection=connection), connection)
    epoch, epoch_params = book.epochs_sql(day)
    fields = (*RECONCILE_FIELDS, *PRICED_TOKEN_FIELDS)
    sql = f"""
        SELECT usage_day AS day, model, epoch, {_sums(fields)}
        FROM (SELECT *, {day} AS usage_day, {epoch} AS epoch FROM {rows.model._meta.db_table}
              WHERE {where} AND reported_cost_requests > 0) AS reported
        GROUP BY usage_day, model, epoch
    """
    costs: dict = defaultdict(Cost)
    requests: dict = defaultdict(int)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*epoch_params, *params])
        columns = [c.name for c in cursor.description]
        for values in cursor.fetchall():
            row = dict(zip(columns, values, strict=True))
            costs[(row["day"], row["model"])].add(book, row["model"], row, row["epoch"] or date.min)
            requests[(row["day"], row["model"])] += row["requests"]
    results = [
        {"day": key[0], "model": key[1], "requests": requests[key], **cost.as_fields()} for key, cost in costs.items()
    ]
    results.sort(key=lambda r: (not r["cost_flagged"], -r["day"].toordinal(), r["model"]))
    return results[:limit]
