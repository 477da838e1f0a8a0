"""The JSON-RPC envelope's rule the SDK does not enforce: a request's `id` is a string or an integer.

The SDK reads a message whose `id` is an object, an array, a boolean, a fraction or null as a notification and
answers nothing, so the client waits forever. JSON-RPC 2.0 says such a message is an Invalid Request (-32600),
answered with `"id": null` (the id could not be read). Both transports check here first (http.py, ace_mcp)."""

from __future__ import annotations

import json

INVALID_REQUEST = -32600
_NO_ID = object()


def _id_problem(message) -> str | None:
    if not isinstance(message, dict):
        return None
    value = message.get("id", _NO_ID)
    if value is _NO_ID:
        return None  # a notification
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    kind = "null" if value is None else type(value).__name__.replace("dict", "object").replace("list", "array")
    return f"Invalid Request: the id must be a string or an integer, not {kind}."


def invalid_request(message: str) -> dict:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}


def envelope_errors(raw: bytes | str) -> list[dict] | None:
    """The errors to answer instead of passing `raw` (one JSON-RPC message or a batch) to the SDK; None when its
    ids are all readable (or it is not JSON at all: the SDK answers that with its parse error)."""
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    messages = parsed if isinstance(parsed, list) else [parsed]
    problems = [_id_problem(message) for message in messages]
    if not any(problems):
        return None
    return [invalid_request(problem) for problem in problems if problem]
