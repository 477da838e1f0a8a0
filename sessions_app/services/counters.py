"""Applying counter changes to the hourly roll-ups (the session and conversation rows are updated by
their writers, which hold the session's row lock)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db import connection

from sessions_app.models import COUNTER_FIELDS, Session, UsageHourly

ROLLUP_FIELDS = (*COUNTER_FIELDS, "conversations")


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def rollup_add(*, session: Session, deltas: dict[tuple[datetime, str], Counter]) -> None:
    """Add `deltas` ({(hour, model): counters}) to the session's tenant/tool/user roll-up rows."""
    deltas = {key: delta for key, delta in deltas.items() if any(delta.values())}
    if not deltas:
        return
    table = UsageHourly._meta.db_table
    columns = ["tenant_id", "hour", "tool", "user_id", "model", *ROLLUP_FIELDS]
    rows, params = [], []
    for (hour, model), delta in sorted(deltas.items()):  # one fixed order for every writer: no deadlocks
        rows.append("(" + ", ".join(["%s"] * len(columns)) + ")")
        params += [session.tenant_id, hour, session.tool, session.user_id, model]
        params += [delta.get(field, 0) for field in ROLLUP_FIELDS]
    updates = ", ".join(f"{field} = {table}.{field} + EXCLUDED.{field}" for field in ROLLUP_FIELDS)
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join(rows)} "
        f"ON CONFLICT (tenant_id, hour, tool, user_id, model) DO UPDATE SET {updates}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
