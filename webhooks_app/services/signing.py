"""The signature every delivery carries, and how a receiver checks it (docs/webhooks.md shows the same code).

`X-ACE-Signature: v1=<hex HMAC-SHA256 of "<X-ACE-Timestamp>.<raw body>" keyed with the webhook's secret>`.
Signing the timestamp with the body lets a receiver refuse a replay of an old delivery.
"""

import hashlib
import hmac
import secrets
import time

SCHEME = "v1"
SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_SECONDS = 300


def secret_generate() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The X-ACE-Signature header's value for `body` sent at `timestamp` (unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"{SCHEME}={digest}"


def signature_verify(
    *, secret: str, body: bytes, timestamp: str, header: str, tolerance: int = DEFAULT_TOLERANCE_SECONDS, now=None
) -> bool:
    """What a receiver does: the timestamp is recent (within `tolerance` seconds either way) and one of the
    header's signatures (several while a secret is being changed, space-separated) matches the body."""
    try:
        sent = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance:
        return False
    expected = signature(secret=secret, timestamp=sent, body=body)
    return any(hmac.compare_digest(expected, candidate) for candidate in header.split())
