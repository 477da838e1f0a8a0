"""API keys: created once (the plain key is shown only then), stored as a SHA-256 digest, revocable."""

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions_app.models import ApiKey, Tenant

KEY_PREFIX = "ace_"
# last_used_at is a hint for auditors, not a log: write it at most this often per key.
LAST_USED_RESOLUTION = timedelta(minutes=1)


# The key check comes first in every API call, so this process keeps each valid key's answer for
# ACE_API_KEY_CACHE_SECONDS (default 5): a key revoked or deleted here is forgotten at once (`apikeys_forget`,
# also on every save and delete of a key), one revoked on another server stops working within that time.
# Unknown keys are not kept: a new key works at once, and a guessed one costs a query every time.
_CHECKED: dict[str, tuple[float, ApiKey]] = {}
_CHECKED_LIMIT = 10_000
_CHECKED_LOCK = threading.Lock()


def apikeys_forget() -> None:
    """Drop this process's cached key checks (a key was revoked, changed or deleted)."""
    with _CHECKED_LOCK:
        _CHECKED.clear()


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class NewApiKey:
    api_key: ApiKey
    plain_key: str


def tenant_get_or_create(*, name: str) -> Tenant:
    tenant, _ = Tenant.objects.get_or_create(name=name)
    return tenant


@transaction.atomic
def apikey_create(
    *, tenant_name: str, name: str = "", requests_per_minute: int | None = None, tokens_per_minute: int | None = None
) -> NewApiKey:
    tenant = tenant_get_or_create(name=tenant_name)
    prefix = secrets.token_hex(6)
    plain = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=prefix,
        key_hash=_digest(plain),
        requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
    )
    return NewApiKey(api_key=api_key, plain_key=plain)


def apikey_update(*, api_key: ApiKey, fields: list[str]) -> None:
    """Save the given fields of a key (its name, its gateway rate limits): this process forgets its key checks at
    once, so the new limits apply to its next call; other processes within ACE_API_KEY_CACHE_SECONDS."""
    api_key.save(update_fields=fields)
    transaction.on_commit(apikeys_forget)


def apikey_authenticate(*, plain_key: str) -> ApiKey | None:
    """The active key matching `plain_key`, or None. Constant-time comparison of the digest."""
    if not plain_key.startswith(KEY_PREFIX) or plain_key.count("_") < 2:
        return None
    digest = _digest(plain_key)
    checked = _CHECKED.get(digest)
    if checked is not None and checked[0] > time.monotonic():
        api_key = checked[1]
    else:
        api_key = _lookup(plain_key, digest)
        if api_key is None:
            return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


def apikey_cached(*, plain_key: str) -> ApiKey | None:
    """The key this process accepted within the last ACE_API_KEY_CACHE_SECONDS, when nothing about it needs writing
    (its last use is recent): no query, so an event loop may call it. Otherwise None: ask apikey_authenticate."""
    if not plain_key.startswith(KEY_PREFIX):
        return None
    checked = _CHECKED.get(_digest(plain_key))
    if checked is None or checked[0] <= time.monotonic():
        return None
    api_key = checked[1]
    if api_key.last_used_at is None or timezone.now() - api_key.last_used_at > LAST_USED_RESOLUTION:
        return None
    return api_key


def apikey_recently_accepted(*, plain_key: str) -> bool:
    """Whether this process accepted `plain_key` within the last ACE_API_KEY_CACHE_SECONDS (no query)."""
    if not plain_key.startswith(KEY_PREFIX):
        return False
    checked = _CHECKED.get(_digest(plain_key))
    return checked is not None and checked[0] > time.monotonic()


def _lookup(plain_key: str, digest: str) -> ApiKey | None:
    prefix = plain_key[len(KEY_PREFIX) :].split("_", 1)[0]
    api_key = ApiKey.objects.select_related("tenant").filter(prefix=prefix, revoked_at__isnull=True).first()
    if api_key is None or not hmac.compare_digest(api_key.key_hash, digest):
        return None
    seconds = settings.ACE_API_KEY_CACHE_SECONDS
    if seconds > 0:
        with _CHECKED_LOCK:
            if len(_CHECKED) >= _CHECKED_LIMIT:
                _CHECKED.clear()
            _CHECKED[digest] = (time.monotonic() + seconds, api_key)
    return api_key


def apikeys_revoke(*, keys) -> int:
    """Revoke the given keys (a queryset); returns how many were still active."""
    revoked = keys.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
    apikeys_forget()
    return revoked
