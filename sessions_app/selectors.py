"""Reads: counters, grouped usage and cost. Everything here reads maintained counters (the session rows,
the hourly roll-ups, the sessions' usage by model), never scans messages, except the recounts at the end,
which exist to audit those counters."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Count, Sum

from sessions_app.models import Session, SessionModelUsage, Tenant, UsageDaily, UsageHourly
from sessions_app.pricing import PRICED_TOKEN_FIELDS, PRICED_TOKENS, Cost, PriceBook
from sessions_app.schema import COUNTER_FIELDS, STATS_FIELDS

GROUP_BY = ("day", "tool", "user_id", "project", "model", "session")
# What grouped usage adds to the counters: sessions started, and cost.
USAGE_FIELDS = ("sessions", *STATS_FIELDS)
SESSION_TOKEN_FIELDS = ("requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


def counters_of(obj, *, conversations: int | None = None) -> dict[str, int]:
    values = {field: getattr(obj, field, 0) for field in COUNTER_FIELDS}
    values["conversations"] = conversations if conversations is not None else getattr(obj, "conversations", 0)
    return {field: values[field] for field in STATS_FIELDS}


def session_stats(*, session: Session, with_cost: bool = False) -> dict:
    """The session's counters; with its cost too (one query: the session's usage by model)."""
    stats = counters_of(session)
    if with_cost:
        cost = session_costs(session_ids=[session.pk])[session.pk]
        stats.update(cost.as_fields(), unpriced_models=sorted(cost.unpriced_models))
    return stats


def session_costs(*, session_ids, book: PriceBook | None = None) -> dict:
    """{session id: Cost} from the sessions' usage by model."""
    book = book or PriceBook.load()
    costs = defaultdict(Cost)
    rows = SessionModelUsage.objects.filter(session_id__in=session_ids).values(
        "session_id", "model", *SESSION_TOKEN_FIELDS
    )
    for row in rows:
        costs[row["session_id"]].add(book, row["model"], row)
    return costs


def _floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _ceil_hour(moment: datetime) -> datetime:
    floor = _floor_hour(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


@dataclass(frozen=True)
class UsageFilter:
    """What a usage query is narrowed to. `since`/`until` select roll-up hours, or session start times."""

    tenant: Tenant
    since: datetime | None = None
    until: datetime | None = None
    tool: str | None = None
    user_id: str | None = None
    project: str | None = None
    model: str | None = None

    def rollups(self) -> tuple:
        """The filtered roll-up rows, the window they cover (rounded out to whole UTC hours), and the SQL of
        their UTC day. A window of whole UTC days (or none) reads the daily roll-ups, else the hourly."""
        window = {
            "since": _floor_hour(self.since) if self.since is not None else None,
            "until": _ceil_hour(self.until) if self.until is not None else None,
        }
        if all(moment is None or moment.astimezone(UTC).hour == 0 for moment in window.values()):
            rows, day = UsageDaily.objects.filter(tenant=self.tenant), "day"
            if window["since"] is not None:
                rows = rows.filter(day__gte=window["since"].astimezone(UTC).date())
            if window["until"] is not None:
                rows = rows.filter(day__lt=window["until"].astimezone(UTC).date())
        else:
            rows, day = UsageHourly.objects.filter(tenant=self.tenant), "(hour AT TIME ZONE 'UTC')::date"
            if window["since"] is not None:
                rows = rows.filter(hour__gte=window["since"])
            if window["until"] is not None:
                rows = rows.filter(hour__lt=window["until"])
        for field in ("tool", "user_id", "project", "model"):
            if getattr(self, field) is not None:
                rows = rows.filter(**{field: getattr(self, field)})
        return rows, window, day

    def sessions(self):
        sessions = Session.objects.filter(tenant=self.tenant)
        if self.since is not None:
            sessions = sessions.filter(started_at__gte=self.since)
        if self.until is not None:
            sessions = sessions.filter(started_at__lt=self.until)
        for field in ("tool", "user_id", "project"):
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
    model: str | None = None,
    limit: int = 100,
    book: PriceBook | None = None,
) -> dict:
    """Usage counters and cost grouped by day, tool, user, project, model (roll-ups) or session (session
    counters). One query: the roll-ups summed per (group, model), each model's sums priced.

    Roll-ups are hourly, so `since` is rounded down and `until` up to whole UTC hours (a window of whole
    UTC days reads the daily roll-ups); the window that was actually counted is returned. Grouped by
    session, the window selects sessions by start time (and `model` cannot narrow sessions: a session has
    many models).
    """
    usage = UsageFilter(
        tenant=tenant, since=since, until=until, tool=tool, user_id=user_id, project=project, model=model
    )
    book = book or PriceBook.load()
    if group_by == "session":
        return _usage_by_session(usage=usage, limit=limit, book=book)

    return usage_breakdowns(usage=usage, group_bys=[group_by], book=book)[group_by]


# Each grouping's key in a roll-up row ("day": UTC days, from UsageFilter.rollups).
_GROUP_KEYS = ("day", "tool", "user_id", "project", "model")


def usage_breakdowns(*, usage: UsageFilter, group_bys, book: PriceBook | None = None) -> dict[str, dict]:
    """Several groupings of the same roll-up rows in one scan (GROUP BY GROUPING SETS): {group_by: the body
    of usage_grouped}. Each set sums per (key, model), so that each model's token sums can be priced;
    the model grouping is summed from another set when there is one."""
    book = book or PriceBook.load()
    rows, window, day = usage.rollups()
    where, params = rows.query.where.as_sql(rows.query.get_compiler(connection=connection), connection)
    expressions = {"day": day, "tool": "tool", "user_id": "user_id", "project": "project", "model": "model"}
    scanned = [name for name in group_bys if name != "model"] or ["model"]
    names = [name for name in _GROUP_KEYS if name in scanned or name == "model"]
    sets = ", ".join(f"({expressions[g]}, model)" if g != "model" else "(model)" for g in scanned)
    # GROUPING(...) has a bit set for each key a row is not grouped by: it tells which set a row sums.
    grouping_of = {
        sum(1 << (len(names) - 1 - i) for i, other in enumerate(names) if other not in (name, "model")): name
        for name in scanned
    }
    sql = f"""
        SELECT GROUPING({", ".join(expressions[n] for n in names)}) AS grouping_set,
               {", ".join(f"{expressions[n]} AS {n}" for n in names)},
               {", ".join(f"SUM({f})::bigint AS {f}" for f in USAGE_FIELDS)}
        FROM {rows.model._meta.db_table}
        WHERE {where}
        GROUP BY GROUPING SETS ({sets})
    """
    folds = {name: _Fold() for name in group_bys}
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


class _Fold:
    """The rows of one grouping: counters summed per key; token sums per (key, model), priced once each."""

    def __init__(self):
        self.counters: dict = defaultdict(lambda: dict.fromkeys(USAGE_FIELDS, 0))
        self.tokens: dict = defaultdict(lambda: dict.fromkeys(PRICED_TOKEN_FIELDS, 0))

    def add(self, key, row: dict) -> None:
        key = key.isoformat() if hasattr(key, "isoformat") else (key or None)
        counters = self.counters[key]
        for field in USAGE_FIELDS:
            counters[field] += row[field]
        tokens = self.tokens[(key, row["model"])]
        for field in PRICED_TOKEN_FIELDS:
            tokens[field] += row[field]

    def body(self, *, book: PriceBook, sort_by_key: bool) -> dict:
        costs: dict = defaultdict(Cost)
        for (key, model), tokens in self.tokens.items():
            costs[key].add(book, model, tokens)
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
        .only("id", "name", "tool", "user_id", "project", "started_at", *STATS_FIELDS)[:limit]
    )
    costs = session_costs(session_ids=[s.pk for s in top], book=book)
    results = [
        {
            "key": str(s.pk),
            "name": s.name,
            "tool": s.tool,
            "user_id": s.user_id,
            "project": s.project,
            "started_at": s.started_at,
            **_usage_row({**counters_of(s), "sessions": 1}, costs[s.pk]),
        }
        for s in top
    ]
    totals = sessions.aggregate(sessions=Count("id"), **{field: Sum(field) for field in STATS_FIELDS})
    total_cost = Cost()
    by_model = (
        SessionModelUsage.objects.filter(session__in=sessions.values("pk"))
        .values("model")
        .annotate(**{field: Sum(field) for field in SESSION_TOKEN_FIELDS})
        .order_by()
    )
    for row in by_model:
        total_cost.add(book, row["model"], row)
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
    models = SessionModelUsage.objects.filter(tenant=usage.tenant).values_list("model", flat=True).distinct()
    prices = [(model, book.price_for(model)) for model in models]
    prices = [(model, price) for model, price in prices if price is not None]
    if not prices:
        return []
    sessions = usage.sessions().filter(deleted_at__isnull=True).order_by()
    session_sql, session_params = sessions.values("pk").query.sql_with_params()
    values = ", ".join(["(%s, %s::float8, %s::float8, %s::float8, %s::float8)"] * len(prices))
    value_params = [
        value for model, price in prices for value in (model, *(getattr(price, rate) for _, rate in PRICED_TOKENS))
    ]
    # Ranked in floating point (numeric arithmetic over every row costs ~3x more); the costs shown are
    # then computed exactly for the sessions ranked.
    cost = " + ".join(f"u.{tokens}::float8 * p.{rate}" for tokens, rate in PRICED_TOKENS)
    sql = f"""
        SELECT u.session_id, SUM({cost}) AS cost
        FROM {SessionModelUsage._meta.db_table} u
        JOIN (VALUES {values}) AS p(model, {", ".join(rate for _, rate in PRICED_TOKENS)}) ON p.model = u.model
        WHERE u.tenant_id = %s AND u.session_id IN ({session_sql})
        GROUP BY u.session_id
        ORDER BY cost DESC
        LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*value_params, usage.tenant.pk, *session_params, limit])
        ranked = cursor.fetchall()
    by_id = Session.objects.only("id", "name", "tool", "user_id", "project", "started_at", *STATS_FIELDS).in_bulk(
        [session_id for session_id, _ in ranked]
    )
    costs = session_costs(session_ids=list(by_id), book=book)
    return [_session_entry(by_id[session_id], costs[session_id]) for session_id, _ in ranked if session_id in by_id]


def top_sessions_by_tokens(*, usage: UsageFilter, limit: int = 20, book: PriceBook | None = None) -> list[dict]:
    """The `limit` sessions with the most tokens started in the window (index session_tenant_tokens)."""
    top = list(
        usage.sessions()
        .filter(deleted_at__isnull=True)
        .order_by("-total_tokens")
        .only("id", "name", "tool", "user_id", "project", "started_at", *STATS_FIELDS)[:limit]
    )
    costs = session_costs(session_ids=[s.pk for s in top], book=book)
    return [_session_entry(s, costs[s.pk]) for s in top]


def _session_entry(session: Session, cost: Cost) -> dict:
    return {"session": session, **counters_of(session), "sessions": 1, **cost.as_fields()}


_RECOUNT_SQL = """
WITH m AS (
    SELECT * FROM sessions_app_message WHERE session_id = %(session)s
), per_request AS (
    -- lines of one response share a request_id: the request counts once, with its most complete usage
    SELECT 1 AS requests, MAX(COALESCE(input_tokens, 0)) AS input_tokens,
           MAX(COALESCE(output_tokens, 0)) AS output_tokens, MAX(COALESCE(cache_read_tokens, 0)) AS cache_read_tokens,
           MAX(COALESCE(cache_creation_tokens, 0)) AS cache_creation_tokens,
           MAX(COALESCE(total_tokens, 0)) AS total_tokens
    FROM m WHERE request_id <> '' AND api_calls IS NULL GROUP BY request_id
), single AS (
    -- a message with auth_type is one request; a completed turn says how many calls it made
    SELECT CASE WHEN api_calls IS NOT NULL THEN api_calls WHEN auth_type <> '' THEN 1 ELSE 0 END AS requests,
           COALESCE(input_tokens, 0) AS input_tokens, COALESCE(output_tokens, 0) AS output_tokens,
           COALESCE(cache_read_tokens, 0) AS cache_read_tokens,
           COALESCE(cache_creation_tokens, 0) AS cache_creation_tokens, COALESCE(total_tokens, 0) AS total_tokens
    FROM m WHERE request_id = '' OR api_calls IS NOT NULL
), usage AS (
    SELECT * FROM per_request UNION ALL SELECT * FROM single
)
SELECT
    (SELECT COALESCE(SUM(requests), 0) FROM usage) AS requests,
    (SELECT COUNT(*) FROM sessions_app_conversation WHERE session_id = %(session)s) AS conversations,
    (SELECT COUNT(*) FROM m) AS messages,
    (SELECT COUNT(*) FROM m WHERE role = 'user') AS message_user,
    (SELECT COUNT(*) FROM m WHERE role = 'assistant') AS message_assistant,
    (SELECT COUNT(*) FROM m WHERE role = 'toolResult') AS message_toolresult,
    (SELECT COUNT(*) FROM m WHERE role = 'error') AS message_error,
    (SELECT COUNT(*) FROM m WHERE role = 'system') AS message_system,
    (SELECT COALESCE(SUM(input_tokens), 0) FROM usage),
    (SELECT COALESCE(SUM(output_tokens), 0) FROM usage),
    (SELECT COALESCE(SUM(cache_read_tokens), 0) FROM usage),
    (SELECT COALESCE(SUM(cache_creation_tokens), 0) FROM usage),
    (SELECT COALESCE(SUM(total_tokens), 0) FROM usage)
"""


def session_recount(*, session: Session) -> dict[str, int]:
    """The session's counters recomputed from its messages by the counting rules (a full scan of the
    session's rows): what auditors compare with the maintained counters."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(_RECOUNT_SQL, {"session": session.pk})
        row = cursor.fetchone()
    return dict(zip(STATS_FIELDS, (int(value) for value in row), strict=True))


def session_count_drift(*, session: Session) -> dict[str, tuple[int, int]]:
    """{counter: (maintained, recounted)} for every counter that disagrees; empty when all agree."""
    maintained = session_stats(session=session)
    recounted = session_recount(session=session)
    return {f: (maintained[f], recounted[f]) for f in STATS_FIELDS if maintained[f] != recounted[f]}


# -- the roll-ups recounted from the messages (audits and rebuilds) ---------------------------------------
# Each message's contribution, by the rules of services.messages (and services.turns for completed turns):
# a line of a response (a request_id) adds what it grew the request's largest values by, and the request
# counts once, on its first line, under the line's model or else the request's first model; a turn's
# answer (api_calls set) and any other message add their own values. Then the hourly key of each.
_CONTRIBUTIONS_SQL = """
WITH m AS (
    SELECT tenant_id, session_id, seq, created_at, role, model, request_id, auth_type, api_calls,
           COALESCE(input_tokens, 0) AS input_tokens, COALESCE(output_tokens, 0) AS output_tokens,
           COALESCE(cache_read_tokens, 0) AS cache_read_tokens,
           COALESCE(cache_creation_tokens, 0) AS cache_creation_tokens, COALESCE(total_tokens, 0) AS total_tokens,
           (request_id <> '' AND api_calls IS NULL) AS in_request
    FROM sessions_app_message
    WHERE tenant_id = %(tenant)s
), running AS (
    SELECT m.*, ROW_NUMBER() OVER w AS nth,
           MAX(input_tokens) OVER w AS input_max, MAX(output_tokens) OVER w AS output_max,
           MAX(cache_read_tokens) OVER w AS cache_read_max,
           MAX(cache_creation_tokens) OVER w AS cache_creation_max, MAX(total_tokens) OVER w AS total_max,
           (ARRAY_REMOVE(ARRAY_AGG(NULLIF(model, '')) OVER w, NULL))[1] AS request_model
    FROM m
    WHERE in_request
    WINDOW w AS (PARTITION BY session_id, request_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), contribution AS (
    SELECT tenant_id, session_id, seq, created_at, role, COALESCE(NULLIF(model, ''), request_model, '') AS model,
           (nth = 1)::int AS requests,
           input_max - COALESCE(LAG(input_max) OVER p, 0) AS input_tokens,
           output_max - COALESCE(LAG(output_max) OVER p, 0) AS output_tokens,
           cache_read_max - COALESCE(LAG(cache_read_max) OVER p, 0) AS cache_read_tokens,
           cache_creation_max - COALESCE(LAG(cache_creation_max) OVER p, 0) AS cache_creation_tokens,
           total_max - COALESCE(LAG(total_max) OVER p, 0) AS total_tokens
    FROM running
    WINDOW p AS (PARTITION BY session_id, request_id ORDER BY seq)
    UNION ALL
    SELECT tenant_id, session_id, seq, created_at, role, model,
           CASE WHEN api_calls IS NOT NULL THEN api_calls WHEN auth_type <> '' THEN 1 ELSE 0 END,
           input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, total_tokens
    FROM m
    WHERE NOT in_request
)
"""
_COUNTER_SUMS = ", ".join(
    f"SUM({field})::bigint AS {field}" for field in (*COUNTER_FIELDS, "conversations", "sessions")
)
_ANY_COUNTER = " OR ".join(f"SUM({field}) <> 0" for field in (*COUNTER_FIELDS, "conversations", "sessions"))
# The hourly roll-up rows of a tenant: a message counts in its hour under its model; a conversation in the
# hour of the message that started it, under that message's own model; a session with its first message.
ROLLUP_RECOUNT_SQL = (
    _CONTRIBUTIONS_SQL
    + f"""
, parts AS (
    SELECT s.tenant_id, date_trunc('hour', c.created_at, 'UTC') AS hour, s.tool, s.user_id, s.project, c.model,
           c.requests, 1 AS messages, (c.role = 'user')::int AS message_user,
           (c.role = 'assistant')::int AS message_assistant, (c.role = 'toolResult')::int AS message_toolresult,
           (c.role = 'error')::int AS message_error, (c.role = 'system')::int AS message_system,
           c.input_tokens, c.output_tokens, c.cache_read_tokens, c.cache_creation_tokens, c.total_tokens,
           0 AS conversations, (c.seq = 1)::int AS sessions
    FROM contribution c JOIN sessions_app_session s ON s.id = c.session_id
    UNION ALL
    SELECT s.tenant_id, date_trunc('hour', first.created_at, 'UTC'), s.tool, s.user_id, s.project, first.model,
           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0
    FROM sessions_app_conversation v
    JOIN sessions_app_session s ON s.id = v.session_id
    CROSS JOIN LATERAL (
        SELECT created_at, model FROM sessions_app_message WHERE conversation_id = v.id ORDER BY seq LIMIT 1
    ) AS first
    WHERE s.tenant_id = %(tenant)s
)
SELECT tenant_id, hour, tool, user_id, project, model, {_COUNTER_SUMS}
FROM parts
GROUP BY tenant_id, hour, tool, user_id, project, model
HAVING {_ANY_COUNTER}
"""
)
_MODEL_FIELDS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "total_tokens",
)
SESSION_MODEL_RECOUNT_SQL = (
    _CONTRIBUTIONS_SQL
    + f"""
SELECT tenant_id, session_id, model, {", ".join(f"SUM({f})::bigint AS {f}" for f in _MODEL_FIELDS)}
FROM contribution
GROUP BY tenant_id, session_id, model
HAVING {" OR ".join(f"SUM({f}) <> 0" for f in _MODEL_FIELDS)}
"""
)
_HOURLY_KEY = ("hour", "tool", "user_id", "project", "model")
_DAILY_KEY = ("day", "tool", "user_id", "project", "model")
_HOURLY_FIELDS = (*COUNTER_FIELDS, "conversations", "sessions")


def rollup_drift(*, tenant: Tenant) -> dict[str, list]:
    """The tenant's roll-ups compared with a recount from its messages (a scan of them).

    {"hourly": [(key, {counter: (maintained, recounted)})], "daily": [...], "session_model": [...]}: every
    row that disagrees (rows whose counters are all zero count as absent); all lists empty when all agree.
    """
    with connection.cursor() as cursor:
        cursor.execute(ROLLUP_RECOUNT_SQL, {"tenant": tenant.pk})
        columns = [c.name for c in cursor.description]
        recounted = {
            tuple(row[k] for k in _HOURLY_KEY): {f: int(row[f]) for f in _HOURLY_FIELDS}
            for row in (dict(zip(columns, values, strict=True)) for values in cursor.fetchall())
        }
        cursor.execute(SESSION_MODEL_RECOUNT_SQL, {"tenant": tenant.pk})
        columns = [c.name for c in cursor.description]
        recounted_models = {
            (row["session_id"], row["model"]): {f: int(row[f]) for f in _MODEL_FIELDS}
            for row in (dict(zip(columns, values, strict=True)) for values in cursor.fetchall())
        }
    maintained = {
        tuple(row[k] for k in _HOURLY_KEY): {f: row[f] for f in _HOURLY_FIELDS}
        for row in UsageHourly.objects.filter(tenant=tenant).values(*_HOURLY_KEY, *_HOURLY_FIELDS)
        if any(row[f] for f in _HOURLY_FIELDS)
    }
    recounted_days: dict = defaultdict(lambda: dict.fromkeys(_HOURLY_FIELDS, 0))
    for (hour, *rest), counters in recounted.items():
        day = recounted_days[(hour.astimezone(UTC).date(), *rest)]
        for field in _HOURLY_FIELDS:
            day[field] += counters[field]
    maintained_days = {
        tuple(row[k] for k in _DAILY_KEY): {f: row[f] for f in _HOURLY_FIELDS}
        for row in UsageDaily.objects.filter(tenant=tenant).values(*_DAILY_KEY, *_HOURLY_FIELDS)
        if any(row[f] for f in _HOURLY_FIELDS)
    }
    maintained_models = {
        (row["session_id"], row["model"]): {f: row[f] for f in _MODEL_FIELDS}
        for row in SessionModelUsage.objects.filter(tenant=tenant).values("session_id", "model", *_MODEL_FIELDS)
        if any(row[f] for f in _MODEL_FIELDS)
    }
    return {
        "hourly": _differences(maintained, recounted, _HOURLY_FIELDS),
        "daily": _differences(maintained_days, recounted_days, _HOURLY_FIELDS),
        "session_model": _differences(maintained_models, recounted_models, _MODEL_FIELDS),
    }


def _differences(maintained: dict, recounted: dict, fields) -> list:
    out = []
    for key in sorted(maintained.keys() | recounted.keys(), key=str):
        a, b = maintained.get(key, {}), recounted.get(key, {})
        diff = {f: (a.get(f, 0), b.get(f, 0)) for f in fields if a.get(f, 0) != b.get(f, 0)}
        if diff:
            out.append((key, diff))
    return out
