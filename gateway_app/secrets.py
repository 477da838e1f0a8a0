"""Provider API keys, encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256, `cryptography`).

The keys that encrypt them come from `ACE_SECRETS_KEYS`: comma-separated Fernet keys (each 32 url-safe base64
bytes, `python manage.py ace_providers new-key` prints one). The first encrypts; every one of them decrypts, so a
key is rotated by putting a new one first, running `python manage.py ace_providers rotate` (every stored secret
encrypted again with the first key), then dropping the old one. Unset, one key is derived from SECRET_KEY
(HKDF-SHA256): an install that keeps SECRET_KEY keeps its secrets, and one that loses it loses them (they must
be entered again), as with Django's signed cookies.
"""

from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

SETTING = "ACE_SECRETS_KEYS"


class SecretUnreadable(Exception):
    """A stored secret none of the configured keys decrypts (the key that encrypted it was dropped)."""


def _derived_key(secret_key: str) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"open-ace", info=b"provider secrets")
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


@functools.lru_cache(maxsize=4)
def _box(configured: str, secret_key: str) -> MultiFernet:
    keys = [key.strip() for key in configured.split(",") if key.strip()]
    if not keys:
        return MultiFernet([Fernet(_derived_key(secret_key))])
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as error:
        raise ImproperlyConfigured(
            f"{SETTING}: each key must be 32 url-safe base64-encoded bytes "
            "(`python manage.py ace_providers new-key` prints one)."
        ) from error


def box() -> MultiFernet:
    return _box(getattr(settings, SETTING, ""), settings.SECRET_KEY)


def encrypt(plain: str) -> str:
    return box().encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return box().decrypt(token.encode()).decode()
    except InvalidToken as error:
        raise SecretUnreadable(
            f"No key in {SETTING} decrypts this secret: the key that encrypted it was dropped, or SECRET_KEY changed."
        ) from error


def reencrypt(token: str) -> str:
    """The same secret under the first key (rotation)."""
    try:
        return box().rotate(token.encode()).decode()
    except InvalidToken as error:
        raise SecretUnreadable(f"No key in {SETTING} decrypts this secret.") from error


def new_key() -> str:
    return Fernet.generate_key().decode()


def derived_key() -> str:
    """The key derived from SECRET_KEY, which encrypts while ACE_SECRETS_KEYS is unset: listed after a new key when
    ACE_SECRETS_KEYS is set for the first time, it still decrypts what it encrypted until `rotate` has run."""
    return _derived_key(settings.SECRET_KEY).decode()
