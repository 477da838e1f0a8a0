"""GET /healthz: is the database reachable, is the broker reachable (no auth)."""

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # noqa: BLE001 - any failure means "down"
        return False


def _broker_ok() -> bool:
    from aceproject.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:  # noqa: BLE001
        return False


@require_GET
def healthz(request):
    checks = {"database": "ok" if _database_ok() else "down", "broker": "ok" if _broker_ok() else "down"}
    down = [name for name, value in checks.items() if value != "ok"]
    if down:
        return JsonResponse({**checks, "detail": f"Down: {', '.join(down)}."}, status=503)
    return JsonResponse(checks)
