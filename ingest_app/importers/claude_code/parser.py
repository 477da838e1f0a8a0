"""Claude Code transcripts: `~/.claude/projects/<project>/<session>.jsonl` and its sub-agent files.

Each line is an entry (`user`, `assistant`, `system`, `summary`, bookkeeping types). Claude Code writes one
streamed API response as several `assistant` lines, one per content block (thinking, text, tool_use), that
share `message.id` and repeat `message.usage` with `output_tokens` growing. Those lines become ONE
assistant message (one request, `request_id` = `message.id`): its content, thinking and tool calls are the
blocks joined in order, its tokens those of the most complete line (the largest `output_tokens`, the later
line on a tie), never a sum.

A response stays open until the same agent starts its next response or a real prompt arrives (or the
caller flushes): with streaming tool execution a tool result can be written between two lines of the
response that called it. Still, every response in the bytes read is emitted at their end, in the order of
first lines, as far as it is written; one still open stays in the carry, marked emitted, and is emitted
again (same external id) when later lines grow it: the import completes the stored message and its
request in place. A failed call (an `isApiErrorMessage` line, a `system` `api_error` line per retried attempt) is
an `error` message that is a request of the model the agent last called (failures.py). See docs/accounting.md.
"""

from __future__ import annotations

import json
import re

from ingest_app.importers.base import (
    JsonLine,
    LogParser,
    ParsedMessage,
    as_int,
    block_text,
    call_id,
    join_texts,
    parse_timestamp,
    project_of,
    remember_tool_name,
    total_of,
)
from ingest_app.importers.failures import anthropic_request_id, http_status, provider_answered, status_in_text

# User lines that Claude Code writes for local commands, shell mode and interrupts: not prompts.
_COMMAND = re.compile(r"^\s*<(command-name|command-message|command-args)>")
_COMMAND_OUTPUT = re.compile(r"^\s*<(local-command-stdout|local-command-stderr|local-command-caveat)>")
_BASH = re.compile(r"^\s*<(bash-input|bash-stdout|bash-stderr)>")
_INTERRUPT = re.compile(r"^\s*\[Request interrupted by user")
_SYSTEM_MESSAGE_SUBTYPES = {"compact_boundary", "local_command"}
# A line's own ids, kept in its messages' metadata under our names.
_LINE_IDS = (("uuid", "uuid"), ("parentUuid", "parent_uuid"), ("agentId", "agent_id"), ("promptId", "prompt_id"))


# What the lines of one response repeat: the input side of its usage, set when the call started.
_CALL_USAGE = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _call_inputs(usage) -> list[int | None]:
    return [as_int(usage.get(name)) for name in _CALL_USAGE] if isinstance(usage, dict) else []


def _same_call(response: dict, lane: str, usage) -> bool:
    """Whether a line with an open response's id continues it: the same agent, and the input side of the usage
    (when both give it) unchanged — a later call sends a longer context, under an id a provider may reuse."""
    if response["lane"] != lane:
        return False
    known = response["usage"]
    if not isinstance(usage, dict) or not isinstance(known, dict):
        return True
    return all(
        usage.get(name) is None or known.get(name) is None or usage.get(name) == known.get(name) for name in _CALL_USAGE
    )


def prompt_round(prompt_id: str) -> str:
    """The conversation reference of the round a Claude Code prompt opened, from its prompt id."""
    return f"claude-code:prompt:{prompt_id}"[:255]


def _round_of(data: dict, line_id: str, current: str | None) -> str:
    """The conversation a real prompt opens. Claude Code (2.x) gives each prompt a `promptId`, which its
    OpenTelemetry events carry as `prompt.id`: the round is named after it, so that the events and the log
    name the same conversation (ingest_app.otlp). Without one (older logs), or if the prompt id is the
    current round's again, the round is named after the line."""
    prompt_id = data.get("promptId")
    if isinstance(prompt_id, str) and prompt_id and prompt_round(prompt_id) != current:
        return prompt_round(prompt_id)
    return f"claude-code:{line_id}"


class ClaudeCodeParser(LogParser):
    tool = "claude-code"

    def load(self, carry: dict) -> None:
        # Responses still streaming, by key; "emitted_line" is their last line when last emitted (0: never).
        self.open: dict[str, dict] = dict(carry.get("open") or {})
        self.lanes: dict[str, str] = dict(carry.get("lanes") or {})  # agent lane -> key of its open response
        # Messages of this read waiting for a response opened before them (emptied by `finish`; a carry saved
        # before responses were emitted at the end of each read may still hold some).
        self.outbox: list[dict] = [
            {"message": ParsedMessage.from_carry(item["message"])} if "message" in item else item
            for item in carry.get("outbox") or []
        ]
        self.tool_names: dict[str, str] = dict(carry.get("tool_names") or {})
        # The model each agent lane last called (a failed call's line names `<synthetic>`, not the model called),
        # and the retry attempt its last `api_error` line reported (a later line with the same attempt is the
        # same failed attempt again: persistent retries repeat it every 30 s while they wait).
        self.models: dict[str, str] = dict(carry.get("models") or {})
        self.retries: dict[str, list] = dict(carry.get("retries") or {})
        if not self.session.agent_session_id:
            source = self.source
            if source.is_subagent:
                self.name_subagent_session_from_path()
                if source.agent_id:
                    self.session.metadata["agent_id"] = source.agent_id
                self._read_agent_meta()
            if source.project_dir:
                self.session.metadata["project_dir"] = source.project_dir
                self.session.project = source.project_dir

    def save(self) -> dict:
        return {
            "open": self.open,
            "lanes": self.lanes,
            "tool_names": self.tool_names,
            "models": self.models,
            "retries": self.retries,
        }

    def _read_agent_meta(self) -> None:
        # Newer Claude Code writes `agent-<id>.meta.json` (agentType, description, toolUseId) next to it.
        meta_path = self.source.path.with_name(self.source.path.name.removesuffix(".jsonl") + ".meta.json")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(meta, dict):
            self.session.metadata["agent_meta"] = {k: v for k, v in meta.items() if isinstance(v, str | int | bool)}

    # -- per line ----------------------------------------------------------------------------------
    def feed(self, line: JsonLine) -> None:
        data = line.data
        kind = data.get("type")
        self._note_session(data)
        if kind in ("assistant", "user"):
            self.retries.pop(self._lane(data), None)  # the lane moved on: a later api_error is a new attempt
        if kind == "assistant":
            self._assistant(line, data)
        elif kind == "user":
            self._user(line, data)
        elif kind == "system":
            self._system(line, data)
        elif kind == "summary":
            if isinstance(data.get("summary"), str):
                self.session.metadata["summary"] = data["summary"]
        elif kind in ("ai-title", "custom-title"):
            title = data.get("aiTitle") or data.get("customTitle") or data.get("title")
            if isinstance(title, str):
                self.session.metadata["title"] = title
        # file-history-snapshot, queue-operation, progress, attachment, ...: bookkeeping, no message.

    def finish(self, *, flush: bool) -> int:
        """Emit every response still open as far as it is written (those that grew since they were last
        emitted): nothing read waits for a later import. They stay open in the carry — a last line with a
        `stop_reason` is not always the last (some versions write the final `stop_reason` on every line) —
        until the agent moves on, or `flush` closes them. Returns how many have no `stop_reason` yet: still
        streaming (stored, completed when their last lines arrive)."""
        if flush:
            for key in list(self.open):
                self._close(key)
        for key, response in self.open.items():
            if response["last_line"] > response.get("emitted_line", 0):
                self._place(key, response, self._message(response))
                response["emitted_line"] = response["last_line"]
        while self.outbox:
            self.messages.append(self.outbox.pop(0)["message"])
        if not self.session.agent_session_id:
            self.session.agent_session_id = self.source.file_key  # Claude Code names the file after the session
        return sum(1 for response in self.open.values() if not response["stop_reason"])

    def _note_session(self, data: dict) -> None:
        session = self.session
        self.note_session_id(data.get("sessionId"))
        agent_id = data.get("agentId")
        if session.is_subagent and isinstance(agent_id, str) and agent_id and "agent_id" not in session.metadata:
            session.metadata["agent_id"] = agent_id
            if not self.source.agent_id:
                session.agent_session_id = f"agent-{agent_id}"
        cwd = data.get("cwd")
        if isinstance(cwd, str) and cwd and cwd != session.cwd:
            session.cwd = cwd
            session.project = project_of(cwd) or session.project
        for key, attr in (("gitBranch", "git_branch"), ("version", "version")):
            value = data.get(key)
            if isinstance(value, str) and value:
                setattr(session, attr, value)
        session.seen_at(parse_timestamp(data.get("timestamp")))

    def _flags(self, data: dict) -> dict:
        return {
            "is_sidechain": bool(data.get("isSidechain")),
            "is_subagent": self.source.is_subagent,
            "is_meta": bool(data.get("isMeta")),
        }

    def _metadata(self, data: dict, **extra) -> dict:
        return self.line_metadata(data, _LINE_IDS, extra)

    def _emit(self, line: int, data: dict, role: str, content: str, *, suffix: str = "", **fields) -> ParsedMessage:
        external_id = self.own_id_or_line_id(data.get("uuid"), line) + suffix
        message = ParsedMessage(
            role=role,
            content=content,
            external_id=external_id,
            line=line,
            created_at=parse_timestamp(data.get("timestamp")),
            conversation=self.conversation,
            **self._flags(data),
            **fields,
        )
        self._release(message)
        return message

    def _release(self, message: ParsedMessage) -> None:
        # In line order: a message after a response that is still open waits for it.
        if self.outbox:
            self.outbox.append({"message": message})
        else:
            self.messages.append(message)

    # -- user lines --------------------------------------------------------------------------------
    def _user(self, line: JsonLine, data: dict) -> None:
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        results = [block for block in blocks if isinstance(block, dict) and block.get("type") == "tool_result"]
        if results:
            self._tool_results(line, data, blocks, results)
            return
        text = block_text(content)
        flags = self._flags(data)
        if data.get("isCompactSummary"):
            kind = "compact_summary"
        elif flags["is_meta"]:
            kind = "meta"
        elif _COMMAND.match(text):
            kind = "command"
        elif _COMMAND_OUTPUT.match(text):
            kind = "command_output"
        elif _BASH.match(text):
            kind = "shell"
        elif _INTERRUPT.match(text):
            kind = "interrupt"
        elif flags["is_sidechain"] or flags["is_subagent"]:
            kind = "subagent_prompt"  # written by the parent agent, not by the human
        else:
            kind = None
        if kind:
            self._emit(line.number, data, "system", text, metadata=self._metadata(data, kind=kind))
            return
        for key in list(self.open):  # a new round: every response of the last one is complete
            self._close(key)
        self.conversation = _round_of(data, self.own_id_or_line_id(data.get("uuid"), line.number), self.conversation)
        self._emit(line.number, data, "user", text, metadata=self._metadata(data, kind="prompt"))

    def _tool_results(self, line: JsonLine, data: dict, blocks: list, results: list) -> None:
        extra_text = join_texts(
            block.get("text")
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
        tool_use_result = data.get("toolUseResult")
        spawned = tool_use_result.get("agentId") if isinstance(tool_use_result, dict) else None
        for index, block in enumerate(results):
            tool_use_id = block.get("tool_use_id")
            name = self.tool_names.pop(tool_use_id, None) if isinstance(tool_use_id, str) else None
            metadata = self._metadata(
                data,
                kind="tool_result",
                tool_use_id=tool_use_id,
                is_error=bool(block.get("is_error")) or None,
                spawned_agent_id=spawned if index == 0 else None,
                text=extra_text if index == 0 and extra_text else None,
            )
            self._emit(
                line.number,
                data,
                "toolResult",
                block_text(block.get("content")),
                suffix="" if len(results) == 1 else f":{index}",
                tool_name=name,
                metadata=metadata,
            )

    # -- system lines ------------------------------------------------------------------------------
    def _system(self, line: JsonLine, data: dict) -> None:
        subtype = data.get("subtype")
        content = data.get("content") if isinstance(data.get("content"), str) else ""
        if subtype == "api_error":
            self._failed_attempt(line, data, content)
        elif subtype in _SYSTEM_MESSAGE_SUBTYPES:
            compact = data.get("compactMetadata") if isinstance(data.get("compactMetadata"), dict) else None
            kind = "compact_boundary" if subtype == "compact_boundary" else "command"
            metadata = self._metadata(data, kind=kind, compact=compact)
            self._emit(line.number, data, "system", content or "Conversation compacted", metadata=metadata)
        # turn_duration, stop_hook_summary, informational notices: no message.

    # -- failed calls ------------------------------------------------------------------------------
    def _failed_attempt(self, line: JsonLine, data: dict, content: str) -> None:
        """A `system` `api_error` line: an attempt that failed and will be retried (Claude Code's `withRetry`
        writes one per failed attempt, `retryAttempt` of `maxRetries`; the attempt that fails last is the
        `isApiErrorMessage` line instead). Answered by the provider (an HTTP status; not a connection error), it
        is one request of the lane's model. The same attempt written again (persistent retries repeat it every
        30 s while they wait, counting `retryInMs` down) is a `system` line of that wait, no new request."""
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        text = error.get("message") if isinstance(error.get("message"), str) else ""
        text = text or (data.get("error") if isinstance(data.get("error"), str) else "") or content
        status = http_status(error.get("status"))
        lane = self._lane(data)
        attempt = [data.get("retryAttempt"), data.get("maxRetries")]
        previous = self.retries.get(lane)
        metadata = self._metadata(
            data,
            kind="api_error",
            retry_attempt=data.get("retryAttempt"),
            max_retries=data.get("maxRetries"),
            retry_in_ms=data.get("retryInMs"),
            status=status or status_in_text(text),
            api_request_id=anthropic_request_id(text),
        )
        if previous is not None and attempt[0] is not None and previous[:2] == attempt:
            metadata.update(kind="api_retry_wait", attempt_line=previous[2])
            self._emit(line.number, data, "system", text or content or "API error", metadata=metadata)
            return
        self.retries[lane] = [*attempt, line.number]
        answered = provider_answered(status, text) and not error.get("connection")
        self._emit_failure(line, data, text or content or "API error", metadata, answered=answered)

    def _failed_call(self, line: JsonLine, data: dict, message: dict) -> None:
        """An `isApiErrorMessage` line (model `<synthetic>`): the call that failed last, written in the model's
        place (`error` says its kind — rate_limit, server_error, authentication_failed, billing_error,
        invalid_request, unknown —, `apiErrorStatus` its HTTP status). Answered by the provider, it is one request
        of the lane's model with the line's (zero) usage."""
        text = block_text(message.get("content"))
        error = data.get("error")
        status = http_status(data.get("apiErrorStatus"))
        metadata = self._metadata(
            data,
            kind="api_error",
            error=error if isinstance(error, str) else None,
            status=status or status_in_text(text),  # older lines have no apiErrorStatus: "API Error: 429 {…}"
            api_request_id=anthropic_request_id(text),
        )
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
        message_id = message.get("id") if isinstance(message.get("id"), str) and message.get("id") else None
        self._emit_failure(
            line,
            data,
            text,
            metadata,
            answered=provider_answered(status, text),
            call_id=message_id,
            usage=usage,
        )

    def _emit_failure(
        self, line: JsonLine, data: dict, text: str, metadata: dict, *, answered: bool, call_id=None, usage=None
    ) -> None:
        """A failed call's `error` message: a request of the model the lane last called when the provider answered
        it (`failures.provider_answered`), its `request_id` the line's own id (Claude Code's id of the
        synthetic message, else the line's uuid: a copy of the line counts once), with the tokens the line
        reports; no request when no answer came (the connection failed)."""
        fields = {}
        if answered:
            model = self.models.get(self._lane(data)) or self.models.get("")
            usage = usage or {}
            input_tokens, output_tokens = as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens"))
            fields = {
                "request_id": call_id or self.own_id_or_line_id(data.get("uuid"), line.number),
                "model": model,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_tokens": as_int(usage.get("cache_read_input_tokens")),
                "cache_creation_tokens": as_int(usage.get("cache_creation_input_tokens")),
                "total_tokens": total_of(input_tokens, output_tokens),
            }
            metadata["failed_call"] = True
            if model:
                metadata["model_from"] = "the lane's last call"
        else:
            metadata["no_answer"] = True
        self._emit(line.number, data, "error", text or "API error", metadata=metadata, **fields)

    # -- assistant lines ---------------------------------------------------------------------------
    @staticmethod
    def _lane(data: dict) -> str:
        agent_id = data.get("agentId")
        return (
            f"agent:{agent_id}"
            if data.get("isSidechain") and isinstance(agent_id, str)
            else ("sidechain" if data.get("isSidechain") else "main")
        )

    def _assistant(self, line: JsonLine, data: dict) -> None:
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        lane = self._lane(data)
        forked = data.get("forkedFrom") if isinstance(data.get("forkedFrom"), dict) else None
        if data.get("isApiErrorMessage") or message.get("model") == "<synthetic>" or forked:
            if lane in self.lanes:
                self._close(self.lanes[lane])
            text = block_text(message.get("content"))
            if forked:  # a /branch (fork) copy of the parent session's line: the call was made, and counted, there
                metadata = self._metadata(data, kind="forked_copy", forked_from=forked.get("sessionId"))
                self._emit(line.number, data, "system", text, metadata=metadata)
            elif data.get("isApiErrorMessage") or data.get("error"):
                self._failed_call(line, data, message)
            else:  # e.g. "No response requested." after an interrupt: no API call was made
                self._emit(line.number, data, "system", text, metadata=self._metadata(data, kind="synthetic"))
            return
        # message.id identifies one API response; requestId is missing on some lines of newer versions and
        # of other Anthropic-compatible endpoints, so it only stands in when there is no message.id.
        message_id = message.get("id") if isinstance(message.get("id"), str) and message.get("id") else None
        api_request_id = data.get("requestId") if isinstance(data.get("requestId"), str) else None
        key = message_id or api_request_id or f"line:{line.number}"
        if self.lanes.get(lane) not in (None, key):
            self._close(self.lanes[lane])  # this agent has moved on to its next response
        response = self.open.get(key)
        if response is not None and not _same_call(response, lane, message.get("usage")):
            self._close(key)  # a provider that reuses ids (`chatcmpl-<n>`): the same id, the next call
            response = None
        if response is None:
            # Every assistant line that is not synthetic, an error or a fork's copy answered an API call: one
            # without any id (an exporter that drops them) is a call of its own, named by its line.
            provider_id = message_id or api_request_id or self.own_id_or_line_id(data.get("uuid"), line.number)
            response = self.open[key] = {
                "request_id": self.request_key(call_id(provider_id, _call_inputs(message.get("usage")))),
                "external_id": self.own_id_or_line_id(data.get("uuid"), line.number),
                "lane": lane,
                "line": line.number,
                "last_line": line.number,
                "timestamp": data.get("timestamp"),
                "conversation": self.conversation,
                "flags": self._flags(data),
                "metadata": self._metadata(data, kind="response", api_request_id=api_request_id),
                "texts": [],
                "thinking": [],
                "tool_calls": [],
                "model": None,
                "stop_reason": None,
                "usage": None,
                "usage_line": None,
            }
            self.outbox.append({"key": key})
        self.lanes[lane] = key
        response["last_line"] = line.number
        if api_request_id and "api_request_id" not in response["metadata"]:
            response["metadata"]["api_request_id"] = api_request_id
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                response["texts"].append(block["text"])
            elif kind in ("thinking", "redacted_thinking"):
                response["thinking"].append(block.get("thinking") or "[redacted thinking]")
            elif kind in ("tool_use", "server_tool_use"):
                call = {"id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
                response["tool_calls"].append(call)
                remember_tool_name(self.tool_names, call["id"], call["name"])
        if isinstance(message.get("model"), str):
            response["model"] = message["model"]
            if message["model"]:
                self.models[lane] = self.models[""] = message["model"]  # "": the session's last, for any lane
        if isinstance(message.get("stop_reason"), str) and message["stop_reason"]:
            response["stop_reason"] = message["stop_reason"]
        usage = message.get("usage")
        if isinstance(usage, dict):
            best = response["usage"]
            if best is None or (as_int(usage.get("output_tokens")) or 0) >= (as_int(best.get("output_tokens")) or 0):
                response["usage"] = usage
                response["usage_line"] = line.number

    def _close(self, key: str) -> None:
        response = self.open.pop(key)
        if self.lanes.get(response["lane"]) == key:
            del self.lanes[response["lane"]]
        if response["last_line"] > response.get("emitted_line", 0):  # else stored as it is already
            self._place(key, response, self._message(response))

    def _place(self, key: str, response: dict, message: ParsedMessage) -> None:
        """A response's message: in its place in the line order the first time, then (emitted by an earlier
        read, stored) as a later version of it, which the import completes in place."""
        if response.get("emitted_line", 0):
            self.messages.append(message)
            return
        index = next(i for i, item in enumerate(self.outbox) if item.get("key") == key)
        self.outbox[index] = {"message": message}
        while self.outbox and "message" in self.outbox[0]:
            self.messages.append(self.outbox.pop(0)["message"])

    def _message(self, response: dict) -> ParsedMessage:
        """The response as far as its lines go."""
        usage = response["usage"] or {}
        input_tokens = as_int(usage.get("input_tokens"))
        output_tokens = as_int(usage.get("output_tokens"))
        metadata = dict(response["metadata"])
        metadata["lines"] = [response["line"], response["last_line"]]
        if response["usage"] is not None:
            metadata["usage"] = {k: v for k, v in usage.items() if isinstance(v, int | str | dict)}
            metadata["usage_line"] = response["usage_line"]
        # The cache writes by lifetime (`usage.cache_creation`: Claude Code 1.0.8x and later); their sum is
        # `cache_creation_input_tokens` (accounting.cache_writes fills in either when only the other is there).
        lifetimes = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
        return ParsedMessage(
            role="assistant",
            content=join_texts(response["texts"]),
            external_id=response["external_id"],
            line=response["line"],
            created_at=parse_timestamp(response["timestamp"]),
            conversation=response["conversation"],
            request_id=response["request_id"],
            model=response["model"],
            thinking=join_texts(response["thinking"]) or None,
            tool_calls=response["tool_calls"] or None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=as_int(usage.get("cache_read_input_tokens")),
            cache_creation_tokens=as_int(usage.get("cache_creation_input_tokens")),
            cache_creation_5m_tokens=as_int(lifetimes.get("ephemeral_5m_input_tokens")),
            cache_creation_1h_tokens=as_int(lifetimes.get("ephemeral_1h_input_tokens")),
            total_tokens=total_of(input_tokens, output_tokens),
            finish_reason=response["stop_reason"],
            metadata=metadata,
            **response["flags"],
        )
