"""Failed authentications throttled per client address, across processes and hosts.

Each failure is counted in the database (`AuthFailureWindow`: one row per scope, address and fixed window, one
`INSERT … ON CONFLICT DO UPDATE` per failure), so every web process on every host shares the count, with no
server beyond the PostgreSQL every installation has (the default cache is per process). Successes cost nothing:
no query is added to a request whose key is good.

- **API keys** (the REST API, MCP over HTTP, the OTLP receiver): after `ACE_API_KEY_FAILURE_LIMIT` unknown keys
  from one address within a minute, that address is answered 429 with `Retry-After` until the minute ends,
  without its keys being checked. A key this process accepted in the last `ACE_API_KEY_CACHE_SECONDS` still
  works from that address: a client behind the same NAT as a guesser keeps going, or waits at most the rest of
  the minute.
- **The admin login** (`AddressLoginThrottleBackend`): after `ACE_LOGIN_ADDRESS_FAILURE_LIMIT` wrong passwords
  from one address within `ACE_LOGIN_COOLOFF_MINUTES`, whatever the user names, that address's logins are
  refused until the window ends — beside django-axes' lock of one user name from one address.

The client address is REMOTE_ADDR; behind `ACE_PROXY_COUNT` reverse proxies, the address those proxies saw
(the count-th from the right of X-Forwarded-For)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

API, ADMIN = "api", "admin"
API_WINDOW_SECONDS = 60

# Addresses this process saw over the limit, until when (monotonic): they are refused without a query.
_blocked: dict[tuple[str, str], float] = {}
_blocked_lock = threading.Lock()
_BLOCKED_LIMIT = 10_000


def client_ip(request) -> str | None:
    """The client's address as the throttles and django-axes count it (None when the server gave none)."""
    proxies = getattr(settings, "ACE_PROXY_COUNT", 0)
    if proxies > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies][:64]
    return request.META.get("REMOTE_ADDR") or None


def client_address(request) -> str:
    return client_ip(request) or "unknown"


def _window(seconds: int) -> tuple[datetime, int]:
    """The start of the current window and the seconds left in it (at least 1)."""
    now = timezone.now()
    epoch = int(now.timestamp())
    start = epoch - epoch % seconds
    return datetime.fromtimestamp(start, tz=now.tzinfo), max(1, start + seconds - epoch)


def failure_count(*, scope: str, address: str, window_seconds: int) -> tuple[int, int]:
    """(failures from `address` in the current window, seconds until it ends)."""
    start, left = _window(window_seconds)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT failures FROM platform_kit_authfailurewindow "
            "WHERE scope = %s AND address = %s AND window_start = %s",
            [scope, address, start],
        )
        row = cursor.fetchone()
    return (row[0] if row else 0), left


def failure_add(*, scope: str, address: str, window_seconds: int) -> tuple[int, int]:
    """Count one failure from `address`; (failures in the current window now, seconds until it ends)."""
    start, left = _window(window_seconds)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO platform_kit_authfailurewindow (scope, address, window_start, failures) "
            "VALUES (%s, %s, %s, 1) ON CONFLICT (scope, address, window_start) "
            "DO UPDATE SET failures = platform_kit_authfailurewindow.failures + 1 RETURNING failures",
            [scope, address, start],
        )
        failures = cursor.fetchone()[0]
        if failures == 1:  # a window starts: the past ones are of no more use
            cursor.execute(
                "DELETE FROM platform_kit_authfailurewindow WHERE window_start < %s",
                [start - timedelta(seconds=max(window_seconds, 3600))],
            )
    return failures, left


# -- API keys ------------------------------------------------------------------------------------------------
def api_key_blocked(address: str) -> int | None:
    """Seconds until `address` may try keys again, when this process knows it is over the limit; else None."""
    until = _blocked.get((API, address))
    if until is None:
        return None
    left = until - time.monotonic()
    if left <= 0:
        _blocked.pop((API, address), None)
        return None
    return max(1, int(left + 0.999))


def api_key_failed(address: str) -> int | None:
    """Count an unknown key from `address`; the seconds to answer in Retry-After when it is now over the limit."""
    limit = settings.ACE_API_KEY_FAILURE_LIMIT
    if limit <= 0:
        return None
    failures, left = failure_add(scope=API, address=address, window_seconds=API_WINDOW_SECONDS)
    if failures <= limit:
        return None
    with _blocked_lock:
        if len(_blocked) >= _BLOCKED_LIMIT:
            _blocked.clear()
        _blocked[(API, address)] = time.monotonic() + left
    return left


def api_keys_unblock() -> None:
    """Forget which addresses this process saw over the limit (the tests start each from nothing)."""
    _blocked.clear()


# -- the admin login ------------------------------------------------------------------------------------------
def _admin_window_seconds() -> int:
    return max(60, int(settings.AXES_COOLOFF_TIME.total_seconds()))


class AddressLoginThrottleBackend:
    """First of AUTHENTICATION_BACKENDS: refuses every login from an address over its limit of wrong passwords,
    whatever the user name, with django-axes' lockout answer (429). Logs no one in itself."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        limit = settings.ACE_LOGIN_ADDRESS_FAILURE_LIMIT
        if request is None or limit <= 0:
            return None
        failures, _ = failure_count(
            scope=ADMIN, address=client_address(request), window_seconds=_admin_window_seconds()
        )
        if failures >= limit:
            from django.core.exceptions import PermissionDenied

            request.axes_locked_out = True  # django-axes' middleware answers with its lockout page
            raise PermissionDenied("Too many failed logins from this address.")
        return None


def admin_login_failed(sender, credentials, request=None, **kwargs) -> None:
    """django.contrib.auth's user_login_failed: one more wrong password from the request's address."""
    if request is None or settings.ACE_LOGIN_ADDRESS_FAILURE_LIMIT <= 0:
        return
    failure_add(scope=ADMIN, address=client_address(request), window_seconds=_admin_window_seconds())
