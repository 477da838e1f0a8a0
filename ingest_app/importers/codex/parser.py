"""Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl` (and `archived_sessions/`).

Codex (openai/codex, codex-rs `protocol` + `rollout`) writes every line as `{"timestamp", "type", "payload"}`:
`session_meta` (id, cwd, cli_version, originator, source, model_provider, git, forked_from_id), `turn_context`
(model, cwd, effort, approval and sandbox policy), `response_item` (the Responses API items: `message` with
role user / assistant / developer, `reasoning`, `function_call` / `custom_tool_call` / `local_shell_call` /
`web_search_call` and their `*_output`s), `event_msg` (UI events: `user_message`, `agent_message`,
`agent_reasoning` repeat the items; `token_count` carries the usage; `error`, `turn_aborted`) and `compacted`.
Rollouts written before the wrapper (2025) are bare: a first line `{"id", "timestamp", "instructions"}`, then
response items as they are, and `{"record_type": "state"}` markers; they have no usage.

A rollout has no response id: an API call is the model output items written since the previous call, closed
by the `token_count` event Codex writes when the response completes. `token_count.info` holds
`last_token_usage` (this call) and `total_token_usage` (the session so far); Codex writes the event again
without a new call (a rate-limit update repeats the same info), so an event whose total did not move is no
call. Older events have only the total (the call is the difference from the previous total, or the total
itself when it went down: the totals started again), and the first protocol's event was the call's bare
`TokenUsage`. OpenAI counts the cached input inside `input_tokens` (and a cache write, where reported, too) and
the reasoning inside `output_tokens`; see docs/accounting.md ("Codex CLI") for the mapping.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from ingest_app.importers.base import (
    JsonLine,
    LogParser,
    ParsedMessage,
    as_int,
    block_text,
    join_texts,
    parse_timestamp,
    project_of,
    remember_tool_name,
)
from ingest_app.importers.failures import http_status, provider_answered, status_in_text

WRAPPER_TYPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)
# Model output items: what one API call answers with (a call's assistant message is made of them).
CALL_ITEMS = {
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
    "tool_search_call",
    "image_generation_call",
}
OUTPUT_ITEMS = {"function_call_output", "custom_tool_call_output", "tool_search_output", "local_shell_call_output"}
# User-role items Codex writes itself (codex-rs `is_contextual_user_message`): context, not a prompt.
CONTEXT_PREFIXES = (
    "<environment_context",
    "<user_instructions",
    "# agents.md instructions",
    "<instructions>",
    "<skills_instructions",
    "<skill>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<context_update>",
    "<codex_internal_context",
    "<recommended_plugins>",
    "<hook_prompt",
    "<external_",
)
SHELL_PREFIX = "<user_shell_command>"
ROLES = ("user", "assistant", "developer", "system")
# How long after a fork's `session_meta` its copy of the parent's history may still be written.
REPLAY_WINDOW = timedelta(seconds=2)
_ROLLOUT_UUID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")


# `codex_error_info` kinds (codex-rs protocol `CodexErrorInfo`) that are a provider's answer to a model call, and
# those that say no answer came (without an HTTP status) or that are about Codex itself, not a model call.
ANSWERED_ERRORS = {
    "context_window_exceeded",
    "usage_limit_exceeded",
    "server_overloaded",
    "internal_server_error",
    "unauthorized",
    "bad_request",
    "cyber_policy",
    "model_cap",
    "response_stream_disconnected",
}
UNANSWERED_ERRORS = {"http_connection_failed", "response_stream_connection_failed"}
# An `error` event of an older rollout (no `codex_error_info`) that is about a model call says so in its text.
_MODEL_CALL_TEXT = re.compile(
    r"usage limit|rate limit|quota|context window|overloaded|unexpected status|stream disconnected|retry limit",
    re.IGNORECASE,
)


def _error_kind(info: Any) -> tuple[str, Any]:
    """A `codex_error_info`'s kind in snake_case (rollouts write `"bad_request"` or
    `{"response_stream_disconnected": {"http_status_code": 503}}`; the app server camelCase) and its status."""
    if isinstance(info, dict) and len(info) == 1:
        name, details = next(iter(info.items()))
        status = details.get("http_status_code", details.get("httpStatusCode")) if isinstance(details, dict) else None
    else:
        name, status = info, None
    name = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).lower() if isinstance(name, str) else ""
    return name, status


def failure_answered(kind: Any, info: Any, message: str) -> bool:
    """Whether an `error` / `stream_error` event (or a turn's completion `error`) is a failed model call the
    provider answered (a request; see failures.py): an HTTP status, or a kind that is an answer (a bad request,
    an overload, a usage limit, a stream cut after it began); not a connection that failed, nor an error about
    Codex itself (a sandbox error, a failed rollback). Without `codex_error_info` (older rollouts) a
    `stream_error` is a failed attempt (answered unless its text says the connection failed) and an `error`
    counts when its text names a model call's failure (a status, a usage or rate limit, a stream disconnected)."""
    name, status = _error_kind(info)
    if http_status(status) is not None:
        return True
    if name:
        if name in ANSWERED_ERRORS:
            return True
        if name == "response_too_many_failed_attempts":
            return provider_answered(None, message)
        return False  # connection failures without a status, and Codex's own errors
    if kind == "stream_error":
        return provider_answered(None, message)
    return bool(status_in_text(message) or _MODEL_CALL_TEXT.search(message)) and provider_answered(None, message)


def codex_shape(data: dict) -> bool:
    """Whether a JSON line has the shape of a Codex rollout line (for detection by content): a wrapper with a
    `payload` object, or a bare rollout's first line, state marker or Responses API item. None of the other
    tools writes these types (`message` lines of OpenClaw hold a `message` object, Codex's a role)."""
    kind = data.get("type")
    if kind in WRAPPER_TYPES:
        return isinstance(data.get("payload"), dict)
    if kind is None:
        return data.get("record_type") == "state" or ("id" in data and "instructions" in data and "timestamp" in data)
    if kind == "message":
        return "message" not in data and data.get("role") in ROLES and isinstance(data.get("content"), list)
    if kind in CALL_ITEMS or kind in OUTPUT_ITEMS:
        return "call_id" in data
    return kind == "reasoning" and "summary" in data


def usage_of(value: Any) -> dict[str, int] | None:
    """The counts of a Codex `TokenUsage` object (missing fields are 0), or None when it holds no count."""
    if not isinstance(value, dict):
        return None
    counts = {name: as_int(value.get(name)) for name in USAGE_FIELDS}
    if all(count is None for count in counts.values()):
        return None
    return {name: count or 0 for name, count in counts.items()}


def call_usage(payload: dict, previous_total: dict | None) -> tuple[dict | None, dict | None, str]:
    """What one `token_count` payload says: (this call's usage or None, the session total or None, how the
    usage was found: `last`, `total_difference`, `total_after_reset` or `flat`).

    The usage is None when the event is no new call: no info (a rate-limit update at a turn's start), a
    total that did not move since the previous event (the same info written again), or nothing counted."""
    info = payload.get("info")
    if isinstance(info, dict):
        total = usage_of(info.get("total_token_usage"))
        last = usage_of(info.get("last_token_usage"))
    else:
        total, last = None, usage_of(payload) if "input_tokens" in payload or "output_tokens" in payload else None
        if last is not None:
            return (last if any(last.values()) else None), None, "flat"
    if total is not None and total == previous_total:
        return None, total, "repeat"
    if last is not None:
        usage, source = last, "last"
    elif total is None:
        return None, None, "none"
    elif previous_total and all(total[name] >= previous_total[name] for name in USAGE_FIELDS):
        usage, source = {name: total[name] - previous_total[name] for name in USAGE_FIELDS}, "total_difference"
    else:
        usage, source = dict(total), "total_after_reset" if previous_total else "total_difference"
    return (usage if any(usage.values()) else None), total, source


def token_fields(usage: dict[str, int]) -> dict[str, int]:
    """Open ACE's token fields for a Codex usage: input without the cached part (and without a cache write,
    which Codex also counts inside `input_tokens`), output with the reasoning (as Codex counts it)."""
    cached = min(usage["cached_input_tokens"], usage["input_tokens"])
    written = min(usage["cache_write_input_tokens"], usage["input_tokens"] - cached)
    fresh = usage["input_tokens"] - cached - written
    return {
        "input_tokens": fresh,
        "cache_read_tokens": cached,
        "cache_creation_tokens": written,
        "output_tokens": usage["output_tokens"],
        "total_tokens": fresh + usage["output_tokens"],
    }


def is_context_text(text: str) -> bool:
    head = text.lstrip()[:40].lower()
    return head.startswith(CONTEXT_PREFIXES)


def texts_of(blocks: Any) -> str:
    """The texts of a list of blocks whatever their type (`reasoning_text`, `summary_text`, ...)."""
    if not isinstance(blocks, list):
        return ""
    texts = (block.get("text") for block in blocks if isinstance(block, dict))
    return join_texts(text for text in texts if isinstance(text, str))


def output_text(output: Any) -> str:
    """A tool output's text: a string as it is, `{content}` / `{output}` objects, or content items."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        for key in ("content", "output"):
            if isinstance(output.get(key), str):
                return output[key]
            if isinstance(output.get(key), list):
                return block_text(output[key])
        return json.dumps(output, ensure_ascii=False)
    if isinstance(output, list):
        return block_text(output)
    return "" if output is None else str(output)


class CodexParser(LogParser):
    """One rollout file: a session, its prompts (rounds), one assistant message per API call, tool results.

    A call's items are gathered in `self.call` until its `token_count` arrives (or a prompt, or a new call's
    items after tool outputs, show it got none). Nothing waits for that: at the end of every read the open
    call is emitted as far as it is written (a request with no tokens yet), stays open in the carry marked
    emitted, and is emitted again under the same external id when it grows or closes — the import completes
    the stored message and its request in place. Messages written after a call opened in the same read wait
    behind it in `self.held` until it is emitted, so they come out in the order Codex wrote the call and its
    results; once it is stored, they go out at once."""

    tool = "codex"

    def load(self, carry: dict) -> None:
        self.model: str | None = carry.get("model")
        self.previous_total: dict | None = carry.get("previous_total")
        self.calls: int = int(carry.get("calls") or 0)
        self.meta_seen: bool = bool(carry.get("meta_seen"))
        self.call: dict | None = carry.get("call")
        if self.call is not None and "request_id" not in self.call:
            # Saved before calls were emitted while open: it takes its place and request id now, as it would have.
            self.calls += 1
            self.call["emitted_line"] = 0
            self.call["request_id"] = self.request_key(f"{self._session_key()}:call:{self.calls}")
        # Messages waiting for the open call to be emitted: emptied by `finish` (a carry saved before calls
        # were emitted at the end of each read may still hold some).
        self.held = [ParsedMessage.from_carry(item) for item in carry.get("held") or []]
        self.tool_names: dict[str, str] = dict(carry.get("tool_names") or {})
        self.replay_until: str | None = carry.get("replay_until")
        self.turn_failed: bool = bool(carry.get("turn_failed"))  # an `error` event was written in this turn

    def save(self) -> dict:
        return {
            "model": self.model,
            "previous_total": self.previous_total,
            "calls": self.calls,
            "meta_seen": self.meta_seen,
            "call": self.call,
            "tool_names": self.tool_names,
            "replay_until": self.replay_until,
            "turn_failed": self.turn_failed,
        }

    # -- lines ----------------------------------------------------------------------------------------

    def feed(self, line: JsonLine) -> None:
        data = line.data
        kind = data.get("type")
        payload = data.get("payload")
        when = parse_timestamp(data.get("timestamp"))
        if self.replay_until is not None:
            if when is not None and when <= parse_timestamp(self.replay_until):
                self._replayed(kind, payload)
                return
            self.replay_until = None
        self.session.seen_at(when)
        if kind in WRAPPER_TYPES and isinstance(payload, dict):
            if kind == "session_meta":
                self._meta(payload, when)
            elif kind == "turn_context":
                self._turn_context(payload)
            elif kind == "response_item":
                self._item(line.number, payload, when)
            elif kind == "event_msg":
                self._event(line.number, payload, when)
            else:  # compacted
                self._add(
                    line.number,
                    "system",
                    payload.get("message") if isinstance(payload.get("message"), str) else "",
                    when,
                    kind="compaction",
                )
        elif "record_type" in data:
            return  # a bare rollout's state marker
        elif kind is None and "id" in data and ("instructions" in data or "git" in data):
            self._meta(data, when)  # a bare rollout's first line
        elif isinstance(kind, str):
            self._item(line.number, data, when)
        else:
            self.issue(line.number, "not a Codex rollout line (no `type`); line skipped", "warning")

    def _meta(self, payload: dict, when) -> None:
        """The file's own `session_meta` (the first one: a fork also copies its parent's)."""
        if self.meta_seen:
            return
        self.meta_seen = True
        session = self.session
        if isinstance(payload.get("id"), str) and payload["id"]:
            session.agent_session_id = payload["id"]
        if isinstance(payload.get("cwd"), str) and payload["cwd"]:
            session.cwd = payload["cwd"]
            session.project = project_of(payload["cwd"])
        if isinstance(payload.get("cli_version"), str):
            session.version = payload["cli_version"]
        git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
        if isinstance(git.get("branch"), str):
            session.git_branch = git["branch"]
        for key in ("originator", "model_provider", "forked_from_id"):
            if isinstance(payload.get(key), str | int) and payload[key] != "":
                session.metadata[key] = payload[key]
        for key in ("commit_hash", "repository_url"):
            if isinstance(git.get(key), str) and git[key]:
                session.metadata[f"git_{key}"] = git[key]
        source = payload.get("source")
        if source is not None:
            session.metadata["source"] = source
        spawn = (source.get("subagent") or source.get("subAgent")) if isinstance(source, dict) else None
        spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
        parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
        if isinstance(parent, str) and parent:
            # A thread another Codex agent spawned: its calls are the parent session's work.
            session.parent_agent_session_id = parent
            session.is_subagent = True
        session.started_at = parse_timestamp(payload.get("timestamp")) or when or session.started_at
        if session.metadata.get("forked_from_id") and when is not None:
            # A fork (and a sub-agent spawned with its parent's history) starts with a copy of the parent's
            # lines, written in one burst as the file is created: those calls were counted in the parent.
            self.replay_until = (when + REPLAY_WINDOW).isoformat()

    def _replayed(self, kind: Any, payload: Any) -> None:
        """A line of the parent's history copied into a fork: no message, but the state it sets (the model,
        the session total the next `token_count` is compared with) carries on."""
        self.session.metadata["replayed_lines"] = self.session.metadata.get("replayed_lines", 0) + 1
        if not isinstance(payload, dict):
            return
        if kind == "turn_context":
            self._turn_context(payload)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            total = call_usage(payload, self.previous_total)[1]
            if total is not None:
                self.previous_total = total

    def _turn_context(self, payload: dict) -> None:
        model = payload.get("model")
        if isinstance(model, str) and model:
            self.model = model
            models = self.session.metadata.setdefault("models", [])
            if model not in models:
                models.append(model)
        if not self.session.cwd and isinstance(payload.get("cwd"), str) and payload["cwd"]:
            self.session.cwd = payload["cwd"]
            self.session.project = project_of(payload["cwd"])

    def _item(self, number: int, item: dict, when) -> None:
        kind = item.get("type")
        if kind is None and isinstance(item.get("role"), str) and "content" in item:
            kind = "message"  # a message item written without its `type` (some exporters leave it out)
        if kind == "message":
            role = item.get("role")
            text = block_text(item.get("content"))
            if role == "assistant":
                self._call_part(number, when)["texts"].append(text)
            elif role == "user":
                self._user(number, text, when)
            else:  # developer / system: instructions Codex sends, not a prompt
                self._add(number, "system", text, when, kind="instructions", source_role=role)
        elif kind == "reasoning":
            # The raw reasoning when the provider returns it, else its summary (often only encrypted).
            reasoning = texts_of(item.get("content")) or texts_of(item.get("summary"))
            call = self._call_part(number, when)
            if reasoning:
                call["thinking"].append(reasoning)
        elif kind in CALL_ITEMS:
            call_id = item.get("call_id") or item.get("id")
            name = item.get("name") if isinstance(item.get("name"), str) else kind.removesuffix("_call")
            arguments = next((item[key] for key in ("arguments", "input", "action") if key in item), None)
            self._call_part(number, when)["tool_calls"].append({"id": call_id, "name": name, "arguments": arguments})
            remember_tool_name(self.tool_names, call_id, name)
        elif kind in OUTPUT_ITEMS:
            call_id = item.get("call_id")
            if self.call is not None:
                self.call["after_output"] = True
            self._add(
                number,
                "toolResult",
                output_text(item.get("output")),
                when,
                kind="tool_result",
                tool_name=self.tool_names.get(call_id) if isinstance(call_id, str) else None,
                tool_call_id=call_id,
            )
        # ghost_snapshot, the encrypted `compaction` item (the `compacted` line says it) and other
        # bookkeeping items: no message.

    def _event(self, number: int, payload: dict, when) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            self._token_count(number, payload, when)
        elif kind in ("error", "stream_error"):
            self._failed_call(number, payload, when)
            self.turn_failed = self.turn_failed or kind == "error"
        elif kind in ("task_started", "turn_started"):
            self.turn_failed = False
        elif kind in ("task_complete", "turn_complete"):
            # A turn that failed says so again in its completion (`error`: the same message and kind as its
            # `error` event); counted here only when no `error` event of the turn was written (builds that keep
            # the completion but not the event).
            error = payload.get("error") if isinstance(payload.get("error"), dict) else None
            if error is not None and not self.turn_failed:
                self._failed_call(number, error, when, kind="turn_error")
            self.turn_failed = False
        elif kind == "turn_aborted":
            reason = payload.get("reason") if isinstance(payload.get("reason"), str) else ""
            self._add(number, "system", f"turn aborted: {reason}".strip(": "), when, kind="turn_aborted")
        # user_message / agent_message / agent_reasoning repeat the response items; the rest is UI state.

    def _failed_call(self, number: int, payload: dict, when, *, kind: str | None = None) -> None:
        """An `error` event (the turn failed: retries exhausted, or an error no retry mends), a `stream_error`
        (an attempt whose stream failed, retried: "Reconnecting... 1/5") or the `error` of a turn's completion
        written without its event (`kind` "turn_error"). A failed model call the provider answered
        (`failure_answered`) is one request of the current model, without tokens (Codex reports no usage for
        it); anything else (a sandbox error, a failed rollback, a connection that never got an answer) is an
        error and no request. Codex's silent request retries are not written, so not counted."""
        kind = kind or payload.get("type")
        message = payload.get("message") if isinstance(payload.get("message"), str) else ""
        info = payload.get("codex_error_info")
        answered = failure_answered(kind, info, message)
        extra = {"codex_error_info": info, "additional_details": payload.get("additional_details")}
        if answered:
            model = self.call["model"] if self.call is not None and self.call.get("model") else self.model
            request_id = self.request_key(f"{self._session_key()}:failed:{number}")
            self._add(number, "error", message or kind, when, kind=kind, request_id=request_id, model=model,
                      failed_call=True, **extra)  # fmt: skip
        else:
            self._add(number, "error", message or kind, when, kind=kind, **extra)

    # -- rounds, calls and messages -------------------------------------------------------------------

    def _user(self, number: int, text: str, when) -> None:
        if text.lstrip().startswith(SHELL_PREFIX):
            self._add(number, "system", text, when, kind="shell")
        elif is_context_text(text):
            self._add(number, "system", text, when, kind="context")
        elif self.session.is_subagent:
            # The parent agent wrote a spawned thread's prompt, not the human.
            self._add(number, "system", text, when, kind="subagent_prompt")
        else:
            self._close_call(usage=None)
            self.turn_failed = False
            self.conversation = f"codex:{self._session_key()}:{number}"
            self._add(number, "user", text, when, kind="prompt")

    def _session_key(self) -> str:
        return self.session.agent_session_id or self._id_from_file_name()

    def _id_from_file_name(self) -> str:
        match = _ROLLOUT_UUID.search(self.source.file_key)
        return match.group(1) if match else self.source.file_key

    def _call_part(self, number: int, when) -> dict:
        """The open call, for one more output item; a model item after the call's tool outputs is a new
        call (the previous one got no `token_count`: a provider that reports no usage, or an old rollout).
        A call takes its place in the file (`calls`) and its `request_id` when it opens: every version of it
        emitted is the same request."""
        if self.call is not None and self.call["after_output"]:
            self._close_call(usage=None)
        if self.call is None:
            self.calls += 1
            self.call = {
                "line": number,
                "last_line": number,
                "emitted_line": 0,  # its last line when last emitted (0: never)
                "request_id": self.request_key(f"{self._session_key()}:call:{self.calls}"),
                "created_at": when.isoformat() if when else None,
                "texts": [],
                "thinking": [],
                "tool_calls": [],
                "after_output": False,
                "model": self.model,
            }
        self.call["last_line"] = number
        return self.call

    def _token_count(self, number: int, payload: dict, when) -> None:
        usage, total, source = call_usage(payload, self.previous_total)
        if total is not None:
            self.previous_total = total
        if usage is None:
            return
        info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
        model = next(
            (value for value in (info.get("model"), payload.get("model")) if isinstance(value, str) and value), None
        )
        if self.call is None:
            # Usage without output items: a call whose answer Codex keeps elsewhere (a compaction summary).
            self._call_part(number, when)["usage_only"] = True
        self.call["last_line"] = number
        if model:
            self.call["model"] = model
        extra = {"usage_line": number, "usage_source": source, "usage": usage}
        if total is not None:
            extra["total_usage"] = total
        if as_int(info.get("model_context_window")) is not None:
            extra["model_context_window"] = as_int(info.get("model_context_window"))
        self._close_call(usage=usage, extra=extra)

    def _close_call(self, *, usage: dict | None, extra: dict | None = None) -> None:
        """Emit the open call as one assistant message (one request), complete — its usage, or none will come —
        then the messages held behind it. A call emitted by an earlier read is emitted again: a later version
        of the stored message, completed in place."""
        call, self.call = self.call, None
        if call is not None:
            self.messages.append(self._call_message(call, usage=usage, extra=extra, closed=True))
        self.messages.extend(self.held)
        self.held = []

    def _call_message(self, call: dict, *, usage: dict | None, extra: dict | None, closed: bool) -> ParsedMessage:
        """The call as far as it is written: closed (with its usage, or `usage_missing`), or still waiting
        for its `token_count` (`awaiting_usage`: a request with no tokens yet)."""
        metadata = {"tool": self.tool, "kind": "usage_only" if call.get("usage_only") else "response"}
        metadata["lines"] = [call["line"], call["last_line"]]
        metadata.update(extra or {})
        if not closed:
            metadata["awaiting_usage"] = True
        elif usage is None:
            metadata["usage_missing"] = True
        else:
            metadata["reasoning_output_tokens"] = usage["reasoning_output_tokens"]
        if self.session.is_subagent:
            metadata["subagent"] = True
        tokens = token_fields(usage) if usage is not None else {}
        return ParsedMessage(
            role="assistant",
            content=join_texts(call["texts"]),
            external_id=self.line_id(call["line"]),
            line=call["line"],
            created_at=parse_timestamp(call["created_at"]),
            conversation=self.conversation,
            request_id=call["request_id"],
            model=call["model"],
            thinking=join_texts(call["thinking"]) or None,
            tool_calls=call["tool_calls"] or None,
            is_subagent=self.session.is_subagent,
            metadata=metadata,
            **tokens,
        )

    def _add(self, number: int, role: str, content: str, when, *, kind: str, **fields) -> None:
        """A message that is no response: emitted now, or held behind the open call so it follows it. A failed
        call's error passes its `request_id` and `model`."""
        tool_name = fields.pop("tool_name", None)
        request_id, model = fields.pop("request_id", None), fields.pop("model", None)
        metadata = {"tool": self.tool, "kind": kind}
        metadata.update((key, value) for key, value in fields.items() if value is not None)
        if self.session.is_subagent:
            metadata["subagent"] = True
        message = ParsedMessage(
            role=role,
            content=content,
            external_id=self.line_id(number),
            line=number,
            created_at=when,
            conversation=self.conversation,
            tool_name=tool_name,
            request_id=request_id,
            model=model,
            is_subagent=self.session.is_subagent,
            metadata=metadata,
        )
        if self.call is not None and not self.call["emitted_line"] and role != "user":
            self.held.append(message)
        else:
            self.messages.append(message)

    def finish(self, *, flush: bool) -> int:
        """Emit what was read: the open call as far as it is written (again when it grew since it was last
        emitted), then the messages held behind it — nothing read waits for a later import. `flush` (an idle
        file) closes the call without usage. Returns 1 while a stored call still waits for its usage."""
        if not self.session.agent_session_id:
            self.session.agent_session_id = self._id_from_file_name()
        call = self.call
        if call is not None and flush:
            self._close_call(usage=None)
        elif call is not None and call["last_line"] > call["emitted_line"]:
            self.messages.append(self._call_message(call, usage=None, extra=None, closed=False))
            call["emitted_line"] = call["last_line"]
        self.messages.extend(self.held)
        self.held = []
        return 1 if self.call is not None else 0
