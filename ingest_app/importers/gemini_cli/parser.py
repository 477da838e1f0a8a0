"""Gemini CLI chats: `~/.gemini/tmp/<project>/chats/session-<time>-<id>.json` (before v0.39) and `….jsonl`.

Both forms hold `ConversationRecord`s (packages/core/src/services/chatRecordingService.ts): a session
(`sessionId`, `projectHash`, `startTime`, `lastUpdated`, `summary`, `kind` main | subagent) and its
`MessageRecord`s (`id`, `timestamp`, `type` user | gemini | info | error | warning, `content`, and on `gemini`
records `thoughts`, `toolCalls`, `tokens`, `model`).

- The JSON form (`.json`, up to v0.38) is one document rewritten whole as the chat grows: read whole each time
  it changed (`document = True`).
- The JSONL form (`.jsonl`, v0.39 and later) is append-only: the session first, then each record as it is
  made, and again, whole, each time it changes (its tokens arrive, its tool calls finish) under the same `id`:
  the last version wins. `{"$set": {...}}` lines update the session, `{"$rewindTo": id}` lines mark a rewind.

Sub-agents have their own file, `chats/<parent session id>/<agent id>.json(l)`, with `kind: "subagent"`.
Older Qwen Code (`~/.qwen/tmp/<hash>/chats/*.json`, `qwen_code/parser_json`) wrote the same documents with `qwen`
for the model. How records become messages, requests and tokens: docs/accounting.md, "Gemini CLI".
"""

from __future__ import annotations

import json
import re
from typing import Any

from ingest_app.importers.base import (
    JsonLine,
    LogParser,
    ParsedMessage,
    as_int,
    join_texts,
    parse_timestamp,
)
from ingest_app.importers.failures import provider_answered

_PROJECT_HASH = re.compile(r"[0-9a-f]{64}")  # older versions name a project's folder by its path's SHA-256
MAX_REMEMBERED = 500  # records of a JSONL file remembered in the carry, for their later versions
_DONE_STATUSES = {"success", "error", "cancelled"}
_SYSTEM_TYPES = {"info", "warning"}  # UI notices: system messages of that kind
# User records Gemini CLI itself does not replay as conversation (sessionUtils.isIgnoredUserContent).
_COMMAND_PREFIXES = ("/", "?")
_CONTEXT_PREFIXES = ("<session_context>", "<hook_context>")
# How Gemini CLI writes an API error it shows (`parseAndFormatApiError`): "[API Error: <message>]" — the call
# that failed after its retries (the retried attempts are not written).
_API_ERROR_PREFIX = "[API Error:"


def gemini_tokens(tokens: dict) -> dict[str, int]:
    """A record's `tokens` {input, output, cached, thoughts, tool, total} (the response's usageMetadata:
    prompt, candidates, cachedContent, thoughts, toolUsePrompt and total token counts) as Open ACE counts them.

    `input` includes the cached part (Gemini's totalTokenCount = prompt + candidates + thoughts + toolUsePrompt),
    so input = input − cached + tool (the tool-use prompt is input the model read) and cache_read = cached;
    when `total` shows `input` was already net of the cache (total = every count + cached), it is kept as it is
    (tokscale's rule). Thoughts are output: added to `output` unless `total` shows they are inside it already
    (OpenAI-compatible providers). total = input + output (the tool's own total less the cache reads)."""
    prompt = as_int(tokens.get("input"))
    candidates = as_int(tokens.get("output"))
    if prompt is None and candidates is None:
        return {}
    prompt, candidates = prompt or 0, candidates or 0
    cached = as_int(tokens.get("cached")) or 0
    thoughts = as_int(tokens.get("thoughts")) or 0
    tool = as_int(tokens.get("tool")) or 0
    total = as_int(tokens.get("total"))
    inclusive = prompt + candidates + thoughts + tool
    if cached and total is not None and total == inclusive + cached:
        uncached = prompt
    else:
        uncached = max(prompt - cached, 0)
    thoughts_inside = bool(thoughts) and total == prompt + candidates + tool
    output = candidates if thoughts_inside else candidates + thoughts
    input_tokens = uncached + tool
    return {
        "input_tokens": input_tokens,
        "output_tokens": output,
        "cache_read_tokens": cached,
        "total_tokens": input_tokens + output,
    }


def parts_of(content: Any) -> list[dict]:
    """A record's `content` (a PartListUnion: a string, a part, or a list of strings and parts) as parts."""
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        return [{"text": item} if isinstance(item, str) else item for item in content if isinstance(item, str | dict)]
    return []


def text_of(parts: list[dict]) -> str:
    """The text a person reads in parts: text that is not a thought, and a mark for data."""
    texts = []
    for part in parts:
        if isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
        else:
            data = next((part[key] for key in ("inlineData", "fileData") if isinstance(part.get(key), dict)), None)
            if data is not None:
                texts.append(f"[{data.get('mimeType') or 'file'}]")
    return "".join(texts)


def _thought_text(thought: Any) -> str:
    if isinstance(thought, str):
        return thought
    if not isinstance(thought, dict):
        return ""
    subject, description = thought.get("subject"), thought.get("description")
    return join_texts((value for value in (subject, description) if isinstance(value, str)), "\n")


def _response_text(response: dict) -> str:
    body = response.get("response")
    if isinstance(body, dict) and set(body) <= {"output", "error", "content", "llmContent"}:
        for key in ("output", "error", "content", "llmContent"):
            if isinstance(body.get(key), str):
                return body[key]
    if body is None:
        return ""
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)


class ConversationRecordParser(LogParser):
    """Records of Gemini CLI's ConversationRecord (and older Qwen Code's) to messages, in the order given.

    `model_types` are the record types of a model response: `gemini`, or `qwen` in older Qwen Code."""

    model_types = frozenset({"gemini"})

    def load(self, carry: dict) -> None:
        # A record's id → [its conversation, its request id or None], for its later versions (JSONL).
        self.known: dict[str, list] = dict(carry.get("known") or {})
        self.results: dict[str, bool] = dict(carry.get("results") or {})  # tool results emitted, by call id
        self.model: str | None = carry.get("model")  # the model of the last response (an error record names none)
        project_dir = self.source.project_dir
        if project_dir:
            self.session.metadata.setdefault("project_dir", project_dir)
            if not _PROJECT_HASH.fullmatch(project_dir):
                # Newer versions name the folder after the project (the slug of its directory's name).
                self.session.project = self.session.project or project_dir
        if self.source.is_subagent and not self.session.agent_session_id:
            # `chats/<parent session id>/<agent id>.jsonl`; the file's `sessionId` is the agent id too.
            self.session.agent_session_id = self.source.agent_id or self.source.file_key
            self.session.parent_agent_session_id = self.source.parent_session_id
            self.session.is_subagent = True

    def save(self) -> dict:
        _trim(self.known)
        _trim(self.results)
        return {"known": self.known, "results": self.results, "model": self.model}

    def finish(self, *, flush: bool) -> int:
        if not self.session.agent_session_id:
            self.session.agent_session_id = self.source.file_key
        return 0

    # -- the session ------------------------------------------------------------------------------
    def note_session(self, data: dict) -> None:
        """The session fields of a document, a JSONL first line or a `$set` update."""
        session = self.session
        if isinstance(data.get("sessionId"), str) and data["sessionId"]:
            session.agent_session_id = data["sessionId"]
        if data.get("kind") == "subagent" and not session.is_subagent:
            session.is_subagent = True
            session.parent_agent_session_id = session.parent_agent_session_id or self.source.parent_session_id
        for key, name in (("projectHash", "project_hash"), ("summary", "summary")):
            if isinstance(data.get(key), str) and data[key]:
                session.metadata[name] = data[key]
        directories = data.get("directories")
        if isinstance(directories, list) and directories and all(isinstance(d, str) for d in directories):
            session.metadata["directories"] = directories[:20]
        for key in ("startTime", "lastUpdated"):
            session.seen_at(parse_timestamp(data.get(key)))

    # -- records ----------------------------------------------------------------------------------
    def record(self, data: dict, line: int) -> None:
        """One MessageRecord (its last version)."""
        kind = data.get("type") if isinstance(data.get("type"), str) else None
        record_id = self.own_id_or_line_id(data.get("id"), line)
        self.session.seen_at(parse_timestamp(data.get("timestamp")))
        known = self.known.get(record_id)
        current = self.conversation
        if known is not None:
            self.conversation = known[0]  # a later version of a record stays in the round it was met in
        if kind == "user":
            self._user(record_id, line, data)
        elif kind in self.model_types:
            self._model(record_id, line, data)
        elif kind == "error":
            self._error(record_id, line, data)
        elif kind in _SYSTEM_TYPES:
            text = text_of(parts_of(data.get("content")))
            self._emit(record_id, line, data, "system", text, kind=kind)
        if known is not None:
            self.conversation = current
        else:
            self.known.setdefault(record_id, [self.conversation, None])

    def _emit(self, external_id: str, line: int, data: dict, role: str, content: str, *, kind: str, **fields) -> None:
        record_id = data.get("id") if isinstance(data.get("id"), str) else None
        metadata = {"tool": self.tool, "kind": kind, "record_id": record_id}
        if self.source.is_subagent or self.session.is_subagent:
            metadata["subagent"] = True
        metadata.update({key: value for key, value in (fields.pop("extra", None) or {}).items() if value is not None})
        message = ParsedMessage(
            role=role,
            content=content,
            external_id=external_id,
            line=line,
            created_at=fields.pop("created_at", None) or parse_timestamp(data.get("timestamp")),
            conversation=self.conversation,
            is_subagent=self.source.is_subagent or self.session.is_subagent,
            metadata={key: value for key, value in metadata.items() if value is not None},
            **fields,
        )
        self.messages.append(message)

    def _user(self, record_id: str, line: int, data: dict) -> None:
        parts = parts_of(data.get("content"))
        responses = [part["functionResponse"] for part in parts if isinstance(part.get("functionResponse"), dict)]
        text = text_of(parts_of(data["displayContent"])) if data.get("displayContent") else text_of(parts)
        if responses and not text.strip():
            # The tool results sent back to the model (recorded as a user turn since v0.39): the same results
            # as the calls' `result`, which give them first; these count only for a call that has none.
            for index, response in enumerate(responses):
                call_id = response.get("id") if isinstance(response.get("id"), str) else None
                external_id = f"{call_id}:result" if call_id else f"{record_id}:{index}"
                if call_id and call_id in self.results:
                    continue
                self._tool_result(external_id, line, data, call_id, response.get("name"), _response_text(response))
            return
        stripped = text.strip()
        if stripped.startswith(_COMMAND_PREFIXES):
            self._emit(record_id, line, data, "system", text, kind="command")
        elif not stripped or stripped.startswith(_CONTEXT_PREFIXES):
            self._emit(record_id, line, data, "system", text, kind="meta")
        elif self.source.is_subagent or self.session.is_subagent:
            self._emit(record_id, line, data, "system", text, kind="subagent_prompt")
        else:
            self.conversation = f"{self.tool}:{record_id}"
            self._emit(record_id, line, data, "user", text, kind="prompt")

    def _model(self, record_id: str, line: int, data: dict) -> None:
        parts = parts_of(data.get("content"))
        thoughts = [_thought_text(thought) for thought in _list(data.get("thoughts"))]
        thoughts.extend(part["text"] for part in parts if part.get("thought") and isinstance(part.get("text"), str))
        records = [call for call in _list(data.get("toolCalls")) if isinstance(call, dict)]
        calls = [{"id": call.get("id"), "name": call.get("name"), "arguments": call.get("args")} for call in records]
        if not calls:  # a response kept as raw parts (an empty answer with only function calls)
            calls = [
                {"id": part["functionCall"].get("id"), "name": part["functionCall"].get("name"),
                 "arguments": part["functionCall"].get("args")}
                for part in parts if isinstance(part.get("functionCall"), dict)
            ]  # fmt: skip
        tokens = data.get("tokens") if isinstance(data.get("tokens"), dict) else None
        usage = gemini_tokens(tokens) if tokens else {}
        request_id = None
        if usage:
            known = self.known.get(record_id)
            request_id = known[1] if known and known[1] else self.request_key(record_id)
            self.known[record_id] = [self.conversation, request_id]
        model = data.get("model") if isinstance(data.get("model"), str) and data["model"] else None
        self.model = model or self.model
        extra = {"usage": {k: v for k, v in tokens.items() if isinstance(v, int)} if tokens else None}
        self._emit(
            record_id,
            line,
            data,
            "assistant",
            text_of(parts),
            kind="response",
            extra=extra,
            request_id=request_id,
            model=model,
            thinking=join_texts(thoughts) or None,
            tool_calls=calls or None,
            **usage,
        )
        for index, call in enumerate(records):
            call_id = call.get("id") if isinstance(call.get("id"), str) and call["id"] else None
            status = call.get("status") if isinstance(call.get("status"), str) else None
            if call.get("result") is None and status not in _DONE_STATUSES:
                continue  # still running: its result comes with a later version of the record
            display = call.get("resultDisplay")
            if isinstance(display, str) and display:
                content = display
            else:
                responses = [p["functionResponse"] for p in parts_of(call.get("result")) if "functionResponse" in p]
                content = join_texts(_response_text(r) for r in responses if isinstance(r, dict))
            self._tool_result(
                f"{call_id}:result" if call_id else f"{record_id}:result:{index}",
                line,
                data,
                call_id,
                call.get("name"),
                content,
                status=status,
                created_at=parse_timestamp(call.get("timestamp")),
                spawned_agent_id=call.get("agentId") if isinstance(call.get("agentId"), str) else None,
            )

    def _error(self, record_id: str, line: int, data: dict) -> None:
        """An `error` record: what Gemini CLI showed as an error. An API error (`[API Error: …]`) is the call that
        failed after Gemini CLI's retries (they are not written): answered by the provider
        (`failures.provider_answered`), it is one request of the model of the last response, without tokens (the
        record has none); its request id is kept with the record's id, like a response's."""
        text = text_of(parts_of(data.get("content")))
        if not (text.lstrip().startswith(_API_ERROR_PREFIX) and provider_answered(None, text)):
            no_answer = True if text.lstrip().startswith(_API_ERROR_PREFIX) else None
            self._emit(record_id, line, data, "error", text, kind="error", extra={"no_answer": no_answer})
            return
        known = self.known.get(record_id)
        request_id = known[1] if known and known[1] else self.request_key(record_id)
        self.known[record_id] = [self.conversation, request_id]
        extra = {"failed_call": True, "model_from": "the last response" if self.model else None}
        self._emit(
            record_id, line, data, "error", text, kind="api_error", extra=extra, request_id=request_id, model=self.model
        )

    def _tool_result(self, external_id, line, data, call_id, name, content, *, status=None, created_at=None, **extra):
        if call_id:
            self.results[call_id] = True
        self._emit(
            external_id,
            line,
            data,
            "toolResult",
            content,
            kind="tool_result",
            extra={"call_id": call_id, "status": status, "is_error": (status == "error") or None, **extra},
            tool_name=name if isinstance(name, str) else None,
            created_at=created_at,
        )


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _trim(remembered: dict) -> None:
    while len(remembered) > MAX_REMEMBERED:
        remembered.pop(next(iter(remembered)))


class GeminiCliParser(ConversationRecordParser):
    """The JSON form: one document, read whole each time it changed. A message's `line` is its position in
    `messages` (1-based)."""

    tool = "gemini-cli"
    document = True

    def feed_document(self, data: Any) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            self.issue(0, "not a session document: no `messages` list")
            return
        self.note_session(data)
        for position, record in enumerate(data["messages"], start=1):
            if isinstance(record, dict):
                self.record(record, position)
            else:
                self.issue(position, f"message {position} is a JSON {type(record).__name__}, not an object; skipped")


class GeminiCliJsonlParser(ConversationRecordParser):
    """The JSONL form: records are collected by id as the lines come (a later version replaces an earlier
    one, in the place the record first took) and become messages at `finish`. A version met in a later read
    of the file comes out again under the same external id, in the round it first belonged to: the import
    completes the stored message with it."""

    tool = "gemini-cli"

    def load(self, carry: dict) -> None:
        super().load(carry)
        self.pending: dict[str, tuple[dict, int]] = {}  # id → (its last version, the line it first came on)

    def feed(self, line: JsonLine) -> None:
        data = line.data
        if "$rewindTo" in data:
            self.session.metadata["rewinds"] = int(self.session.metadata.get("rewinds") or 0) + 1
            return  # the rewound records were real calls, billed: they stay
        if isinstance(data.get("$set"), dict):
            # A `messages` list in it is Gemini CLI's rewrite of the model's history (after /compress, or with
            # tool outputs masked): the same records, and turns it made up; nothing that was said or billed.
            self.note_session(data["$set"])
            return
        if "type" not in data and "sessionId" in data:
            self.note_session(data)
            for record in data.get("messages") if isinstance(data.get("messages"), list) else []:
                if isinstance(record, dict):  # a whole JSON-form record on one line
                    self._collect(record, line.number)
            return
        if "type" not in data:
            return
        self._collect(data, line.number)

    def _collect(self, data: dict, line: int) -> None:
        record_id = self.own_id_or_line_id(data.get("id"), line)
        first = self.pending.get(record_id)
        self.pending[record_id] = (data, first[1] if first else line)

    def finish(self, *, flush: bool) -> int:
        for data, line in self.pending.values():
            self.record(data, line)
        self.pending = {}
        return super().finish(flush=flush)
