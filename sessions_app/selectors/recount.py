"""Audits: the counters recounted from the stored messages, and where the maintained ones differ.

The recount restates `sessions_app.accounting` in SQL, independently of the Python that maintains the
counters as messages arrive (tests/sessions_app/test_accounting.py checks that the two agree). It scans
messages: `manage.py ace_recount` runs it, and `services.rollups.rollups_rebuild` rebuilds from it.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC

from django.db import connection

from sessions_app.models import Session, SessionModelUsage, Tenant, UsageDaily, UsageHourly
from sessions_app.schema import MEASURE_FIELDS, ROLLUP_FIELDS, STATS_FIELDS, TOKEN_FIELDS
from sessions_app.selectors.usage import session_stats

_COALESCED = ", ".join(f"COALESCE({field}, 0) AS {field}" for field in MEASURE_FIELDS)
_RECOUNT_SQL = f"""
WITH m AS (
    SELECT * FROM sessions_app_message WHERE session_id = %(session)s
), per_request AS (
    -- lines of one response share a request_id: the request counts once, with its most complete usage
    SELECT 1 AS requests, {", ".join(f"MAX(COALESCE({field}, 0)) AS {field}" for field in TOKEN_FIELDS)}
    FROM m WHERE request_id <> '' AND api_calls IS NULL GROUP BY request_id
), single AS (
    -- a message with auth_type is one request; a completed turn says how many calls it made
    SELECT CASE WHEN api_calls IS NOT NULL THEN api_calls WHEN auth_type <> '' THEN 1 ELSE 0 END AS requests,
           {", ".join(f"COALESCE({field}, 0) AS {field}" for field in TOKEN_FIELDS)}
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
    {", ".join(f"(SELECT COALESCE(SUM({field}), 0) FROM usage)" for field in TOKEN_FIELDS)}
"""


def session_recount(*, session: Session) -> dict[str, int]:
    """The session's counters recomputed from its messages by the counting rules (a full scan of the
    session's rows): what auditors compare with the maintained counters."""
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
_CONTRIBUTIONS_OF = """
WITH m AS (
    SELECT tenant_id, session_id, seq, created_at, role, model, request_id, auth_type, api_calls,
           {coalesced},
           (request_id <> '' AND api_calls IS NULL) AS in_request
    FROM sessions_app_message
    WHERE {messages}
), running AS (
    SELECT m.*, ROW_NUMBER() OVER w AS nth,
           {running_max},
           (ARRAY_REMOVE(ARRAY_AGG(NULLIF(model, '')) OVER w, NULL))[1] AS request_model
    FROM m
    WHERE in_request
    WINDOW w AS (PARTITION BY session_id, request_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), contribution AS (
    SELECT tenant_id, session_id, seq, created_at, role, COALESCE(NULLIF(model, ''), request_model, '') AS model,
           (nth = 1)::int AS requests,
           {growth}
    FROM running
    WINDOW p AS (PARTITION BY session_id, request_id ORDER BY seq)
    UNION ALL
    SELECT tenant_id, session_id, seq, created_at, role, model,
           CASE WHEN api_calls IS NOT NULL THEN api_calls WHEN auth_type <> '' THEN 1 ELSE 0 END,
           {tokens}
    FROM m
    WHERE NOT in_request
)
"""
_TOKEN_SQL = {
    "coalesced": _COALESCED,
    "running_max": ", ".join(f"MAX({field}) OVER w AS {field}_max" for field in MEASURE_FIELDS),
    "growth": ", ".join(f"{field}_max - COALESCE(LAG({field}_max) OVER p, 0) AS {field}" for field in MEASURE_FIELDS),
    "tokens": ", ".join(MEASURE_FIELDS),
}
_CONTRIBUTIONS_SQL = _CONTRIBUTIONS_OF.format(messages="tenant_id = %(tenant)s", **_TOKEN_SQL)
_COUNTER_SUMS = ", ".join(f"SUM({field})::bigint AS {field}" for field in ROLLUP_FIELDS)
_ANY_COUNTER = " OR ".join(f"SUM({field}) <> 0" for field in ROLLUP_FIELDS)
# The hourly roll-up rows of a tenant: a message counts in its hour under its model; a conversation in the
# hour of the message that started it, under that message's own model; a session with its first message.
ROLLUP_RECOUNT_SQL = (
    _CONTRIBUTIONS_SQL
    + f"""
, parts AS (
    SELECT s.tenant_id, date_trunc('hour', c.created_at, 'UTC') AS hour, s.tool, s.user_id, s.project, s.machine,
           c.model,
           c.requests, 1 AS messages, (c.role = 'user')::int AS message_user,
           (c.role = 'assistant')::int AS message_assistant, (c.role = 'toolResult')::int AS message_toolresult,
           (c.role = 'error')::int AS message_error, (c.role = 'system')::int AS message_system,
           {", ".join(f"c.{field}" for field in MEASURE_FIELDS)},
           0 AS conversations, (c.seq = 1)::int AS sessions
    FROM contribution c JOIN sessions_app_session s ON s.id = c.session_id
    UNION ALL
    SELECT s.tenant_id, date_trunc('hour', first.created_at, 'UTC'), s.tool, s.user_id, s.project, s.machine,
           first.model,
           {", ".join(["0"] * (len(ROLLUP_FIELDS) - 2))}, 1, 0
    FROM sessions_app_conversation v
    JOIN sessions_app_session s ON s.id = v.session_id
    CROSS JOIN LATERAL (
        SELECT created_at, model FROM sessions_app_message WHERE conversation_id = v.id ORDER BY seq LIMIT 1
    ) AS first
    WHERE s.tenant_id = %(tenant)s
)
SELECT tenant_id, hour, tool, user_id, project, machine, model, {_COUNTER_SUMS}
FROM parts
GROUP BY tenant_id, hour, tool, user_id, project, machine, model
HAVING {_ANY_COUNTER}
"""
)
_MODEL_FIELDS = ("requests", *MEASURE_FIELDS)
SESSION_MODEL_RECOUNT_SQL = (
    _CONTRIBUTIONS_SQL
    + f"""
SELECT tenant_id, session_id, model, (created_at AT TIME ZONE 'UTC')::date AS day,
       {", ".join(f"SUM({f})::bigint AS {f}" for f in _MODEL_FIELDS)}
FROM contribution
GROUP BY tenant_id, session_id, model, day
HAVING {" OR ".join(f"SUM({f}) <> 0" for f in _MODEL_FIELDS)}
"""
)
_HOURLY_KEY = ("hour", "tool", "user_id", "project", "machine", "model")
_DAILY_KEY = ("day", "tool", "user_id", "project", "machine", "model")
_HOURLY_FIELDS = ROLLUP_FIELDS


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
            (row["session_id"], row["model"], row["day"]): {f: int(row[f]) for f in _MODEL_FIELDS}
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
        (row["session_id"], row["model"], row["day"]): {f: row[f] for f in _MODEL_FIELDS}
        for row in SessionModelUsage.objects.filter(tenant=tenant).values("session_id", "model", "day", *_MODEL_FIELDS)
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


_SESSIONS_HOURLY_TOKENS_SQL = (
    _CONTRIBUTIONS_OF.format(messages="tenant_id = %(tenant)s AND session_id = ANY(%(sessions)s)", **_TOKEN_SQL)
    + f"""
SELECT session_id, date_trunc('hour', created_at, 'UTC') AS hour, model,
       {", ".join(f"SUM({field})::bigint" for field in TOKEN_FIELDS)}
FROM contribution
GROUP BY 1, 2, 3
"""
)


def sessions_hourly_tokens(*, tenant_id, session_ids: list) -> dict:
    """{session id: {(hour, model): {token field: count}}}: what these sessions' messages added to the roll-ups'
    tokens, hour by hour (the budgets' usage was added from the same figures)."""
    usage: dict = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(_SESSIONS_HOURLY_TOKENS_SQL, {"tenant": tenant_id, "sessions": list(session_ids)})
        for session_id, hour, model, *tokens in cursor.fetchall():
            usage[session_id][(hour, model)] = dict(zip(TOKEN_FIELDS, tokens, strict=True))
    return dict(usage)
