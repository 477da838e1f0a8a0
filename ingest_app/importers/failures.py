"""Failed calls: when a call the provider answered with an error is a request (docs/accounting.md "Failed calls").

Every API call counts, failed or not (../shared/seeds/000: each call to the LLM is one Request). A tool writes a
failed call as an error line of its own (Claude Code's `isApiErrorMessage` and `api_error` lines, Qwen Code's
`api_error` telemetry, Gemini CLI's `[API Error: …]` records, Codex's `error` / `stream_error` events, OpenClaw's
`stopReason: "error"`, OpenCode's `APIError`); each parser decides whether a line is such a failure, and this
module decides whether the provider answered it:

- an HTTP status (the log's own field, or a status written in the error text: "API Error: 529 …",
  "429 {…}", "unexpected status 401") says it did;
- so does a text that says the answer had begun ("Connection closed mid-response", "stream disconnected");
- without either, a text that names a connection that failed or timed out before any answer ("Connection
  error.", ECONNRESET, "fetch failed", "Request timed out") says it did not: the call may never have reached
  the provider, and nothing says it was billed;
- any other error text of a line the tool itself marks as an API error (an overload, a rate or usage limit, an
  invalid request, a prompt too long, a stream cut after the answer began) is an answer.

A failed call that was answered becomes an `error` message that is one request (its own `request_id`), of the
model called, with the tokens the line reports (none: zero). One that was not stays an `error` message and no
request. Retries the log does not record are not counted; a line the log repeats (a heartbeat of the same
attempt, a copy in another file) keeps the first line's request id, so it counts once.
"""

from __future__ import annotations

import re
from typing import Any

# A status written in an error text: three digits from 400 to 599 standing alone ("API Error: 529 …",
# "429 {…}", "status: 503"), not part of a longer number or word ("500ms", "1.429").
_STATUS_IN_TEXT = re.compile(r"(?<![\w.])([45]\d\d)(?![\w.])")
# What an error text says when no answer came: the connection failed, was reset or timed out.
_NO_ANSWER = re.compile(
    r"connection error|connection (?:refused|reset|closed|failed|ended|lost)"
    r"|ECONNRESET|ECONNREFUSED|ECONNABORTED|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EPIPE|EHOSTUNREACH|ENETUNREACH"
    r"|socket hang up|fetch failed|network error"
    r"|error sending request|timed out|timeout",
    re.IGNORECASE,
)
# What an error text says when the answer had begun before the failure (a stream cut mid-answer): answered.
_ANSWER_BEGAN = re.compile(r"mid-response|mid-stream|stream disconnected|partial response", re.IGNORECASE)
# The Anthropic API's request id, which Claude Code quotes in an error's text ("request_id":"req_…").
_ANTHROPIC_REQUEST_ID = re.compile(r"\breq_[A-Za-z0-9]{8,}")


def http_status(value: Any) -> int | None:
    """An HTTP error status (400–599) given as a number or a string of digits; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int | float) and 400 <= value <= 599:
        return int(value)
    return None


def status_in_text(text: str | None) -> int | None:
    """The first HTTP error status written in an error text, or None."""
    match = _STATUS_IN_TEXT.search(text or "")
    return int(match.group(1)) if match else None


def provider_answered(status: Any = None, text: str | None = "") -> bool:
    """Whether a failed API call was answered by the provider (so it is a request): an HTTP status, given or in
    the text, else a text that does not say the connection failed or timed out."""
    if http_status(status) is not None or status_in_text(text) is not None or _ANSWER_BEGAN.search(text or ""):
        return True
    return not _NO_ANSWER.search(text or "")


def anthropic_request_id(text: str | None) -> str | None:
    """The `req_…` id an Anthropic error's text quotes, or None."""
    match = _ANTHROPIC_REQUEST_ID.search(text or "")
    return match.group(0) if match else None
