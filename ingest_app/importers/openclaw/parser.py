"""OpenClaw session transcripts: `~/.openclaw/agents/<agent>/sessions/<session>.jsonl`.

OpenClaw keeps its transcripts in the pi-coding-agent format: a `session` header line (`id`, `cwd`,
`timestamp`, `version`), then entries with `id`/`parentId`: `message` (roles user, assistant, toolResult,
bashExecution), `model_change`, `thinking_level_change`, `compaction`, `custom_message`, `session_info`...
Every assistant message is one LLM call with its own `usage` {input, output, cacheRead, cacheWrite,
totalTokens, cost}; input excludes the cache, totalTokens includes it.

Messages that arrive through a chat channel carry the channel's metadata in the user text ("Conversation
info (untrusted metadata)" and "Sender (untrusted metadata)" JSON blocks, an older `[Feishu ...]`
envelope, a `[message_id: om_...]` tag). For Feishu the chat id (`oc_...`) of a group, or the peer's
open_id (`ou_...`) of a direct chat, becomes `feishu_conversation_id`: the same key OpenClaw routes the
session by (`agent:<id>:feishu:group:<chat_id>` / `feishu:direct:<open_id>`).

One session's history can be in several files (`transcript_name` reads their names): the live
`<session>.jsonl`, the same file renamed on /reset or delete (`<session>.jsonl.reset.<timestamp>`,
`.deleted.<timestamp>`), a copy taken before a compaction (`<session>.checkpoint.<uuid>.jsonl`), and a
thread's own session (`<session>-topic-<thread>.jsonl`). Not every assistant line is an API call: OpenClaw
writes slash-command replies and copies of delivered messages as assistant messages (`no_call_kind`).
See docs/accounting.md, "OpenClaw".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ingest_app.importers.base import (
    JsonLine,
    LogParser,
    ParsedMessage,
    as_int,
    block_text,
    join_texts,
    nano_usd,
    parse_timestamp,
    project_of,
    total_of,
)
from ingest_app.importers.failures import provider_answered
from ingest_app.importers.jsonl import loads_finite

_BLOCK = re.compile(
    r"(?P<label>Conversation info|Sender) \(untrusted metadata\):\s*```json\s*\n(?P<json>.*?)\n\s*```", re.DOTALL
)
_ANY_BLOCK = re.compile(r"^[^\n]*\((?:untrusted[^)]*)\):\s*```json\s*\n.*?\n\s*```\s*", re.DOTALL | re.MULTILINE)
_ENVELOPE = re.compile(r"^\[(?P<channel>Feishu|Lark)(?: Group)? (?P<from>[^\]\s]+)[^\]]*\]\s*", re.MULTILINE)
_MESSAGE_ID_TAG = re.compile(r"^\[message_id: (?P<id>[^\]\s]+)\]\s*", re.MULTILINE)
# OpenClaw 2026.3 queued a system event per inbound Feishu message, prepended to the prompt as
# `System: [<time>] Feishu[<account>] DM from <open_id>: <preview>` (or `message in group <chat_id>`).
_SYSTEM_EVENTS = re.compile(r"\A(?:System: \[[^\]\n]*\] [^\n]*(?:\n|\Z))+\s*")
_FEISHU_SYSTEM_EVENT = re.compile(
    r"^System: \[[^\]\n]*\] (?P<channel>Feishu|Lark)\[(?P<account>[^\]\n]*)\] "
    r"(?:DM from (?P<sender>[^\s:]+)|message in group (?P<chat>[^\s:]+)):",
    re.MULTILINE,
)
_FEISHU_SPEAKER = re.compile(r"^(?P<id>o[un]_[0-9A-Za-z]+): ")
_FEISHU_CHAT = re.compile(r"\boc_[0-9A-Za-z]+")
_FEISHU_PREFIXES = ("om_", "oc_", "ou_", "on_")
# OpenClaw's own names for a session's files (src/config/sessions/artifacts.ts): the live transcript renamed to
# `<file>.reset.<ts>` / `<file>.deleted.<ts>` (archiveFileOnDisk), a pre-compaction copy
# `<session>.checkpoint.<uuid>.jsonl` (captureCompactionCheckpointSnapshot).
_ARCHIVE_TIMESTAMP = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z"
_ARCHIVE_NAME = re.compile(rf"^(?P<stem>.+)\.jsonl\.(?P<variant>reset|deleted)\.{_ARCHIVE_TIMESTAMP}$")
_CHECKPOINT_NAME = re.compile(
    r"^(?P<stem>.+)\.checkpoint\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$", re.IGNORECASE
)
# Assistant messages OpenClaw writes itself, without calling a model (isTranscriptOnlyOpenClawAssistantModel):
# a copy of a reply delivered to a channel, and a reply the gateway injected (slash commands, chat.inject).
_NO_CALL_MODELS = {"delivery-mirror": "delivery_mirror", "gateway-injected": "injected"}
_MIRROR_MARKERS = ("openclawDeliveryMirror", "openclawMessageToolMirror")
_SYSTEM_ENTRY_KINDS = {"compaction", "branch_summary", "custom_message", "reset"}
_SYSTEM_ROLES = {"bashExecution": "shell", "custom": "custom_message", "branchSummary": "branch_summary"}


@dataclass(frozen=True)
class TranscriptName:
    """What an OpenClaw transcript's file name says: the session file's stem (`<session id>`, or
    `<session id>-topic-<thread>` for a thread's own session) and which of its files this is."""

    stem: str
    variant: str  # live | reset | deleted | checkpoint

    @property
    def live_name(self) -> str:
        """The name the session's live file has (an archive had it before it was renamed)."""
        return f"{self.stem}.jsonl"


def transcript_name(name: str) -> TranscriptName | None:
    """The session and variant an OpenClaw transcript file name gives, or None when it names no transcript.

    Archives (`.jsonl.reset.<ts>`, `.jsonl.deleted.<ts>`) are the live file renamed, byte for byte; a
    checkpoint is a copy of the live file taken before a compaction (a prefix of it). All three hold the
    same session as `<stem>.jsonl` (the `session` header carries the same id). `.bak.<ts>` backups and
    `<session>.trajectory.jsonl` run traces are not transcripts OpenClaw counts usage from
    (isUsageCountedSessionTranscriptFileName, isTrajectoryRuntimeArtifactName), so neither do we."""
    if name.endswith(".trajectory.jsonl"):
        return None  # a run's timing trace (session.started … model.completed): the transcript has its usage
    if match := _ARCHIVE_NAME.match(name):
        return TranscriptName(match.group("stem"), match.group("variant"))
    if match := _CHECKPOINT_NAME.match(name):
        return TranscriptName(match.group("stem"), "checkpoint")
    if name.endswith(".jsonl") and len(name) > len(".jsonl"):
        return TranscriptName(name[: -len(".jsonl")], "live")
    return None


def is_compressed_archive(name: str) -> bool:
    """Whether `name` is an archived transcript OpenClaw compressed with zstd (`<archive name>.zst`,
    archive-compression.ts: newer versions compress archives when the runtime can). It is read decompressed
    (`jsonl.open_log`), whole, like any archive."""
    archive = transcript_name(name.removesuffix(".zst")) if name.endswith(".zst") else None
    return archive is not None and archive.variant in ("reset", "deleted")


def no_call_kind(message: dict) -> str | None:
    """Why an assistant message made no API call (`injected`, `delivery_mirror`), or None when it did.

    OpenClaw writes assistant messages of its own: a slash-command reply or a `chat.inject` text (older
    versions: `stopReason: "injected"`, no model; newer: model `gateway-injected`) and a copy of a reply
    delivered to a channel (model `delivery-mirror`, or a delivery-mirror marker). Their usage is zero."""
    model = message.get("model")
    if isinstance(model, str) and model in _NO_CALL_MODELS:
        return _NO_CALL_MODELS[model]
    if message.get("stopReason") == "injected":
        return "injected"
    if any(isinstance(message.get(marker), dict) for marker in _MIRROR_MARKERS):
        return "delivery_mirror"
    return None


def parse_inbound_metadata(text: str) -> dict:
    """The channel metadata OpenClaw wrote into an inbound user message: the JSON blocks, an envelope and a
    `[message_id: ...]` tag, plus the body without them."""
    found: dict = {}
    for match in _BLOCK.finditer(text):
        try:
            data, _ = loads_finite(match.group("json"))
        except ValueError:
            continue
        if isinstance(data, dict):
            found["conversation" if match.group("label") == "Conversation info" else "sender"] = data
    for event in _FEISHU_SYSTEM_EVENT.finditer(text):  # the last one is the message's own
        found["system_event"] = {
            "channel": event.group("channel"),
            "account": event.group("account"),
            **({"sender": event.group("sender")} if event.group("sender") else {"chat": event.group("chat")}),
        }
    body = _SYSTEM_EVENTS.sub("", _ANY_BLOCK.sub("", text).strip())
    envelope = _ENVELOPE.search(body)
    if envelope:
        found["envelope"] = {"channel": envelope.group("channel"), "from": envelope.group("from")}
        body = body[: envelope.start()] + body[envelope.end() :]
    tag = _MESSAGE_ID_TAG.search(body)
    if tag:
        found["message_id"] = tag.group("id")
        body = body[: tag.start()] + body[tag.end() :]
    body = body.strip()
    conversation, sender = found.get("conversation") or {}, found.get("sender") or {}
    sender_id = conversation.get("sender_id") or sender.get("id") or (found.get("system_event") or {}).get("sender")
    speaker = _FEISHU_SPEAKER.match(body) if "message_id" in found else None
    if speaker and not sender_id:
        # Every Feishu plugin version writes the body as `[message_id: om_…]\n<speaker>: <text>`, the speaker
        # being the sender's name when it could be looked up, else the open_id.
        found["speaker"] = sender_id = speaker.group("id")
    for prefix in (sender_id, sender.get("name"), conversation.get("sender")):
        if isinstance(prefix, str) and prefix and body.startswith(f"{prefix}: "):
            body = body[len(prefix) + 2 :]
            break
    if found:
        found["body"] = body
    return found


def feishu_context(meta: dict) -> dict | None:
    """Feishu ids from parsed inbound metadata, or None when the message did not come from Feishu."""
    conversation = meta.get("conversation") or {}
    sender = meta.get("sender") or {}
    envelope = meta.get("envelope") or {}
    event = meta.get("system_event") or {}

    def text(value) -> str:
        return value if isinstance(value, str) else ""

    message_id = text(conversation.get("message_id")) or text(meta.get("message_id"))
    sender_id = (
        text(conversation.get("sender_id"))
        or text(sender.get("id"))
        or text(event.get("sender"))
        or text(meta.get("speaker"))
    )
    envelope_from = text(envelope.get("from"))
    candidates = [message_id, sender_id, text(conversation.get("group_subject")), text(conversation.get("chat_id"))]
    from_feishu = envelope.get("channel") in ("Feishu", "Lark") or event.get("channel") in ("Feishu", "Lark")
    if not (from_feishu or any(c.startswith(_FEISHU_PREFIXES) for c in candidates)):
        return None
    chat_id = ""
    for value in (
        text(conversation.get("chat_id")),
        text(conversation.get("group_subject")),
        text(conversation.get("conversation_label")),
        text(event.get("chat")),
        envelope_from,
    ):
        match = _FEISHU_CHAT.search(value)
        if match:
            chat_id = match.group(0)
            break
    if not sender_id and envelope_from:
        sender_id = envelope_from.split(":")[-1]
    is_group = bool(conversation.get("is_group_chat")) or bool(chat_id)
    return {
        "chat_type": "group" if is_group else "direct",
        "conversation_id": chat_id if is_group and chat_id else sender_id,
        "chat_id": chat_id or None,
        "sender_id": sender_id or None,
        "sender": text(conversation.get("sender")) or text(sender.get("name")) or None,
        "message_id": message_id or None,
    }


class OpenClawParser(LogParser):
    tool = "openclaw"

    def load(self, carry: dict) -> None:
        self.model: str | None = carry.get("model")
        self.provider: str | None = carry.get("provider")
        if self.source.project_dir and not self.session.metadata.get("agent"):
            self.session.metadata["agent"] = self.source.project_dir

    def save(self) -> dict:
        return {"model": self.model, "provider": self.provider}

    def finish(self, *, flush: bool) -> int:
        if not self.session.agent_session_id:
            self.session.agent_session_id = self.source.file_key
            if self.messages:
                self.issue(0, "no session header read (and no carry): the session id is the file name", "warning")
        return 0

    def _session_key(self) -> str:
        return self.session.agent_session_id or self.source.file_key

    def feed(self, line: JsonLine) -> None:
        data = line.data
        kind = data.get("type")
        self.session.seen_at(parse_timestamp(data.get("timestamp")))
        if kind == "session":
            self._header(data)
        elif kind == "message" and isinstance(data.get("message"), dict):
            self._message(line, data, data["message"])
        elif kind == "model_change":
            model = data.get("modelId") or data.get("model")
            if isinstance(model, str) and model:
                self.model = model
                self.provider = data.get("provider") if isinstance(data.get("provider"), str) else self.provider
                self.session.metadata.setdefault("models", [])
                if model not in self.session.metadata["models"]:
                    self.session.metadata["models"].append(model)
        elif kind == "session_info" and isinstance(data.get("name"), str):
            self.session.metadata["title"] = data["name"]
        elif kind in _SYSTEM_ENTRY_KINDS:
            content = data.get("summary") or data.get("content") or ""
            self._emit(
                line.number,
                data,
                "system",
                block_text(content),
                metadata=self._metadata(data, kind=kind, tokens_before=as_int(data.get("tokensBefore"))),
            )
        # thinking_level_change, custom, label: state, no message.

    def _header(self, data: dict) -> None:
        session = self.session
        if isinstance(data.get("id"), str) and data["id"]:
            session.agent_session_id = data["id"]
        if isinstance(data.get("cwd"), str):
            session.cwd = data["cwd"]
            session.project = project_of(data["cwd"])
        if data.get("version") is not None:
            session.version = str(data["version"])
        parent = data.get("parentSession") or data.get("branchedFrom")
        if isinstance(parent, str) and parent:
            # A fork names its parent's id, or the parent transcript's path.
            session.metadata["parent_session"] = parent
            session.parent_agent_session_id = parent.rsplit("/", 1)[-1].removesuffix(".jsonl")
        if isinstance(data.get("modelId"), str):
            self.model = data["modelId"]
            self.provider = data.get("provider") if isinstance(data.get("provider"), str) else None
        session.started_at = parse_timestamp(data.get("timestamp")) or session.started_at

    def _metadata(self, data: dict, **extra) -> dict:
        metadata = {"tool": self.tool}
        if data.get("id"):
            metadata["entry_id"] = data["id"]
        if data.get("parentId"):
            metadata["parent_id"] = data["parentId"]
        metadata.update({key: value for key, value in extra.items() if value is not None})
        return metadata

    def _emit(self, line: int, data: dict, role: str, content: str, **fields) -> ParsedMessage:
        message = ParsedMessage(
            role=role,
            content=content,
            external_id=self.own_id_or_line_id(data.get("id"), line),
            line=line,
            created_at=parse_timestamp(data.get("timestamp")),
            conversation=self.conversation,
            **fields,
        )
        self.messages.append(message)
        return message

    def _message(self, line: JsonLine, data: dict, message: dict) -> None:
        role = message.get("role")
        if role == "user":
            self._user(line, data, message)
        elif role == "assistant":
            self._assistant(line, data, message)
        elif role == "toolResult":
            metadata = self._metadata(
                data,
                kind="tool_result",
                tool_call_id=message.get("toolCallId"),
                is_error=message.get("isError") or None,
            )
            self._emit(
                line.number,
                data,
                "toolResult",
                block_text(message.get("content")),
                tool_name=message.get("toolName") if isinstance(message.get("toolName"), str) else None,
                metadata=metadata,
            )
        elif role in _SYSTEM_ROLES:
            content = message.get("content") or message.get("summary") or ""
            if role == "bashExecution":
                content = join_texts([f"$ {message.get('command', '')}", block_text(message.get("output"))], "\n")
            self._emit(
                line.number,
                data,
                "system",
                block_text(content),
                metadata=self._metadata(data, kind=_SYSTEM_ROLES[role]),
            )
        else:
            self.issue(line.number, f"unknown message role {role!r}; line skipped", "warning")

    def _user(self, line: JsonLine, data: dict, message: dict) -> None:
        text = block_text(message.get("content"))
        entry_id = data.get("id")
        self.conversation = (
            f"openclaw:{self._session_key()}:{entry_id if isinstance(entry_id, str) and entry_id else line.number}"
        )
        inbound = parse_inbound_metadata(text)
        feishu = feishu_context(inbound) if inbound else None
        metadata = self._metadata(data, kind="prompt")
        if inbound:
            metadata["inbound"] = {key: value for key, value in inbound.items() if key != "body"}
            metadata["body"] = inbound["body"]
        if feishu:
            metadata["feishu"] = feishu
            if feishu["sender_id"] and not self.session.user:
                self.session.user = feishu["sender_id"]
        self._emit(
            line.number,
            data,
            "user",
            text,
            feishu_conversation_id=(feishu or {}).get("conversation_id") or None,
            metadata=metadata,
        )

    def _assistant(self, line: JsonLine, data: dict, message: dict) -> None:
        if self._no_call(line, data, message):
            return
        texts, thinking, calls = [], [], []
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                thinking.append(block["thinking"])
            elif kind == "toolCall":
                calls.append({"id": block.get("id"), "name": block.get("name"), "arguments": block.get("arguments")})
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
        input_tokens, output_tokens = as_int(usage.get("input")), as_int(usage.get("output"))
        model = message.get("model") if isinstance(message.get("model"), str) else self.model
        provider = message.get("provider") if isinstance(message.get("provider"), str) else self.provider
        stop_reason = message.get("stopReason") if isinstance(message.get("stopReason"), str) else None
        metadata = self._metadata(data, kind="response", provider=provider, api=message.get("api"))
        if usage:
            metadata["usage"] = usage
        error = ""
        if stop_reason == "error":
            # The call failed: an error message that is the failed call's request, with the usage it reports (the
            # output limit hit, a stream broken after tokens were billed) or none (a rate limit, an overload). Each
            # attempt is its own entry (OpenClaw's retries keep the failed message in the transcript). No request
            # when no answer came: an error that names a connection failure and no usage (failures.py).
            error = message.get("errorMessage") if isinstance(message.get("errorMessage"), str) else ""
            error = error or join_texts(texts) or "API error"
            metadata.update(kind="api_error", error=error, partial_text=join_texts(texts) or None)
            metadata = {key: value for key, value in metadata.items() if value is not None}
            billed = any(as_int(usage.get(name)) for name in ("input", "output", "cacheRead", "cacheWrite"))
            if not billed and not provider_answered(None, error):
                metadata["no_answer"] = True
                self._emit(line.number, data, "error", error, model=model, metadata=metadata)
                return
            metadata["failed_call"] = True
        response_id = message.get("responseId")
        request_id = self.request_key(
            response_id
            if isinstance(response_id, str) and response_id
            else self.own_id_or_line_id(data.get("id"), line.number)
        )
        self._emit(
            line.number,
            data,
            "error" if error else "assistant",
            error or join_texts(texts),
            thinking=join_texts(thinking) or None,
            tool_calls=calls or None,
            request_id=request_id,
            model=model,
            finish_reason=stop_reason,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=as_int(usage.get("cacheRead")),
            cache_creation_tokens=as_int(usage.get("cacheWrite")),
            total_tokens=total_of(input_tokens, output_tokens),
            # The cost pi-ai computed from its own price table (`usage.cost.total`, USD).
            reported_cost_nano_usd=nano_usd(cost.get("total")) if isinstance(cost := usage.get("cost"), dict) else None,
            metadata=metadata,
        )

    def _no_call(self, line: JsonLine, data: dict, message: dict) -> bool:
        """An assistant message OpenClaw wrote without calling a model, as a `system` line (no request, no
        tokens: its zero usage stays in metadata); False for a real response."""
        kind = no_call_kind(message)
        if kind is None:
            return False
        metadata = self._metadata(data, kind=kind, model=message.get("model"), provider=message.get("provider"))
        if isinstance(message.get("usage"), dict):
            metadata["usage"] = message["usage"]
        content = message.get("content")
        calls = [
            {"id": block.get("id"), "name": block.get("name"), "arguments": block.get("arguments")}
            for block in (content if isinstance(content, list) else [])
            if isinstance(block, dict) and block.get("type") == "toolCall"
        ]  # a gateway-injected row can replay tool calls a code-mode tool made (no model call of its own)
        self._emit(line.number, data, "system", block_text(content), tool_calls=calls or None, metadata=metadata)
        return True
