"""GET /healthz: is the database reachable, is the broker reachable (no auth); when not, why. And the embedder this
process uses: which, whether its model is loaded (web processes load it when they start), how long that took. And
how many requests were answered with a server error, by every process, since when, and the last one.

The answer is public: it says which component failed in generic words ("the broker is not running"); the
error itself, which can name a host, a socket path or a file, goes to the log (logger `aceproject.health`).

The kit knows no app: the project's URLs hand the view the Celery app whose broker it probes and the function
that describes the embedder (`memory_app.embedders.health.embedder_health`, aceproject/urls.py)."""

import logging
import socket

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from platform_kit.outages import RETRY_AFTER_SECONDS, database_unavailable
from platform_kit.server_errors import server_errors_summary

logger = logging.getLogger("aceproject.health")  # the name docs/api.md gives operators


def down_logged(component: str, error: BaseException) -> None:
    """The details of a component found down, for the log only (the answer says it in generic words)."""
    logger.warning("/healthz: %s is down: %s: %s", component, type(error).__name__, error)


def _generic_reason(component: str, error: BaseException) -> str:
    """What the error means, in words that name no host, path or port."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError | FileNotFoundError):
            return f"the {component} is not running (nothing listens where it is configured)"
        if isinstance(error, TimeoutError | socket.timeout):
            return f"the {component} did not answer in time"
        if isinstance(error, socket.gaierror):
            return f"the {component}'s host name does not resolve"
        error = error.__cause__ or error.__context__
    return f"the {component} cannot be reached"


def _database_problem() -> str | None:
    """None when `SELECT 1` works; else a short reason. Connecting is also what starts an embedded server
    found down again (aceproject.embedded_backend), so a probe helps the service recover."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return None
    except Exception as error:  # noqa: BLE001 - any failure means "down"
        down_logged("the database", error)
        return database_unavailable(error) or "the database answered with an error (see the server log)"


def _broker_problem(app) -> str | None:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return None
    except Exception as error:  # noqa: BLE001
        down_logged("the broker", error)
        return _generic_reason("broker", error)


@require_GET
def healthz(request, *, broker, embedder_status):
    """`broker`: the Celery app whose broker is probed; `embedder_status`: what the embedder says of itself, a
    dict (never raises, never loads a model)."""
    problems = {"database": _database_problem(), "broker": _broker_problem(broker)}
    embedder = embedder_status()
    checks = {name: "ok" if problem is None else "down" for name, problem in problems.items()}
    down = {name: problem for name, problem in problems.items() if problem is not None}
    if down:
        response = JsonResponse(
            {
                **checks,
                "detail": "Down: " + "; ".join(f"{name} ({problem})" for name, problem in down.items()) + ".",
                "reasons": down,
                "embedder": embedder,
                **({"errors": _server_errors()} if problems["database"] is None else {}),
            },
            status=503,
        )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    # Past server errors are reported, not judged: they leave the status 200 (an outage is what makes it 503).
    return JsonResponse({**checks, "embedder": embedder, "errors": _server_errors()})


def _server_errors() -> dict:
    try:
        return server_errors_summary()
    except Exception as error:  # noqa: BLE001 - the probe answers whatever this one read does
        return {"server_errors_5xx": None, "detail": f"could not be read: {type(error).__name__}"}
