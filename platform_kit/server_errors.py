"""Server errors counted across processes: gunicorn runs several web workers, so the count lives in the database
(one row, one statement per error; a healthy installation writes nothing) and /healthz reads it back."""

from __future__ import annotations

import logging

from django.db import connection

from platform_kit.models import ServerErrorTally

logger = logging.getLogger(__name__)

PATH_LIMIT = 500  # characters of the path kept for the last error


def server_error_record(*, request_id: str, path: str, status: int) -> None:
    """Count one server error. Never raises: a failure to count (the database being the problem) is logged."""
    table = ServerErrorTally._meta.db_table
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (id, count, since, last_at, last_request_id, last_path, last_status) "
                "VALUES (1, 1, now(), now(), %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                f"count = {table}.count + 1, last_at = now(), last_request_id = EXCLUDED.last_request_id, "
                "last_path = EXCLUDED.last_path, last_status = EXCLUDED.last_status",
                [request_id[:64], path[:PATH_LIMIT], status],
            )
    except Exception:  # noqa: BLE001 - counting must not turn one error into two
        logger.warning("could not count server error %s on %s", request_id, path, exc_info=True)


def server_errors_summary() -> dict:
    """{"server_errors_5xx": n, "since": time, "last": {"at", "request_id", "path", "status"} | None}."""
    tally = ServerErrorTally.objects.filter(pk=1).first()
    if tally is None:
        return {"server_errors_5xx": 0, "since": None, "last": None}
    last = None
    if tally.last_at is not None:
        last = {
            "at": tally.last_at,
            "request_id": tally.last_request_id,
            "path": tally.last_path,
            "status": tally.last_status,
        }
    return {"server_errors_5xx": tally.count, "since": tally.since, "last": last}
