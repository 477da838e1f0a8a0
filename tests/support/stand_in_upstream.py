"""A stand-in for the OpenAI and Anthropic APIs on loopback: what the gateway forwards to in tests and benchmarks.

It answers as the providers do, byte for byte where the official SDKs look (tests/gateway_app/
test_stand_in_upstream.py points the `openai` and `anthropic` SDKs straight at it):

    POST /v1/chat/completions        OpenAI chat completions, JSON or SSE (`stream`, `stream_options.include_usage`)
    POST /v1/messages                Anthropic messages, JSON or SSE (thinking, text and tool_use blocks, pings)
    POST /v1/messages/count_tokens   Anthropic's token count
    GET  /v1/models                  OpenAI's model list, or Anthropic's when the request has `anthropic-version`

Any prefix before those paths is accepted (`/compatible-mode/v1/chat/completions`, as DashScope's base URL has).

**Behaviour per request** ("controls"): `key=value` pairs separated by `;` (or `,`), read from, in increasing
precedence: `StandInUpstream(defaults=...)`, the next string queued with `queue(...)`, the request's model name
after its first `;` (`"gpt-4o-mini;chunks=20;chunk_ms=10"`: the model travels in the body, so it reaches the
upstream through any gateway) and the request header `X-Stand-In` (`X-Stand-In: status=429; retry_after=2`).
An unknown control is a 400 in the provider's error shape, so a typo fails loudly.

    chunks=N          text pieces of the answer (default 5; one output token each). The text is `answer_text(N)`.
    first_ms=MS       delay before the first byte of the body (a stream's first event; a JSON answer's whole body)
    chunk_ms=MS       delay between paced events (text, thinking/reasoning and tool-argument pieces); a JSON answer
                      waits for the whole stream's duration, first_ms + chunk_ms × (events - 1)
    status=CODE       answer CODE with the provider's own error body (401, 403, 404, 429, 500, 503, 529, ...)
    retry_after=S     the `retry-after` header of that error (default 1 for 429 and 529, else none)
    break_after=N     drop the connection after N paced events (a JSON answer: after half its body)
    error_after=N     after N paced events, an error event in the stream (OpenAI `data: {"error": ...}`, Anthropic
                      `event: error` overloaded_error), then the end of the body
    malformed_after=N after N paced events, an event whose JSON is cut short; the stream then goes on
    hold_after=N      after N paced events, wait until `release()` (or POST /_stand_in/release) before going on
    tool_call=1       the answer ends with a call of the request's first tool (else `lookup`), `{"query": "stand-in"}`
    reasoning=N       reasoning pieces: Anthropic thinking deltas (when the request enables thinking; default 3
                      then), OpenAI `reasoning_content` deltas as DeepSeek and Qwen send them (default 0)
    cache_read=N      cached prompt tokens (OpenAI `prompt_tokens_details.cached_tokens`, Anthropic
                      `cache_read_input_tokens`)
    cache_write=N     Anthropic 5-minute cache writes;  cache_write_1h=N: 1-hour cache writes
    delta_usage=full  Anthropic `message_delta` usage carries the input and cache counts too (default: output only)

**Usage is derived from the request** so tests can assert it: `prompt_words(body)` is P, the number of
whitespace-separated words in the prompt's texts (messages' string contents and their parts' `text`,
Anthropic's `system`; at least 1). OpenAI: prompt_tokens = P + cache_read, cached_tokens = cache_read,
completion_tokens = text chunks + reasoning pieces + (1 for a tool call), reasoning_tokens = reasoning pieces.
Anthropic: input_tokens = P, cache_read_input_tokens = cache_read, cache_creation_input_tokens = cache_write +
cache_write_1h, output_tokens = text chunks + thinking pieces + (1 for a tool call). A `max_tokens` (or
`max_completion_tokens`) below `chunks` cuts the text there, with finish reason `length` / `max_tokens`.
Each answer's usage is kept with its request (`Received.usage`).

Every request is kept (`received`: method, path, headers, body, parsed JSON, controls, what was answered and
how the answer ended), in order. With `api_key` set, a request without that key (OpenAI `Authorization: Bearer`,
Anthropic `x-api-key` or Bearer) gets the provider's 401. Anthropic requests without `anthropic-version` get
its 400, as the real API answers.

In tests, a context manager serving from a thread with its own event loop:

    with StandInUpstream() as upstream:
        OpenAI(base_url=upstream.openai_base_url, api_key="sk-test") ...
        upstream.received[-1].json

For a benchmark, its own process (`python -m tests.support.stand_in_upstream --port N [--defaults "chunks=20"]`),
whose log is read over HTTP: `GET /_stand_in/received?last=N`, `POST /_stand_in/reset`, `POST /_stand_in/release`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import socket
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

CONTROL_HEADER = "x-stand-in"
DEFAULT_CHUNKS = 5
DEFAULT_THINKING = 3
TOOL_ARGUMENTS = ('{"query": ', '"stand-in"}')  # streamed in two pieces; one output token in all
TOOL_INPUT = {"query": "stand-in"}
FINGERPRINT = "fp_stand_in"
SIGNATURE = "c3RhbmQtaW4gc2lnbmF0dXJlIG9mIHRoZSB0aGlua2luZyBibG9jaw=="
# The answer's words, cycled: some of them multi-byte in UTF-8 (a relay must not split them).
WORDS = ("Stand-in", "answer", "from", "the", "upstream:", "园林", "in", "苏州", "and", "a", "smile", "🙂")
MODELS = {
    "openai": ("gpt-4o-mini", "gpt-4.1", "o4-mini"),
    "anthropic": (
        ("claude-sonnet-4-5", "Claude Sonnet 4.5", "2025-09-29T00:00:00Z"),
        ("claude-opus-4-1", "Claude Opus 4.1", "2025-08-05T00:00:00Z"),
        ("claude-haiku-4-5", "Claude Haiku 4.5", "2025-10-01T00:00:00Z"),
    ),
}


def text_pieces(chunks: int) -> list[str]:
    """The answer's text as the stream sends it: piece i is the i-th word (after a space but the first)."""
    return [WORDS[i % len(WORDS)] if i == 0 else " " + WORDS[i % len(WORDS)] for i in range(chunks)]


def answer_text(chunks: int = DEFAULT_CHUNKS) -> str:
    """The whole answer of `chunks` pieces, as a client should end up with it."""
    return "".join(text_pieces(chunks))


def thinking_pieces(count: int) -> list[str]:
    return [f"Step {i + 1} of thinking it over. " for i in range(count)]


def thinking_text(count: int = DEFAULT_THINKING) -> str:
    return "".join(thinking_pieces(count))


def prompt_words(body: dict) -> int:
    """P: words in the prompt's texts (see the module's docstring), at least 1."""

    def words(value, key: str = "") -> int:
        if isinstance(value, str):
            return len(value.split()) if key in ("content", "text", "system") else 0
        if isinstance(value, list):
            return sum(words(item, key) for item in value)
        if isinstance(value, dict):
            return sum(words(item, name) for name, item in value.items() if name in ("content", "text"))
        return 0

    total = words(body.get("messages") or [], "") + words(body.get("system") or "", "system")
    return max(1, total)


# -- controls ---------------------------------------------------------------------------------------------
@dataclass
class Controls:
    chunks: int = DEFAULT_CHUNKS
    first_ms: float = 0.0
    chunk_ms: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    break_after: int | None = None
    error_after: int | None = None
    malformed_after: int | None = None
    hold_after: int | None = None
    tool_call: bool = False
    reasoning: int | None = None
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    delta_usage: str = "output"


CONTROL_TYPES = {name: f.type for name, f in Controls.__dataclass_fields__.items()}


class ControlError(ValueError):
    pass


def parse_controls(text: str) -> dict[str, Any]:
    """`"chunks=3; first_ms=50"` → {"chunks": 3, "first_ms": 50.0}; '-' in a name reads as '_'."""
    out: dict[str, Any] = {}
    for part in text.replace(",", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        name, _, value = part.partition("=")
        name, value = name.strip().replace("-", "_").lower(), value.strip()
        kind = CONTROL_TYPES.get(name)
        if kind is None:
            raise ControlError(f"stand-in: unknown control {name!r} (known: {', '.join(CONTROL_TYPES)})")
        try:
            if "bool" in kind:
                out[name] = value.lower() in ("", "1", "true", "yes", "on")
            elif "float" in kind:
                out[name] = float(value)
            elif "int" in kind:
                out[name] = int(value)
            else:
                out[name] = value
        except ValueError:
            raise ControlError(f"stand-in: control {name!r} takes a number, not {value!r}") from None
    return out


# -- what was received --------------------------------------------------------------------------------------
@dataclass
class Received:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any  # the parsed body, None when it is not JSON
    controls: dict[str, Any] = field(default_factory=dict)  # the controls that applied (defaults included)
    status: int = 0  # what was answered
    stream: bool = False
    usage: dict[str, int] = field(default_factory=dict)  # the usage the answer reported (provider's field names)
    # complete | dropped (break_after) | error_event | client_disconnected | error_status
    outcome: str = ""
    at: float = field(default_factory=time.time)

    def as_json(self) -> dict:
        data = asdict(self)
        data["body"] = self.body.decode("utf-8", "replace")
        return data


class DropConnection(Exception):
    """Raised inside the app to make uvicorn close the connection mid-answer (its way to drop one)."""


class _QuietDrop(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DropConnection)


logging.getLogger("uvicorn.error").addFilter(_QuietDrop())


# -- answers ------------------------------------------------------------------------------------------------
HOLD = object()
BREAK = object()


@dataclass
class Step:
    at: float  # seconds after the answer started
    data: bytes | object  # bytes, HOLD or BREAK


def _json(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


OPENAI_ERRORS = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
    ),
    403: (
        "invalid_request_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached on requests per min (RPM). Please try again in 1s."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    529: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error"),
    503: ("api_error", "Service unavailable"),
    529: ("overloaded_error", "Overloaded"),
}


def error_body(kind: str, status: int, message: str | None = None, *, param: str | None = None) -> dict:
    if kind == "openai":
        error_type, code, default = OPENAI_ERRORS.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", None, "Error.")
        )
        return {"error": {"message": message or default, "type": error_type, "param": param, "code": code}}
    error_type, default = ANTHROPIC_ERRORS.get(
        status, ("api_error" if status >= 500 else "invalid_request_error", "Error.")
    )
    return {"type": "error", "error": {"type": error_type, "message": message or default}, "request_id": "req_stand_in"}


def error_response(kind: str, status: int, message: str | None = None, *, retry_after: float | None = None, **kw):
    headers = {}
    if retry_after is None and status in (429, 529):
        retry_after = 1
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if kind == "anthropic" and status != 200:
        headers["x-should-retry"] = "true" if status in (408, 409, 429) or status >= 500 else "false"
    return JSONResponse(error_body(kind, status, message, **kw), status_code=status, headers=headers)


class Paced(Response):
    """An answer sent step by step on a schedule: the body is written as each step's time comes (measured from the
    start of the answer, so delays do not add up under load), and a client that goes away ends it."""

    def __init__(
        self,
        steps: list[Step],
        *,
        media_type: str,
        record: Received,
        upstream: StandInUpstream,
        headers: dict | None = None,
        content_length: int | None = None,
    ):
        self.steps = steps
        self.record = record
        self.upstream = upstream
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)
        if content_length is not None:
            self.headers["content-length"] = str(content_length)

    async def __call__(self, scope, receive, send) -> None:
        gone = asyncio.Event()

        async def watch():
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return

        watcher = asyncio.create_task(watch())
        start = time.monotonic()
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            for step in self.steps:
                wait = start + step.at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if gone.is_set():
                    self.record.outcome = "client_disconnected"
                    return
                if step.data is HOLD:
                    await self.upstream._held(gone)
                    continue
                if step.data is BREAK:
                    self.record.outcome = "dropped"
                    raise DropConnection()
                await send({"type": "http.response.body", "body": step.data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            if not self.record.outcome:
                self.record.outcome = "client_disconnected" if gone.is_set() else "complete"
        finally:
            watcher.cancel()


def _events_schedule(c: Controls, count: int) -> list[float]:
    """When each of `count` paced events is due: first_ms, then chunk_ms apart."""
    return [(c.first_ms + i * c.chunk_ms) / 1000 for i in range(count)]


def _with_interruptions(
    c: Controls, paced: list[tuple[float, bytes]], tail: list[bytes], *, error: bytes, malformed: bytes
) -> list[Step]:
    """The paced events, then the tail at the last event's time, with the controls' breaks, errors and holds."""
    steps: list[Step] = []
    last = c.first_ms / 1000
    for i, (at, data) in enumerate(paced):
        if i == c.hold_after:
            steps.append(Step(at, HOLD))
        if i == c.break_after:
            steps.append(Step(at, BREAK))
            return steps
        if i == c.error_after:
            steps.append(Step(at, error))
            return steps
        if i == c.malformed_after:
            steps.append(Step(at, malformed))
        steps.append(Step(at, data))
        last = at
    n = len(paced)
    if c.hold_after is not None and c.hold_after >= n:
        steps.append(Step(last, HOLD))
    if c.break_after is not None and c.break_after >= n:
        steps.append(Step(last, BREAK))
        return steps
    if c.error_after is not None and c.error_after >= n:
        steps.append(Step(last, error))
        return steps
    if c.malformed_after is not None and c.malformed_after >= n:
        steps.append(Step(last, malformed))
    steps.extend(Step(last, data) for data in tail)
    return steps


def _first_tool_name(body: dict, kind: str) -> str:
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        name = tool.get("function", {}).get("name") if kind == "openai" else tool.get("name")
        if isinstance(name, str) and name:
            return name
    return "lookup"


def _max_tokens(body: dict, kind: str) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens")) if kind == "openai" else body.get("max_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass
class Plan:
    """What one answer holds, decided from the request and the controls."""

    text: list[str]
    reasoning: list[str]
    tool_name: str | None
    truncated: bool
    prompt: int


def _plan(body: dict, c: Controls, kind: str) -> Plan:
    chunks = max(0, c.chunks)
    limit = _max_tokens(body, kind)
    truncated = limit is not None and limit < chunks
    if truncated:
        chunks = limit
    if kind == "anthropic":
        thinking = body.get("thinking")
        enabled = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
        reasoning = (DEFAULT_THINKING if c.reasoning is None else c.reasoning) if enabled else 0
    else:
        reasoning = c.reasoning or 0
    return Plan(
        text=text_pieces(chunks),
        reasoning=thinking_pieces(reasoning),
        tool_name=_first_tool_name(body, kind) if c.tool_call and not truncated else None,
        truncated=truncated,
        prompt=prompt_words(body),
    )


# OpenAI ------------------------------------------------------------------------------------------------------
def openai_usage(plan: Plan, c: Controls) -> dict:
    completion = len(plan.text) + len(plan.reasoning) + (1 if plan.tool_name else 0)
    prompt = plan.prompt + c.cache_read
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": c.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": len(plan.reasoning),
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def openai_finish(plan: Plan) -> str:
    return "length" if plan.truncated else "tool_calls" if plan.tool_name else "stop"


def openai_completion(body: dict, plan: Plan, c: Controls, number: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(plan.text), "refusal": None, "annotations": []}
    if plan.reasoning:
        message["reasoning_content"] = "".join(plan.reasoning)
    if plan.tool_name:
        message["tool_calls"] = [
            {
                "id": f"call_standin{number:06d}",
                "type": "function",
                "function": {"name": plan.tool_name, "arguments": "".join(TOOL_ARGUMENTS)},
            }
        ]
    return {
        "id": f"chatcmpl-standin{number:06d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": openai_finish(plan)}],
        "usage": openai_usage(plan, c),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }


def openai_stream(body: dict, plan: Plan, c: Controls, number: int) -> list[Step]:
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    head = {
        "id": f"chatcmpl-standin{number:06d}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body["model"],
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        data = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            data["usage"] = None
        return b"data: " + _json(data) + b"\n\n"

    deltas: list[dict] = [{"reasoning_content": piece} for piece in plan.reasoning]
    deltas += [{"content": piece} for piece in plan.text]
    if plan.tool_name:
        call_id = f"call_standin{number:06d}"
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": plan.tool_name, "arguments": TOOL_ARGUMENTS[0]},
                    }
                ]
            }
        )
        deltas.append({"tool_calls": [{"index": 0, "function": {"arguments": TOOL_ARGUMENTS[1]}}]})
    times = _events_schedule(c, len(deltas))
    paced: list[tuple[float, bytes]] = []
    for i, (at, delta) in enumerate(zip(times, deltas, strict=True)):
        if i == 0:  # the first chunk names the role, as OpenAI's does
            delta = {"role": "assistant", "content": "", "refusal": None, **delta}
            if "content" in delta and delta["content"] == "" and "tool_calls" in delta:
                delta["content"] = None
        paced.append((at, chunk(delta)))
    tail = []
    if not deltas:
        tail.append(chunk({"role": "assistant", "content": "", "refusal": None}))
    tail.append(chunk({}, openai_finish(plan)))
    if include_usage:
        tail.append(b"data: " + _json({**head, "choices": [], "usage": openai_usage(plan, c)}) + b"\n\n")
    tail.append(b"data: [DONE]\n\n")
    error = b"data: " + _json(error_body("openai", 500)) + b"\n\n"
    malformed = b'data: {"id":"' + head["id"].encode() + b'","object":"chat.completion.chunk","choices":[{"ind\n\n'
    return _with_interruptions(c, paced, tail, error=error, malformed=malformed)


# Anthropic ---------------------------------------------------------------------------------------------------
def anthropic_usage(plan: Plan, c: Controls) -> dict:
    return {
        "input_tokens": plan.prompt,
        "cache_creation_input_tokens": c.cache_write + c.cache_write_1h,
        "cache_read_input_tokens": c.cache_read,
        "cache_creation": {"ephemeral_5m_input_tokens": c.cache_write, "ephemeral_1h_input_tokens": c.cache_write_1h},
        "output_tokens": len(plan.text) + len(plan.reasoning) + (1 if plan.tool_name else 0),
        "service_tier": "standard",
    }


def anthropic_stop(plan: Plan) -> str:
    return "max_tokens" if plan.truncated else "tool_use" if plan.tool_name else "end_turn"


def anthropic_message(body: dict, plan: Plan, c: Controls, number: int) -> dict:
    content: list[dict] = []
    if plan.reasoning:
        content.append({"type": "thinking", "thinking": "".join(plan.reasoning), "signature": SIGNATURE})
    if plan.text or not plan.tool_name:
        content.append({"type": "text", "text": "".join(plan.text)})
    if plan.tool_name:
        content.append(
            {"type": "tool_use", "id": f"toolu_standin{number:06d}", "name": plan.tool_name, "input": TOOL_INPUT}
        )
    return {
        "id": f"msg_standin{number:06d}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": anthropic_stop(plan),
        "stop_sequence": None,
        "usage": anthropic_usage(plan, c),
    }


def anthropic_stream(body: dict, plan: Plan, c: Controls, number: int) -> list[Step]:
    def event(data: dict) -> bytes:
        return b"event: " + data["type"].encode() + b"\ndata: " + _json(data) + b"\n\n"

    usage = anthropic_usage(plan, c)
    start_usage = {**usage, "output_tokens": 1}
    message = anthropic_message(body, plan, c, number)
    start = event(
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None, "usage": start_usage}}
    )
    ping = event({"type": "ping"})
    # (leading events sent with the next paced one, paced event) — blocks open and close around their deltas
    paced: list[tuple[list[bytes], bytes]] = []
    index = 0
    leading: list[bytes] = [start]

    def block(opening: dict, deltas: list[dict], closing_deltas: list[dict] = ()):
        nonlocal index, leading
        leading.append(event({"type": "content_block_start", "index": index, "content_block": opening}))
        if index == 0:
            leading.append(ping)
        for delta in deltas:
            paced.append((leading, event({"type": "content_block_delta", "index": index, "delta": delta})))
            leading = []
        for delta in closing_deltas:
            leading.append(event({"type": "content_block_delta", "index": index, "delta": delta}))
        leading.append(event({"type": "content_block_stop", "index": index}))
        index += 1

    if plan.reasoning:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [{"type": "thinking_delta", "thinking": piece} for piece in plan.reasoning],
            [{"type": "signature_delta", "signature": SIGNATURE}],
        )
    if plan.text or not plan.tool_name:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": piece} for piece in plan.text])
    if plan.tool_name:
        block(
            {"type": "tool_use", "id": f"toolu_standin{number:06d}", "name": plan.tool_name, "input": {}},
            [{"type": "input_json_delta", "partial_json": piece} for piece in TOOL_ARGUMENTS],
        )
    delta_usage = {"output_tokens": usage["output_tokens"]}
    if c.delta_usage == "full":
        delta_usage = {
            key: usage[key]
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        }
    tail = [
        *leading,
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": anthropic_stop(plan), "stop_sequence": None},
                "usage": delta_usage,
            }
        ),
        event({"type": "message_stop"}),
    ]
    times = _events_schedule(c, len(paced))
    paced_bytes = [(at, b"".join(lead) + data) for at, (lead, data) in zip(times, paced, strict=True)]
    if not paced_bytes:  # nothing paced: the whole stream at first_ms
        paced_bytes, tail = [(c.first_ms / 1000, b"".join(tail))], []
    error = event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    malformed = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"ty\n\n'
    return _with_interruptions(c, paced_bytes, tail, error=error, malformed=malformed)


# -- the server -----------------------------------------------------------------------------------------------
class StandInUpstream:
    """The stand-in, serving on `host` (loopback) from `start()` until `stop()`; a context manager."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        defaults: str | dict | None = None,
        max_kept: int | None = None,
    ):
        self.host = host
        self.api_key = api_key
        self.defaults: dict[str, Any] = parse_controls(defaults) if isinstance(defaults, str) else dict(defaults or {})
        self._queued: deque[str] = deque()
        self._received: deque[Received] = deque(maxlen=max_kept)
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._release: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://{host if ':' not in host else f'[{host}]'}:{self.port}"
        self.openai_base_url = f"{self.url}/v1"  # as the OpenAI SDK takes it
        self.anthropic_base_url = self.url  # as the Anthropic SDK takes it
        self.app = Starlette(
            routes=[
                Route("/_stand_in/received", self._http_received, methods=["GET"]),
                Route("/_stand_in/reset", self._http_reset, methods=["POST"]),
                Route("/_stand_in/release", self._http_release, methods=["POST"]),
                Route("/{path:path}", self._dispatch, methods=["GET", "POST"]),
            ]
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- for tests ----------------------------------------------------------------------------------------
    @property
    def received(self) -> list[Received]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return list(self._received)

    @property
    def last(self) -> Received:
        with self._lock:
            return self._received[-1]

    def clear(self) -> None:
        with self._lock:
            self._received.clear()
            self._queued.clear()

    def queue(self, *controls: str) -> None:
        """Controls for the next requests, one string each, in order (e.g. "status=500", "": fail once, then answer)."""
        for text in controls:
            parse_controls(text)  # fails now on a typo
        with self._lock:
            self._queued.extend(controls)

    def release(self) -> None:
        """Let the answers waiting at `hold_after` go on (and any later one pass its hold at once)."""
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    async def _held(self, gone: asyncio.Event) -> None:
        while not (self._release.is_set() or gone.is_set()):
            await asyncio.sleep(0.005)

    def wait_for_requests(self, count: int, seconds: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + seconds
        while len(received := self.received) < count:
            assert time.monotonic() < deadline, f"the stand-in got {len(received)} requests, not {count}"
            time.sleep(0.01)
        return received

    # -- serving --------------------------------------------------------------------------------------------
    def _config(self, loop: str) -> uvicorn.Config:
        return uvicorn.Config(
            self.app,
            loop=loop,
            http="httptools",
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
            backlog=4096,
            log_level="warning",
        )

    def start(self) -> StandInUpstream:
        self._server = uvicorn.Server(self._config("uvloop"))
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            daemon=True,
            name=f"stand-in upstream :{self.port}",
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the stand-in upstream did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            self.release()
            if self._thread is not None:
                self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> StandInUpstream:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """In this (main) thread until SIGINT or SIGTERM: the process mode."""
        self._server = uvicorn.Server(self._config("uvloop"))
        self._server.run(sockets=[self._socket])

    # -- the app ------------------------------------------------------------------------------------------------
    def _loop_state(self) -> None:
        if self._release is None:
            self._loop = asyncio.get_running_loop()
            self._release = asyncio.Event()

    async def _http_received(self, request: Request) -> Response:
        received = self.received
        last = request.query_params.get("last")
        if last:
            received = received[-int(last) :]
        return JSONResponse([r.as_json() for r in received])

    async def _http_reset(self, request: Request) -> Response:
        self.clear()
        return JSONResponse({"reset": True})

    async def _http_release(self, request: Request) -> Response:
        self._loop_state()
        self._release.set()
        return JSONResponse({"released": True})

    async def _dispatch(self, request: Request) -> Response:
        self._loop_state()
        path = "/" + request.path_params["path"]
        body = await request.body()
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        record = Received(
            request.method, path, request.url.query, {k.lower(): v for k, v in request.headers.items()}, body, parsed
        )
        with self._lock:
            self._received.append(record)
            queued = self._queued.popleft() if self._queued else ""
        if request.method == "GET":
            if path.endswith("/v1/models"):
                return self._models(record)
            return self._finish(record, error_response("openai", 404, f"Unknown request URL: GET {path}."))
        if path.endswith("/chat/completions"):
            return self._answer("openai", record, queued)
        if path.endswith("/v1/messages/count_tokens"):
            return self._count_tokens(record)
        if path.endswith("/v1/messages"):
            return self._answer("anthropic", record, queued)
        return self._finish(record, error_response("openai", 404, f"Unknown request URL: POST {path}."))

    def _finish(self, record: Received, response: Response, outcome: str = "") -> Response:
        record.status = response.status_code
        record.outcome = outcome or ("complete" if response.status_code < 400 else "error_status")
        return response

    def _authorized(self, kind: str, headers: dict[str, str]) -> bool:
        if self.api_key is None:
            return True
        bearer = headers.get("authorization", "")
        if bearer == f"Bearer {self.api_key}":
            return True
        return kind == "anthropic" and headers.get("x-api-key") == self.api_key

    def _models(self, record: Received) -> Response:
        if "anthropic-version" in record.headers:
            data = [
                {"type": "model", "id": i, "display_name": name, "created_at": at, "lifecycle": "active"}
                for i, name, at in MODELS["anthropic"]
            ]
            body = {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
        else:
            body = {
                "object": "list",
                "data": [
                    {"id": i, "object": "model", "created": 1_715_367_049, "owned_by": "stand-in"}
                    for i in MODELS["openai"]
                ],
            }
        return self._finish(record, JSONResponse(body))

    def _count_tokens(self, record: Received) -> Response:
        if not self._authorized("anthropic", record.headers):
            return self._finish(record, error_response("anthropic", 401))
        if "anthropic-version" not in record.headers:
            return self._finish(record, error_response("anthropic", 400, "anthropic-version: header is required"))
        body = record.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._finish(record, error_response("anthropic", 400, "messages: Field required"))
        tools = sum(len(json.dumps(tool).split()) for tool in body.get("tools") or [])
        return self._finish(record, JSONResponse({"input_tokens": prompt_words(body) + tools}))

    def _answer(self, kind: str, record: Received, queued: str) -> Response:
        body = record.json
        if not self._authorized(kind, record.headers):
            return self._finish(record, error_response(kind, 401))
        if kind == "anthropic" and "anthropic-version" not in record.headers:
            return self._finish(record, error_response(kind, 400, "anthropic-version: header is required"))
        if not isinstance(body, dict):
            message = "We could not parse the JSON body of your request." if kind == "openai" else "invalid JSON body"
            return self._finish(record, error_response(kind, 400, message))
        required = ("model", "messages", "max_tokens") if kind == "anthropic" else ("model", "messages")
        for name in required:
            if name not in body:
                message = f"Missing required parameter: '{name}'." if kind == "openai" else f"{name}: Field required"
                return self._finish(
                    record, error_response(kind, 400, message, **({"param": name} if kind == "openai" else {}))
                )
        if not isinstance(body["model"], str) or not isinstance(body["messages"], list):
            return self._finish(record, error_response(kind, 400, "model must be a string, messages a list"))
        try:
            controls = {
                **self.defaults,
                **parse_controls(queued),
                **parse_controls(body["model"].partition(";")[2]),
                **parse_controls(record.headers.get(CONTROL_HEADER, "")),
            }
        except ControlError as error:
            return self._finish(record, error_response(kind, 400, str(error)))
        record.controls = controls
        c = Controls(**controls)
        if c.status is not None and c.status != 200:
            return self._finish(record, error_response(kind, c.status, retry_after=c.retry_after))
        number = next(self._numbers)
        plan = _plan(body, c, kind)
        record.stream = body.get("stream") is True
        record.status = 200
        headers = (
            {"x-request-id": f"req_standin{number:06d}"}
            if kind == "openai"
            else {"request-id": f"req_standin{number:06d}", "anthropic-organization-id": "stand-in"}
        )
        if record.stream:
            record.usage = openai_usage(plan, c) if kind == "openai" else anthropic_usage(plan, c)
            steps = (
                openai_stream(body, plan, c, number) if kind == "openai" else anthropic_stream(body, plan, c, number)
            )
            for step in steps:
                if isinstance(step.data, bytes) and (
                    step.data.startswith(b"event: error") or b'data: {"error"' in step.data
                ):
                    record.outcome = "error_event"
            return Paced(
                steps,
                media_type="text/event-stream; charset=utf-8",
                record=record,
                upstream=self,
                headers={**headers, "cache-control": "no-cache"},
            )
        answer = (
            openai_completion(body, plan, c, number) if kind == "openai" else anthropic_message(body, plan, c, number)
        )
        record.usage = answer["usage"]
        payload = _json(answer)
        events = len(plan.text) + len(plan.reasoning) + (len(TOOL_ARGUMENTS) if plan.tool_name else 0)
        at = (c.first_ms + max(0, events - 1) * c.chunk_ms) / 1000
        steps = [Step(at, payload)]
        if c.hold_after is not None:
            steps.insert(0, Step(at, HOLD))
        if c.break_after is not None:
            steps = [Step(at, payload[: len(payload) // 2]), Step(at, BREAK)]
        return Paced(
            steps,
            media_type="application/json",
            record=record,
            upstream=self,
            headers=headers,
            content_length=len(payload),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="The OpenAI/Anthropic stand-in upstream, in its own process.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    parser.add_argument("--api-key", default=None, help="answer 401 to requests without this key")
    parser.add_argument("--defaults", default="", help='controls for every request, e.g. "chunks=20;chunk_ms=10"')
    parser.add_argument("--max-kept", type=int, default=10_000, help="requests kept for /_stand_in/received")
    args = parser.parse_args()
    upstream = StandInUpstream(
        host=args.host, port=args.port, api_key=args.api_key, defaults=args.defaults, max_kept=args.max_kept
    )
    print(f"stand-in upstream on {upstream.url}", flush=True)
    upstream.serve_forever()


if __name__ == "__main__":
    main()
