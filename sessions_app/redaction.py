"""Secrets never reach the database: values under secret-looking keys are replaced before storing.

Tool calls carry whatever the model and the tools exchanged, which includes credentials often enough
(an HTTP tool's `Authorization` header, a database tool's `password`). Keys are matched by name, at any
depth; a string that holds a JSON object or array is parsed, redacted and written back as JSON.
"""

from __future__ import annotations

import json
import re

REDACTED = "[REDACTED]"
_SECRET_KEYS = {
    "apikey",
    "api_key",
    "x_api_key",
    "authorization",
    "proxy_authorization",
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "bearer",
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "private_key",
    "cookie",
    "set_cookie",
}
_SECRET_SUFFIXES = ("_token", "_secret", "_password", "_api_key", "_apikey")


def is_secret_key(key: str) -> bool:
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(key))  # refreshToken -> refresh_Token
    name = re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")
    return name in _SECRET_KEYS or name.endswith(_SECRET_SUFFIXES)


def redact_secrets(value):
    """A copy of `value` with every value under a secret-looking key replaced by "[REDACTED]"."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact_secrets(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_secrets(item) for item in value]
    if isinstance(value, str) and value[:1] in "{[":
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        redacted = redact_secrets(parsed)
        return value if redacted == parsed else json.dumps(redacted, ensure_ascii=False)
    return value
