"""The two APIs the gateway speaks, each in its own words: what a call asks (the new user input, the system prompt,
the tools), how its answer is read as it streams (text, thinking, tool calls, usage, the stop reason), and how an
error is shaped. OpenAI's Chat Completions (and every OpenAI-compatible vendor: DeepSeek, Qwen/DashScope, Kimi,
GLM, MiniMax, vLLM, Ollama) and Anthropic's Messages.

Nothing here changes what is forwarded except where the docs say (docs/gateway.md, "What is forwarded"): the
memory block added to the system prompt (X-ACE-Memory: inject), and for a streamed OpenAI call the request for the
final usage chunk (`stream_options.include_usage`), which the client does not see unless it asked for it.

The token counts follow docs/accounting.md: `input_tokens` never holds the cached input (OpenAI counts it inside
`prompt_tokens`: it is taken out), `output_tokens` holds the reasoning, cache writes are kept by lifetime.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field

from sessions_app.schema import MAX_TOKENS

MAX_TEXT = 1_000_000  # the most characters kept of one answer's text or thinking (the rest is counted, not kept)


class BadCall(ValueError):
    """The call cannot be read (not JSON, no model, no messages): a 400 in the provider's shape, nothing forwarded."""


def _int(value) -> int:
    """A count from the upstream: an int within the ledger's bounds, or 0 (a bool, a float, a string are not)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(0, min(value, MAX_TOKENS))


def _text_of(content) -> str:
    """The text of a message's content: a string, or the text of its parts/blocks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            if part.get("type") in ("text", "input_text") and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "tool_result":
                inner = _text_of(part.get("content"))
                texts.append(f"[tool result {part.get('tool_use_id', '')}]\n{inner}".rstrip())
    return "\n".join(texts)


def _data_reference(data: str, media_type: str) -> dict:
    """An inline (base64) file, described rather than stored: its type, size and digest."""
    try:
        raw = base64.b64decode(data, validate=False)
    except (ValueError, TypeError):
        raw = data.encode("utf-8", "replace")
    return {"media_type": media_type, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _attachments_of(content) -> list[dict]:
    if not isinstance(content, list):
        return []
    found = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "image_url":  # OpenAI
            url = (part.get("image_url") or {}).get("url") if isinstance(part.get("image_url"), dict) else None
            if isinstance(url, str) and url.startswith("data:"):
                header, _, data = url.partition(",")
                found.append({"type": "image", **_data_reference(data, header[5:].split(";")[0])})
            elif isinstance(url, str):
                found.append({"type": "image", "url": url[:2000]})
        elif kind in ("image", "document"):  # Anthropic
            source = part.get("source") if isinstance(part.get("source"), dict) else {}
            if source.get("type") == "base64" and isinstance(source.get("data"), str):
                found.append({"type": kind, **_data_reference(source["data"], str(source.get("media_type", ""))[:100])})
            elif isinstance(source.get("url"), str):
                found.append({"type": kind, "url": source["url"][:2000]})
        elif kind in ("input_audio", "file"):
            found.append({"type": kind})
    return found


def _new_input(messages: list, assistant_role: str = "assistant") -> list:
    """The messages after the last answer: what this call adds to the conversation."""
    last = max(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == assistant_role), default=-1
    )
    # System messages among them (Claude Code puts one after the user's) are the system prompt's, not the input.
    return [m for m in messages[last + 1 :] if isinstance(m, dict) and m.get("role") not in ("system", "developer")]


@dataclass
class Call:
    """What a call asks, as the turn records it."""

    model: str
    stream: bool
    content: str  # the new user input
    attachments: list = field(default_factory=list)
    system_prompt: str = ""
    tool_names: list = field(default_factory=list)
    tool_schema: list | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    user: str = ""  # the body's own user id (OpenAI `user`, Anthropic `metadata.user_id`)
    client_wants_usage: bool = True  # OpenAI streams: whether the client asked for the usage chunk


@dataclass
class Answer:
    """An answer as it arrives; `usage` holds the ledger's measure names."""

    model: str = ""
    content: list = field(default_factory=list)
    thinking: list = field(default_factory=list)
    tool_calls: dict = field(default_factory=dict)  # index → {"id", "name", "arguments"}
    stop_reason: str = ""
    usage: dict = field(default_factory=dict)
    upstream_id: str = ""
    chunks: int = 0
    size: int = 0

    def add_text(self, into: list, text) -> None:
        if isinstance(text, str) and text and self.size < MAX_TEXT:
            into.append(text[: MAX_TEXT - self.size])
            self.size += len(text)

    @property
    def text(self) -> str:
        return "".join(self.content)

    @property
    def thoughts(self) -> str:
        return "".join(self.thinking)

    def calls(self) -> list[dict]:
        calls = []
        for _, call in sorted(self.tool_calls.items()):
            arguments = call.get("arguments", "")
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else arguments or {}
            except ValueError:
                parsed = {"_raw": arguments}
            calls.append({"id": call.get("id", ""), "name": call.get("name", ""), "input": parsed})
        return calls


# -- bounded values for the ledger -----------------------------------------------------------------------------
def _number(value, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return value if low <= value <= high else None


def _max_tokens(value) -> int | None:
    number = _number(value, 1, 2**31 - 1)
    return int(number) if number is not None and float(number).is_integer() else None


class Dialect:
    kind = ""
    upstream_path = ""  # appended to the provider's base_url

    # -- errors ---------------------------------------------------------------------------------------------
    def error_body(self, status: int, message: str, code: str = "") -> dict:
        raise NotImplementedError

    # -- the call -------------------------------------------------------------------------------------------
    def read_call(self, body) -> Call:
        raise NotImplementedError

    def prepare(self, body: dict, call: Call, memory: str) -> dict:
        """The body forwarded: the client's, with the memory block and the usage request where they apply."""
        raise NotImplementedError

    def auth_headers(self, api_key: str) -> dict:
        raise NotImplementedError

    # -- the answer -----------------------------------------------------------------------------------------
    def read_answer(self, body, answer: Answer) -> None:
        raise NotImplementedError

    def read_event(self, event: str, data: str, answer: Answer) -> bool:
        """Take one SSE event into `answer`; False when the client is not to see it."""
        raise NotImplementedError

    def finish_reason(self, answer: Answer) -> str:
        raise NotImplementedError

    def upstream_error(self, body: bytes) -> str:
        """The message of an error body in this API's shape, else its start."""
        try:
            parsed = json.loads(body)
        except ValueError:
            return body[:500].decode("utf-8", "replace")
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:2000]
        return json.dumps(parsed)[:500]


def _load(body) -> dict:
    if isinstance(body, bytes | str):
        try:
            body = json.loads(body)
        except ValueError as error:
            raise BadCall(f"The body is not JSON: {error}.") from None
    if not isinstance(body, dict):
        raise BadCall("The body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadCall("'model' is required: the model to call.")
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise BadCall("'messages' is required: a non-empty list.")
    return body


# -- OpenAI ---------------------------------------------------------------------------------------------------
OPENAI_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "error": "error",
}
OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}


class OpenAI(Dialect):
    kind = "openai"
    client_wants_usage = True  # read_call sets it for its call (a Dialect is made per call)
    upstream_path = "/chat/completions"

    def error_body(self, status, message, code=""):
        kind = "insufficient_quota" if code == "budget_exceeded" else OPENAI_ERROR_TYPES.get(status, "api_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": code or None}}

    def read_call(self, body) -> Call:
        body = _load(body)
        messages = body["messages"]
        new = _new_input(messages)
        parts = []
        for message in new:
            text = _text_of(message.get("content"))
            if message.get("role") in ("tool", "function"):
                text = f"[tool result {message.get('tool_call_id') or message.get('name') or ''}]\n{text}".rstrip()
            if text:
                parts.append(text)
        system = [
            _text_of(m.get("content"))
            for m in messages
            if isinstance(m, dict) and m.get("role") in ("system", "developer")
        ]
        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        names = [
            t["function"]["name"]
            for t in tools or []
            if isinstance(t, dict)
            and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str)
        ]
        options = body.get("stream_options")
        self.client_wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        return Call(
            model=body["model"],
            stream=body.get("stream") is True,
            content="\n\n".join(parts),
            attachments=[a for m in new for a in _attachments_of(m.get("content"))],
            system_prompt="\n\n".join(s for s in system if s),
            tool_names=names,
            tool_schema=tools,
            max_tokens=_max_tokens(body.get("max_completion_tokens", body.get("max_tokens"))),
            temperature=_number(body.get("temperature"), 0, 2),
            user=body["user"] if isinstance(body.get("user"), str) else "",
            client_wants_usage=self.client_wants_usage,
        )

    def prepare(self, body, call, memory):
        if memory:
            messages = list(body["messages"])
            first = messages[0] if isinstance(messages[0], dict) else {}
            if first.get("role") in ("system", "developer") and isinstance(first.get("content"), str):
                messages[0] = {**first, "content": f"{first['content']}\n\n{memory}"}
            elif first.get("role") in ("system", "developer") and isinstance(first.get("content"), list):
                messages[0] = {**first, "content": [*first["content"], {"type": "text", "text": memory}]}
            else:
                messages.insert(0, {"role": "system", "content": memory})
            body = {**body, "messages": messages}
        if call.stream and not call.client_wants_usage:
            options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
            body = {**body, "stream_options": {**options, "include_usage": True}}
        return body

    def auth_headers(self, api_key):
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def _usage(self, usage, answer: Answer) -> None:
        if not isinstance(usage, dict):
            return
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        # OpenAI, GLM, Qwen: prompt_tokens_details.cached_tokens; DeepSeek: prompt_cache_hit_tokens;
        # Kimi: cached_tokens.
        cached = _int(details.get("cached_tokens")) or _int(usage.get("prompt_cache_hit_tokens"))
        cached = cached or _int(usage.get("cached_tokens"))
        prompt = _int(usage.get("prompt_tokens"))
        answer.usage = {
            "input_tokens": max(0, prompt - cached),
            "cache_read_tokens": min(cached, prompt) if prompt else cached,
            "output_tokens": _int(usage.get("completion_tokens")),
        }

    def _choice(self, choice, answer: Answer, *, delta: bool) -> None:
        if not isinstance(choice, dict):
            return
        message = choice.get("delta" if delta else "message")
        if isinstance(message, dict):
            answer.add_text(answer.content, message.get("content"))
            # DeepSeek, Qwen, vLLM: the reasoning beside the answer.
            answer.add_text(answer.thinking, message.get("reasoning_content") or message.get("reasoning"))
            for position, call in enumerate(message.get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                index = call.get("index", position) if isinstance(call.get("index", position), int) else position
                slot = answer.tool_calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                if isinstance(call.get("id"), str):
                    slot["id"] = call["id"]
                if isinstance(function.get("name"), str):
                    slot["name"] += function["name"] if delta else function["name"]
                if isinstance(function.get("arguments"), str) and len(slot["arguments"]) < MAX_TEXT:
                    slot["arguments"] += function["arguments"]
        if isinstance(choice.get("finish_reason"), str):
            answer.stop_reason = choice["finish_reason"]

    def read_answer(self, body, answer):
        if not isinstance(body, dict):
            return
        answer.model = body.get("model") if isinstance(body.get("model"), str) else answer.model
        answer.upstream_id = body.get("id") if isinstance(body.get("id"), str) else ""
        choices = body.get("choices") if isinstance(body.get("choices"), list) else []
        if choices:
            self._choice(choices[0], answer, delta=False)
        self._usage(body.get("usage"), answer)

    def read_event(self, event, data, answer):
        if data.strip() == "[DONE]":
            return True
        try:
            chunk = json.loads(data)
        except ValueError:
            return True  # not ours to judge: relayed as it came
        if not isinstance(chunk, dict):
            return True
        answer.chunks += 1
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            answer.model = chunk["model"]
        if isinstance(chunk.get("id"), str) and not answer.upstream_id:
            answer.upstream_id = chunk["id"]
        if isinstance(chunk.get("error"), dict):
            answer.stop_reason = "error"
        choices = chunk.get("choices") if isinstance(chunk.get("choices"), list) else []
        if choices:
            self._choice(choices[0], answer, delta=True)
        if isinstance(chunk.get("usage"), dict):
            self._usage(chunk["usage"], answer)
            return bool(choices) or self.client_wants_usage
        return True

    def finish_reason(self, answer):
        return OPENAI_FINISH.get(answer.stop_reason, "stop" if answer.stop_reason else "")


# -- Anthropic ------------------------------------------------------------------------------------------------
ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
}
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def _anthropic_user(user_id) -> str:
    """`metadata.user_id`; Claude Code's (2.x) is JSON, `{"device_id", "account_uuid", "session_id"}`: its account,
    else its device (its session is the session, not the user)."""
    if not isinstance(user_id, str):
        return ""
    if user_id.startswith("{"):
        try:
            parsed = json.loads(user_id)
        except ValueError:
            return user_id
        if isinstance(parsed, dict):
            found = parsed.get("account_uuid") or parsed.get("device_id")
            return found if isinstance(found, str) and found else user_id
    return user_id


class Anthropic(Dialect):
    kind = "anthropic"
    upstream_path = "/v1/messages"

    def error_body(self, status, message, code=""):
        return {"type": "error", "error": {"type": ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message}}

    def read_call(self, body) -> Call:
        body = _load(body)
        new = _new_input(body["messages"])
        parts = [text for text in (_text_of(m.get("content")) for m in new) if text]
        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        return Call(
            model=body["model"],
            stream=body.get("stream") is True,
            content="\n\n".join(parts),
            attachments=[a for m in new for a in _attachments_of(m.get("content"))],
            system_prompt="\n\n".join(
                text
                for text in (
                    _text_of(body.get("system")),
                    *(
                        _text_of(m.get("content"))
                        for m in body["messages"]
                        if isinstance(m, dict) and m.get("role") == "system"
                    ),
                )
                if text
            ),
            tool_names=[t["name"] for t in tools or [] if isinstance(t, dict) and isinstance(t.get("name"), str)],
            tool_schema=tools,
            max_tokens=_max_tokens(body.get("max_tokens")),
            temperature=_number(body.get("temperature"), 0, 1),
            user=_anthropic_user(metadata.get("user_id")),
        )

    def prepare(self, body, call, memory):
        if not memory:
            return body
        system = body.get("system")
        if isinstance(system, list):  # after the client's blocks: a cached prefix stays the same prefix
            system = [*system, {"type": "text", "text": memory}]
        elif isinstance(system, str) and system:
            system = f"{system}\n\n{memory}"
        else:
            system = memory
        return {**body, "system": system}

    def auth_headers(self, api_key):
        return {"x-api-key": api_key} if api_key else {}

    def _usage(self, usage, answer: Answer) -> None:
        if not isinstance(usage, dict):
            return
        found = dict(answer.usage)
        for ours, theirs in (
            ("input_tokens", "input_tokens"),
            ("output_tokens", "output_tokens"),
            ("cache_read_tokens", "cache_read_input_tokens"),
            ("cache_creation_tokens", "cache_creation_input_tokens"),
        ):
            if theirs in usage and usage[theirs] is not None:
                found[ours] = _int(usage[theirs])
        lifetimes = usage.get("cache_creation")
        if isinstance(lifetimes, dict):
            found["cache_creation_5m_tokens"] = _int(lifetimes.get("ephemeral_5m_input_tokens"))
            found["cache_creation_1h_tokens"] = _int(lifetimes.get("ephemeral_1h_input_tokens"))
        answer.usage = found

    def read_answer(self, body, answer):
        if not isinstance(body, dict):
            return
        answer.model = body.get("model") if isinstance(body.get("model"), str) else answer.model
        answer.upstream_id = body.get("id") if isinstance(body.get("id"), str) else ""
        for index, block in enumerate(body.get("content") if isinstance(body.get("content"), list) else []):
            self._block(index, block, answer)
        if isinstance(body.get("stop_reason"), str):
            answer.stop_reason = body["stop_reason"]
        self._usage(body.get("usage"), answer)

    def _block(self, index, block, answer: Answer) -> None:
        if not isinstance(block, dict):
            return
        kind = block.get("type")
        if kind == "text":
            answer.add_text(answer.content, block.get("text"))
        elif kind == "thinking":
            answer.add_text(answer.thinking, block.get("thinking"))
        elif kind in ("tool_use", "server_tool_use"):
            arguments = block.get("input")
            answer.tool_calls[index] = {
                "id": block.get("id", "") if isinstance(block.get("id"), str) else "",
                "name": block.get("name", "") if isinstance(block.get("name"), str) else "",
                "arguments": json.dumps(arguments) if arguments else "",
            }

    def read_event(self, event, data, answer):
        try:
            payload = json.loads(data)
        except ValueError:
            return True
        if not isinstance(payload, dict):
            return True
        kind = payload.get("type") or event
        answer.chunks += 1
        if kind == "message_start" and isinstance(payload.get("message"), dict):
            message = payload["message"]
            answer.model = message.get("model") if isinstance(message.get("model"), str) else answer.model
            answer.upstream_id = message.get("id") if isinstance(message.get("id"), str) else ""
            self._usage(message.get("usage"), answer)
        elif kind == "content_block_start":
            block = payload.get("content_block")
            if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                index = payload.get("index") if isinstance(payload.get("index"), int) else len(answer.tool_calls)
                answer.tool_calls[index] = {
                    "id": block.get("id", "") if isinstance(block.get("id"), str) else "",
                    "name": block.get("name", "") if isinstance(block.get("name"), str) else "",
                    "arguments": "",
                }
            elif isinstance(block, dict):
                self._block(payload.get("index"), block, answer)
        elif kind == "content_block_delta" and isinstance(payload.get("delta"), dict):
            delta = payload["delta"]
            if delta.get("type") == "text_delta":
                answer.add_text(answer.content, delta.get("text"))
            elif delta.get("type") == "thinking_delta":
                answer.add_text(answer.thinking, delta.get("thinking"))
            elif delta.get("type") == "input_json_delta":
                slot = answer.tool_calls.get(payload.get("index"))
                if slot is not None and isinstance(delta.get("partial_json"), str):
                    slot["arguments"] += delta["partial_json"]
        elif kind == "message_delta":
            delta = payload.get("delta") if isinstance(payload.get("delta"), dict) else {}
            if isinstance(delta.get("stop_reason"), str):
                answer.stop_reason = delta["stop_reason"]
            self._usage(payload.get("usage"), answer)
        elif kind == "error":
            answer.stop_reason = "error"
        return True

    def finish_reason(self, answer):
        if answer.stop_reason == "error":
            return "error"
        return ANTHROPIC_FINISH.get(answer.stop_reason, "stop" if answer.stop_reason else "")


DIALECTS = {"openai": OpenAI, "anthropic": Anthropic}


def dialect_for(kind: str) -> Dialect:
    return DIALECTS[kind]()
