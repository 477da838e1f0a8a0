"""The database going away: telling an outage from a bug, and answering it with a 503 and Retry-After.

While PostgreSQL is unreachable (stopped, restarting, crashed, out of connections) a request cannot be
served, but it can be retried a few seconds later: clients get 503 with `Retry-After`, never a 500, and a
Celery task is retried later instead of failing (platform_kit.tasks.Task).
"""

from __future__ import annotations

import psycopg
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse

# What clients are told to wait before retrying: an embedded server restarts in a second or two.
RETRY_AFTER_SECONDS = 5

# SQLSTATEs of a server that is there but cannot serve: a connection exception (08), shutting down or
# starting up (57P01-57P03), out of connections (53300).
_UNAVAILABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300")

# Words of libpq's messages (they carry no SQLSTATE) and what they mean, in the order they are looked for.
_REASONS = (
    ("shutting down", "the database server is shutting down"),
    ("starting up", "the database server is starting up"),
    ("administrator command", "the database server was stopped"),
    ("could not be started", "the database server is down and could not be started"),
    ("no such file or directory", "the database server is not running"),
    ("connection refused", "the database server is not running"),
    ("too many", "the database server has no connection to spare"),
    ("timeout", "the database server did not answer in time"),
    ("timed out", "the database server did not answer in time"),
    ("connection failed", "the database server cannot be reached"),
)


def database_unavailable(error: BaseException | None) -> str | None:
    """A short reason when `error` (or what it was raised from) means the database cannot be reached right
    now; None for any other error, a failed query included."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, psycopg.Error) and _is_unavailability(error):
            return _reason(error)
        if isinstance(error, OperationalError | InterfaceError) and error.__cause__ is None:
            # Django's own (a connection it already knows is closed), not the driver's.
            if "connection" in str(error).lower() and "closed" in str(error).lower():
                return "the connection to the database was lost"
        error = error.__cause__  # Django raises its own from the driver's
    return None


def _is_unavailability(error: psycopg.Error) -> bool:
    sqlstate = error.sqlstate
    if sqlstate is None:
        # No SQLSTATE: libpq could not connect, or lost the connection; psycopg closed it.
        return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)
    return sqlstate.startswith(_UNAVAILABLE_SQLSTATES)


def _reason(error: psycopg.Error) -> str:
    text = str(error).lower()
    for words, reason in _REASONS:
        if words in text:
            return reason
    return "the connection to the database was lost"


def unavailable_response(reason: str) -> JsonResponse:
    """The API's error shape, 503, with Retry-After."""
    response = JsonResponse(
        {
            "detail": f"The database is unavailable ({reason}). Retry in a few seconds.",
            "errors": {},
        },
        status=503,
    )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
