"""Reads: counters and grouped usage. Everything here reads maintained counters, never scans messages."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import F, Sum
from django.db.models.functions import TruncDate

from sessions_app.models import COUNTER_FIELDS, Session, Tenant, UsageHourly

# The contract's counters, in the contract's order, plus `message_system`.
STATS_FIELDS = (
    "requests",
    "conversations",
    "messages",
    "message_user",
    "message_assistant",
    "message_toolresult",
    "message_error",
    "message_system",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "total_tokens",
)
GROUP_BY = ("day", "tool", "user_id", "model", "session")


def counters_of(obj, *, conversations: int | None = None) -> dict[str, int]:
    values = {field: getattr(obj, field, 0) for field in COUNTER_FIELDS}
    values["conversations"] = conversations if conversations is not None else getattr(obj, "conversations", 0)
    return {field: values[field] for field in STATS_FIELDS}


def session_stats(*, session: Session) -> dict[str, int]:
    return counters_of(session)


def _floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _ceil_hour(moment: datetime) -> datetime:
    floor = _floor_hour(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def _sums(queryset, fields=STATS_FIELDS) -> dict[str, int]:
    totals = queryset.aggregate(**{field: Sum(field) for field in fields})
    return {field: int(totals[field] or 0) for field in fields}


def usage_grouped(
    *,
    tenant: Tenant,
    group_by: str,
    since: datetime | None = None,
    until: datetime | None = None,
    tool: str | None = None,
    user_id: str | None = None,
    limit: int = 100,
) -> dict:
    """Usage counters grouped by day, tool, user, model (hourly roll-ups) or session (session counters).

    Roll-ups are hourly, so `since` is rounded down and `until` up to whole UTC hours; the window that
    was actually counted is returned. Grouped by session, the window selects sessions by start time.
    """
    if group_by == "session":
        return _usage_by_session(tenant=tenant, since=since, until=until, tool=tool, user_id=user_id, limit=limit)

    rows = UsageHourly.objects.filter(tenant=tenant)
    window = {"since": None, "until": None}
    if since is not None:
        window["since"] = _floor_hour(since)
        rows = rows.filter(hour__gte=window["since"])
    if until is not None:
        window["until"] = _ceil_hour(until)
        rows = rows.filter(hour__lt=window["until"])
    if tool is not None:
        rows = rows.filter(tool=tool)
    if user_id is not None:
        rows = rows.filter(user_id=user_id)

    key = {"day": TruncDate("hour"), "tool": F("tool"), "user_id": F("user_id"), "model": F("model")}[group_by]
    grouped = rows.annotate(key=key).values("key").annotate(**{f: Sum(f) for f in STATS_FIELDS}).order_by("key")
    results = []
    for row in grouped:
        value = row["key"]
        value = value.isoformat() if hasattr(value, "isoformat") else (value or None)
        results.append({"key": value, **{field: int(row[field] or 0) for field in STATS_FIELDS}})
    if group_by != "day":
        results.sort(key=lambda r: (-r["total_tokens"], -r["messages"], r["key"] or ""))
    return {"group_by": group_by, **window, "results": results, "totals": _sums(rows)}


def _usage_by_session(*, tenant, since, until, tool, user_id, limit) -> dict:
    sessions = Session.objects.filter(tenant=tenant)
    if since is not None:
        sessions = sessions.filter(started_at__gte=since)
    if until is not None:
        sessions = sessions.filter(started_at__lt=until)
    if tool is not None:
        sessions = sessions.filter(tool=tool)
    if user_id is not None:
        sessions = sessions.filter(user_id=user_id)
    # Deleted sessions stay in the totals (their usage happened) but are not listed: the API hides them.
    top = (
        sessions.filter(deleted_at__isnull=True)
        .order_by("-total_tokens", "-messages", "-started_at")
        .only("id", "name", "tool", "user_id", "started_at", *STATS_FIELDS)[:limit]
    )
    results = [
        {
            "key": str(s.pk),
            "name": s.name,
            "tool": s.tool,
            "user_id": s.user_id,
            "started_at": s.started_at,
            **counters_of(s),
        }
        for s in top
    ]
    return {"group_by": "session", "since": since, "until": until, "results": results, "totals": _sums(sessions)}


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
