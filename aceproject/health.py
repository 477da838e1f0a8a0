"""GET /healthz: is the database reachable, is the broker reachable (no auth); when not, why. And the embedder this
process uses: which, whether its model is loaded (web processes load it when they start), how long that took. And
how many requests were answered with a server error, by every process, since when, and the last one."""

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from platform_kit.outages import RETRY_AFTER_SECONDS, database_unavailable
from platform_kit.server_errors import server_errors_summary


def _database_problem() -> str | None:
    """None when `SELECT 1` works; else a short reason. Connecting is also what starts an embedded server
    found down again (aceproject.embedded_backend), so a probe helps the service recover."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return None
    except Exception as error:  # noqa: BLE001 - any failure means "down"
        return database_unavailable(error) or f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"


def _broker_problem() -> str | None:
    from aceproject.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return None
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else 'unreachable'}"


def _embedder_status() -> dict:
    """The configured embedder as this process has it, never loading it (a health probe must stay fast)."""
    from django.conf import settings

    try:
        from memory_app.embedders import get_embedder

        status = get_embedder().status()
    except Exception as error:  # noqa: BLE001 - misconfigured: say so; recall falls back to keywords
        return {
            "provider": str(settings.ACE_EMBEDDER),
            "loaded": False,
            "error": f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}",
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
