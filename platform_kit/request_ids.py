"""Request ids: every HTTP request (and every MCP tool call over stdio) has one, so that the line a user or a model
quotes from an error ("request id 3f9c…") finds the server's log lines and traceback.

A client may send its own in `X-Request-ID` (letters, digits and `._:-`, at most 64 characters); otherwise one
is made. The response carries it back in `X-Request-ID` (platform_kit.middleware.RequestIdMiddleware).
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

HEADER = "X-Request-ID"
_ACCEPTED = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_current: ContextVar[str | None] = ContextVar("ace_request_id", default=None)


def request_id_new(sent: str | None = None) -> str:
    """The client's id when it is a sensible one, else a new one (32 hex digits)."""
    if sent and _ACCEPTED.match(sent):
        return sent
    return uuid.uuid4().hex


def request_id() -> str | None:
    """The id of the request (or tool call) this code runs for, if any."""
    return _current.get()


@contextlib.contextmanager
def request_id_bound(value: str) -> Iterator[str]:
    """Code inside runs for the request `value` (its log lines, its errors name it)."""
    token = _current.set(value)
    try:
        yield value
    finally:
        _current.reset(token)


class RequestIdFilter(logging.Filter):
    """Adds " [request id …]" to the messages of a logger (Django's `django.request`, which logs a server
    error's traceback) while a request id is bound; every record gets a `request_id` attribute for formatters."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = _current.get()
        record.request_id = current or "-"
        if current and not getattr(record, "_request_id_added", False):
            record.msg = f"{record.msg} [request id {current}]"
            record._request_id_added = True
        return True
