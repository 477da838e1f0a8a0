"""The roll-ups' SQL: the clauses that add a write's counter changes to the hourly and daily roll-ups and to the
sessions' usage by model (the ledger's unit of work, services.ledger, runs them in its one statement; the session
and conversation rows are updated by the writers, which hold the session's row lock), and rebuilding them from
the messages when an audit finds them wrong."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime

from django.db import connection, transaction

from platform_kit.db import Clause
from sessions_app.models import (
    Session,
    SessionModelUsage,
    Tenant,
    UsageDaily,
    UsageHourly,
)
from sessions_app.schema import MEASURE_FIELDS, ROLLUP_FIELDS

ROLLUP_KEY = ("tenant_id", "hour", "tool", "user_id", "project", "machine", "model")
DAILY_KEY = ("tenant_id", "day", "tool", "user_id", "project", "machine", "model")
SESSION_MODEL_FIELDS = ("requests", *MEASURE_FIELDS)


def _upsert_sql(table: str, key: tuple[str, ...], fields: tuple[str, ...], rows: list[list], conflict=None):
    """INSERT rows of (*key, *fields) values; on a conflict on `conflict` (default: key) add the fields."""
    columns = [*key, *fields]
    values = ", ".join("(" + ", ".join(["%s"] * len(columns)) + ")" for _ in rows)
    updates = ", ".join(f"{field} = {table}.{field} + EXCLUDED.{field}" for field in fields)
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES {values} "
        f"ON CONFLICT ({', '.join(conflict or key)}) DO UPDATE SET {updates}"
    )
    return sql, [value for row in rows for value in row]


def rollup_clauses(*, entries: list[tuple[Session, dict[tuple[datetime, str], dict]]]) -> list[Clause]:
    """The clauses that add `entries` ({(hour, model): counters} per session) to the roll-ups: the hourly and daily
    rows of each session's tenant/tool/user/project/machine, and the requests and tokens to the sessions' usage by
    model and day. Sessions that share a tenant, tool, user, project and machine share roll-up rows: their deltas are
    summed. The rows go in one fixed order (sorted keys) for every writer, so writers sharing rows cannot
    deadlock. The ledger's unit of work (services.ledger) makes them WITH clauses of its one statement."""
    hourly: dict[tuple, Counter] = defaultdict(Counter)
    daily: dict[tuple, Counter] = defaultdict(Counter)
    by_model: dict[tuple, Counter] = defaultdict(Counter)
    for session, deltas in entries:
        for (hour, model), delta in deltas.items():
            if not any(delta.values()):
                continue
            dimensions = (session.tool, session.user_id, session.project, session.machine, model)
            hourly[(session.tenant_id, hour, *dimensions)].update(delta)
            daily[(session.tenant_id, hour.astimezone(UTC).date(), *dimensions)].update(delta)
            model_delta = by_model[(session.tenant_id, session.pk, model, hour.astimezone(UTC).date())]
            for name in SESSION_MODEL_FIELDS:
                model_delta[name] += delta.get(name, 0)
    if not hourly:
        return []
    clauses = [
        _upsert_sql(UsageHourly._meta.db_table, ROLLUP_KEY, ROLLUP_FIELDS, _rows(hourly, ROLLUP_FIELDS)),
        _upsert_sql(UsageDaily._meta.db_table, DAILY_KEY, ROLLUP_FIELDS, _rows(daily, ROLLUP_FIELDS)),
    ]
    model_rows = _rows(by_model, SESSION_MODEL_FIELDS)
    if model_rows:
        clauses.append(
            _upsert_sql(
                SessionModelUsage._meta.db_table,
                ("tenant_id", "session_id", "model", "day"),
                SESSION_MODEL_FIELDS,
                model_rows,
                conflict=("session_id", "model", "day", "tenant_id"),
            )
        )
    return clauses


def _rows(deltas: dict[tuple, Counter], fields: tuple[str, ...]) -> list[list]:
    return [
        [*key, *(delta.get(name, 0) for name in fields)]
        for key, delta in sorted(deltas.items())
        if any(delta.get(name, 0) for name in fields)
    ]


def rollups_rebuild(*, tenant: Tenant) -> dict[str, int]:
    """Replace the tenant's roll-ups (hourly, daily) and sessions' usage by model with a recount from its messages.

    Both tables are locked against writers (EXCLUSIVE: readers go on) for the duration, so messages
    appended meanwhile wait, then add to the rebuilt rows: none is lost or counted twice. This scans
    the tenant's messages; `manage.py ace_recount --rollups --fix` runs it."""
    from sessions_app.selectors.recount import ROLLUP_RECOUNT_SQL, SESSION_MODEL_RECOUNT_SQL

    hourly = UsageHourly._meta.db_table
    daily = UsageDaily._meta.db_table
    by_model = SessionModelUsage._meta.db_table
    rollup_columns = ", ".join([*ROLLUP_KEY, *ROLLUP_FIELDS])
    daily_columns = ", ".join([*DAILY_KEY, *ROLLUP_FIELDS])
    day_sums = ", ".join(f"SUM({field})" for field in ROLLUP_FIELDS)
    model_columns = ", ".join(["tenant_id", "session_id", "model", "day", *SESSION_MODEL_FIELDS])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {hourly}, {daily}, {by_model} IN EXCLUSIVE MODE")
        for table in (hourly, daily, by_model):
            cursor.execute(f"DELETE FROM {table} WHERE tenant_id = %s", [tenant.pk])
        cursor.execute(
            f"INSERT INTO {hourly} ({rollup_columns}) SELECT {rollup_columns} FROM ({ROLLUP_RECOUNT_SQL}) AS recount",
            {"tenant": tenant.pk},
        )
        hourly_rows = cursor.rowcount
        cursor.execute(
            f"INSERT INTO {daily} ({daily_columns}) "
            f"SELECT tenant_id, (hour AT TIME ZONE 'UTC')::date, tool, user_id, project, machine, model, {day_sums} "
            f"FROM {hourly} WHERE tenant_id = %s GROUP BY 1, 2, 3, 4, 5, 6, 7",
            [tenant.pk],
        )
        daily_rows = cursor.rowcount
        cursor.execute(
            f"INSERT INTO {by_model} ({model_columns}) "
            f"SELECT {model_columns} FROM ({SESSION_MODEL_RECOUNT_SQL}) AS recount",
            {"tenant": tenant.pk},
        )
        model_rows = cursor.rowcount
    return {"hourly_rows": hourly_rows, "daily_rows": daily_rows, "session_model_rows": model_rows}
