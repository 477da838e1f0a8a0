"""GET /healthz: is the database reachable, is the broker reachable (no auth); when not, why. And the embedder this
process uses: which, whether its model is loaded (web processes load it when they start), how long that took. And
how many requests were answered with a server error, by every process, since when, and the last one.

The answer is public: it says which component failed in generic words ("the broker is not running"); the
error itself, which can name a host, a socket path or a file, goes to the log (logger `aceproject.health`)."""

import logging
import re
import socket

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from platform_kit.outages import RETRY_AFTER_SECONDS, database_unavailable
from platform_kit.server_errors import server_errors_summary

logger = logging.getLogger(__name__)
_SETTING_NAME = re.compile(r"\bACE_[A-Z_]+[A-Z]\b")


def _logged(component: str, error: BaseException) -> None:
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
        _logged("the database", error)
        return database_unavailable(error) or "the database answered with an error (see the server log)"


def _broker_problem() -> str | None:
    from aceproject.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return None
    except Exception as error:  # noqa: BLE001
        _logged("the broker", error)
        return _generic_reason("broker", error)


def _embedder_status() -> dict:
    """The configured embedder as this process has it, never loading it (a health probe must stay fast)."""
    from django.conf import settings

    try:
        from memory_app.embedders import get_embedder

        status = get_embedder().status()
    except Exception as error:  # noqa: BLE001 - misconfigured: say so; recall falls back to keywords
        _logged("the embedder", error)
        # The settings to look at, by name; the message itself may name a model folder or an endpoint.
        names = sorted(set(_SETTING_NAME.findall(str(error))))
        return {
            "provider": str(settings.ACE_EMBEDDER),
            "loaded": False,
            "error": f"misconfigured: {', '.join(names) or 'ACE_EMBEDDER'} (the server log says how)",
        }
    return status


@require_GET
def healthz(request):
    problems = {"database": _database_problem(), "broker": _broker_problem()}
    embedder = _embedder_status()
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
