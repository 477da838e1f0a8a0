"""Qwen Code chat records: `~/.qwen/projects/<project>/chats/<session>.jsonl`.

Each line is a ChatRecord (packages/core/src/services/chatRecordingService.ts): `type` user | assistant |
tool_result | system (older Gemini-style logs say `gemini` or `model` for the assistant), the API `Content`
in `message` (`role` + `parts`: text, `thought` text, functionCall, functionResponse), `usageMetadata` on
assistant records, and `systemPayload` on system records.

The request marker is the assistant record: Qwen Code writes exactly one per API response
(`recordAssistantTurn`), with that response's `usageMetadata`. The `ui_telemetry` `api_response` event
written just before it (same token counts) gives the request its `auth_type` and `response_id`;
telemetry alone never makes a request, so calls whose records live in a sub-agent file are not counted
twice. The one telemetry event that is a request is an `api_error` the provider answered: a failed call, which has
no assistant record (failures.py). See docs/accounting.md.
"""

from __future__ import annotations

import hashlib
import json

from ingest_app.importers.base import (
    JsonLine,
    LogParser,
    ParsedMessage,
    as_int,
    call_id,
    join_texts,
    parse_timestamp,
    project_of,
    remember_tool_name,
)
from ingest_app.importers.failures import provider_answered

_ASSISTANT_TYPES = {"assistant", "gemini", "model"}
_NOT_PROMPTS = {"notification", "cron", "goal_runtime"}  # user-role records the CLI itself wrote
# A line's own ids (and its subtype), kept in its messages' metadata under our names.
_LINE_IDS = (
    ("uuid", "uuid"),
    ("parentUuid", "parent_uuid"),
    ("agentId", "agent_id"),
    ("promptId", "prompt_id"),
    ("subtype", "subtype"),
)


def _event_kind(name: str) -> str:
    # 'qwen-code.api_response' (current), 'api_response' (older builds)
    return name.rsplit(".", 1)[-1] if name else ""


def normalise_usage(usage: dict) -> dict[str, int | None]:
    """Gemini-style usageMetadata to Open ACE token kinds.

    promptTokenCount includes cachedContentTokenCount, so input = prompt - cached (uncached input, as
    Claude Code and OpenClaw report it) and cache_read = cached. Reasoning (thoughtsTokenCount) is output:
    it is added to candidatesTokenCount unless totalTokenCount shows it is already inside (OpenAI-compatible
    providers report completion tokens with reasoning included). total = input + output."""
    prompt = as_int(usage.get("promptTokenCount"))
    cached = as_int(usage.get("cachedContentTokenCount"))
    candidates = as_int(usage.get("candidatesTokenCount"))
    thoughts = as_int(usage.get("thoughtsTokenCount")) or 0
    total = as_int(usage.get("totalTokenCount"))
    if prompt is None and candidates is None:
        return {"input_tokens": None, "output_tokens": None, "cache_read_tokens": cached, "total_tokens": None}
    input_tokens = max((prompt or 0) - (cached or 0), 0)
    output_tokens = candidates or 0
    if thoughts and not (total is not None and total == (prompt or 0) + output_tokens):
        output_tokens += thoughts
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": cached,
        "total_tokens": input_tokens + output_tokens,
    }


def _legacy_usage(tokens: dict) -> dict:
    # Gemini CLI's older `tokens` {input, output, cached, thoughts, tool, total}.
    return {
        "promptTokenCount": tokens.get("input"),
        "candidatesTokenCount": tokens.get("output"),
        "cachedContentTokenCount": tokens.get("cached"),
        "thoughtsTokenCount": tokens.get("thoughts"),
        "totalTokenCount": tokens.get("total"),
    }


class QwenCodeParser(LogParser):
    tool = "qwen-code"

    def load(self, carry: dict) -> None:
        self.auth_type: str | None = carry.get("auth_type")
        self.last_response: dict | None = carry.get("last_response")
        self.tool_names: dict[str, str] = dict(carry.get("tool_names") or {})
        if not self.session.agent_session_id and self.source.is_subagent:
            self.name_subagent_session_from_path()
        if self.source.project_dir and not self.session.metadata.get("project_dir"):
            self.session.metadata["project_dir"] = self.source.project_dir

    def save(self) -> dict:
        return {"auth_type": self.auth_type, "last_response": self.last_response, "tool_names": self.tool_names}

    def finish(self, *, flush: bool) -> int:
        if not self.session.agent_session_id:
            self.session.agent_session_id = self.source.file_key
        return 0

    def feed(self, line: JsonLine) -> None:
        data = line.data
        self._note_session(data)
        kind = data.get("type")
        if kind == "user":
            self._user(line, data)
        elif kind in _ASSISTANT_TYPES:
            self._assistant(line, data)
        elif kind == "tool_result":
            self._tool_result(line, data)
        elif kind == "system":
            self._system(line, data)

    # -- helpers -----------------------------------------------------------------------------------
    def _note_session(self, data: dict) -> None:
        session = self.session
        self.note_session_id(data.get("sessionId"))
        for key, attr in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version")):
            value = data.get(key)
            if isinstance(value, str) and value:
                setattr(session, attr, value)
        if session.cwd:
            session.project = project_of(session.cwd)
        session.seen_at(parse_timestamp(data.get("timestamp")))

    def _subagent(self, data: dict) -> bool:
        return bool(data.get("isSidechain") or data.get("agentId")) or self.source.is_subagent

    def _metadata(self, data: dict, **extra) -> dict:
        return self.line_metadata(data, _LINE_IDS, extra)

    def _emit(self, line: int, data: dict, role: str, content: str, *, suffix: str = "", **fields) -> ParsedMessage:
        message = ParsedMessage(
            role=role,
            content=content,
            external_id=self.own_id_or_line_id(data.get("uuid"), line) + suffix,
            line=line,
            created_at=parse_timestamp(data.get("timestamp")),
            conversation=self.conversation,
            is_sidechain=bool(data.get("isSidechain")),
            is_subagent=self.source.is_subagent,
            **fields,
        )
        self.messages.append(message)
        return message

    @staticmethod
    def _parts(data: dict) -> list:
        message = data.get("message")
        if isinstance(message, dict) and isinstance(message.get("parts"), list):
            return [part for part in message["parts"] if isinstance(part, dict)]
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return [{"text": message["content"]}]
        if isinstance(data.get("content"), str):  # older Gemini-style records
            return [{"text": data["content"]}]
        return []

    # -- records -----------------------------------------------------------------------------------
    def _user(self, line: JsonLine, data: dict) -> None:
        subtype = data.get("subtype")
        parts = self._parts(data)
        payload = data.get("systemPayload") if isinstance(data.get("systemPayload"), dict) else {}
        text = payload.get("displayText") if isinstance(payload.get("displayText"), str) else None
        if text is None:
            text = join_texts((part.get("text") for part in parts if not part.get("thought")), "\n")
        responses = [part["functionResponse"] for part in parts if isinstance(part.get("functionResponse"), dict)]
        if responses and not text:
            self._tool_result(line, data)
            return
        if subtype in _NOT_PROMPTS or data.get("provenance") == "system":
            self._emit(line.number, data, "system", text, metadata=self._metadata(data, kind=subtype or "notification"))
        elif self._subagent(data):
            self._emit(line.number, data, "system", text, metadata=self._metadata(data, kind="subagent_prompt"))
        elif subtype == "mid_turn_user_message":
            # Typed by the user while tools ran: a user message, but part of the current round.
            self._emit(line.number, data, "user", text, metadata=self._metadata(data, kind="mid_turn"))
        else:
            self.conversation = f"qwen-code:{self.own_id_or_line_id(data.get('uuid'), line.number)}"
            self.last_response = None  # telemetry of an earlier round never pairs with this round's records
            self._emit(line.number, data, "user", text, metadata=self._metadata(data, kind="prompt"))

    def _assistant(self, line: JsonLine, data: dict) -> None:
        parts = self._parts(data)
        texts, thoughts, calls = [], [], []
        for part in parts:
            if isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                calls.append({"id": call.get("id"), "name": call.get("name"), "arguments": call.get("args")})
                remember_tool_name(self.tool_names, call.get("id"), call.get("name"))
            elif isinstance(part.get("text"), str):
                (thoughts if part.get("thought") else texts).append(part["text"])
        if isinstance(data.get("forkedFrom"), dict):
            # A /branch copy of the parent session's record (same uuid, `forkedFrom` names the parent): the call
            # was made, and is counted, in the parent session.
            metadata = self._metadata(data, kind="forked_copy", forked_from=data["forkedFrom"].get("sessionId"))
            self._emit(line.number, data, "system", join_texts(texts), metadata=metadata)
            return
        if isinstance(data.get("thoughts"), list):  # older Gemini-style records
            thoughts.extend(
                str(t.get("description") or t.get("subject") or "") for t in data["thoughts"] if isinstance(t, dict)
            )
        usage = data.get("usageMetadata") if isinstance(data.get("usageMetadata"), dict) else None
        if usage is None and isinstance(data.get("tokens"), dict):
            usage = _legacy_usage(data["tokens"])
        tokens = normalise_usage(usage) if usage else {}
        provider_id = self.own_id_or_line_id(data.get("uuid"), line.number)
        auth_type = self.auth_type
        metadata = self._metadata(data, kind="response")
        telemetry = self.last_response
        if telemetry and usage and not telemetry.get("paired") and _same_usage(telemetry, usage):
            telemetry["paired"] = True
            if telemetry.get("response_id"):
                provider_id = telemetry["response_id"]
                metadata["response_id"] = telemetry["response_id"]
            auth_type = telemetry.get("auth_type") or auth_type
            if telemetry.get("duration_ms") is not None:
                metadata["duration_ms"] = telemetry["duration_ms"]
        if usage:
            metadata["usage"] = {k: v for k, v in usage.items() if isinstance(v, int)}
        inputs = (tokens.get("input_tokens"), tokens.get("cache_read_tokens"), tokens.get("cache_creation_tokens"))
        request_id = self.request_key(call_id(provider_id, inputs))  # one record is one call
        self._emit(
            line.number,
            data,
            "assistant",
            join_texts(texts),
            thinking=join_texts(thoughts) or None,
            tool_calls=calls or None,
            request_id=request_id,
            auth_type=auth_type,
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            metadata=metadata,
            **tokens,
        )

    def _tool_result(self, line: JsonLine, data: dict) -> None:
        parts = self._parts(data)
        responses = [part["functionResponse"] for part in parts if isinstance(part.get("functionResponse"), dict)]
        result = data.get("toolCallResult") if isinstance(data.get("toolCallResult"), dict) else {}
        if not responses:
            responses = [{"id": result.get("callId"), "name": None, "response": None}]
        for index, response in enumerate(responses):
            call_id = response.get("id") or (result.get("callId") if index == 0 else None)
            name = response.get("name") or (self.tool_names.get(call_id) if isinstance(call_id, str) else None)
            if isinstance(call_id, str):
                self.tool_names.pop(call_id, None)
            display = result.get("resultDisplay") if index == 0 else None
            if isinstance(display, str):
                content = display
            else:
                body = response.get("response")
                if isinstance(body, dict) and set(body) <= {"output", "error", "content"}:
                    body = body.get("output") or body.get("error") or body.get("content")
                content = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
                if body is None:
                    content = ""
            status = result.get("status") if index == 0 else None
            metadata = self._metadata(
                data, kind="tool_result", call_id=call_id, status=status, is_error=(status == "error") or None
            )
            self._emit(
                line.number,
                data,
                "toolResult",
                content,
                suffix="" if len(responses) == 1 else f":{index}",
                tool_name=name,
                metadata=metadata,
            )

    def _system(self, line: JsonLine, data: dict) -> None:
        subtype = data.get("subtype")
        payload = data.get("systemPayload") if isinstance(data.get("systemPayload"), dict) else {}
        if subtype == "ui_telemetry":
            self._telemetry(line, data, payload.get("uiEvent") if isinstance(payload.get("uiEvent"), dict) else {})
        elif subtype == "chat_compression":
            info = payload.get("info") if isinstance(payload.get("info"), dict) else None
            self._emit(
                line.number,
                data,
                "system",
                "Chat history compressed",
                metadata=self._metadata(data, kind="compaction", info=info),
            )
        elif subtype == "slash_command":
            if payload.get("phase", "invocation") == "invocation":
                command = payload.get("rawCommand") if isinstance(payload.get("rawCommand"), str) else ""
                self._emit(line.number, data, "system", command, metadata=self._metadata(data, kind="command"))
        elif subtype == "session_model":
            if isinstance(payload.get("authType"), str) and payload["authType"]:
                self.auth_type = payload["authType"]
            if isinstance(payload.get("modelId"), str):
                self.session.metadata["model"] = payload["modelId"]
        elif subtype == "custom_title" and isinstance(payload.get("customTitle"), str):
            self.session.metadata["title"] = payload["customTitle"]
        elif subtype == "parent_session" and isinstance(payload.get("parentSessionId"), str):
            self.session.metadata["parent_session_id"] = payload["parentSessionId"]
        # at_command, attribution_snapshot, file_history_snapshot, ...: UI replay state, no message.

    def _telemetry(self, line: JsonLine, data: dict, event: dict) -> None:
        kind = _event_kind(str(event.get("event.name") or ""))
        if isinstance(event.get("auth_type"), str) and event["auth_type"]:
            self.auth_type = event["auth_type"]
        if kind == "api_response":
            if event.get("subagent_name"):
                return  # the sub-agent's own records carry this call
            self.last_response = {
                "response_id": event.get("response_id") if isinstance(event.get("response_id"), str) else None,
                "auth_type": event.get("auth_type") if isinstance(event.get("auth_type"), str) else None,
                "input": as_int(event.get("input_token_count")),
                "output": as_int(event.get("output_token_count")),
                "duration_ms": as_int(event.get("duration_ms")),
                "paired": False,
            }
        elif kind == "api_error":
            self._failed_call(line, data, event)

    def _failed_call(self, line: JsonLine, data: dict, event: dict) -> None:
        """An `api_error` event: Qwen Code's logging content generator logs one per failed attempt (retries
        included, "one model API error per failed attempt"), and the chat recording keeps it. Answered by the
        provider (`failures.provider_answered`: a status code, or an error that is not a connection failure), it
        is one request of the event's model and auth type, with no tokens (`ApiErrorEvent` has no usage). Its
        request id is made of the event itself, so a copy of the same event (a sub-agent's, written in both its
        file and its parent's) counts once."""
        message = str(event.get("error_message") or event.get("error") or "API error")
        status = event.get("status_code")
        auth_type = event.get("auth_type") if isinstance(event.get("auth_type"), str) and event["auth_type"] else None
        metadata = self._metadata(
            data,
            kind="api_error",
            status=status,
            error_type=event.get("error_type"),
            auth_type=event.get("auth_type"),
            model=event.get("model"),
            prompt_id=event.get("prompt_id"),
            subagent_name=event.get("subagent_name"),
        )
        fields = {}
        if provider_answered(status, message):
            identity = [event.get(key) for key in ("event.timestamp", "prompt_id", "model", "status_code")]
            digest = hashlib.blake2b(json.dumps([*identity, message], default=str).encode(), digest_size=8).hexdigest()
            response_id = event.get("response_id") if isinstance(event.get("response_id"), str) else ""
            fields = {
                "request_id": f"api_error:{response_id or digest}",
                "auth_type": auth_type or self.auth_type,
                "model": event.get("model") if isinstance(event.get("model"), str) else None,
            }
            metadata["failed_call"] = True
        else:
            metadata["no_answer"] = True
        self._emit(line.number, data, "error", message, metadata=metadata, **fields)


def _same_usage(telemetry: dict, usage: dict) -> bool:
    return telemetry.get("input") == as_int(usage.get("promptTokenCount")) and telemetry.get("output") == as_int(
        usage.get("candidatesTokenCount")
    )
