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
"""

from __future__ import annotations

import json
import re

from sessions_app.importers.base import (
    JsonLine,
    LogParser,
    ParsedMessage,
    as_int,
    block_text,
    join_texts,
    parse_timestamp,
    project_of,
    total_of,
)

_BLOCK = re.compile(
    r"(?P<label>Conversation info|Sender) \(untrusted metadata\):\s*```json\s*\n(?P<json>.*?)\n\s*```", re.DOTALL
)
_ANY_BLOCK = re.compile(r"^[^\n]*\((?:untrusted[^)]*)\):\s*```json\s*\n.*?\n\s*```\s*", re.DOTALL | re.MULTILINE)
_ENVELOPE = re.compile(r"^\[(?P<channel>Feishu|Lark)(?: Group)? (?P<from>[^\]\s]+)[^\]]*\]\s*", re.MULTILINE)
_MESSAGE_ID_TAG = re.compile(r"^\[message_id: (?P<id>[^\]\s]+)\]\s*", re.MULTILINE)
_FEISHU_CHAT = re.compile(r"\boc_[0-9A-Za-z]+")
_FEISHU_PREFIXES = ("om_", "oc_", "ou_", "on_")
_SYSTEM_ENTRY_KINDS = {"compaction", "branch_summary", "custom_message", "reset"}
_SYSTEM_ROLES = {"bashExecution": "shell", "custom": "custom_message", "branchSummary": "branch_summary"}


def parse_inbound_metadata(text: str) -> dict:
    """The channel metadata OpenClaw wrote into an inbound user message: the JSON blocks, an envelope and a
    `[message_id: ...]` tag, plus the body without them."""
    found: dict = {}
    for match in _BLOCK.finditer(text):
        try:
            data = json.loads(match.group("json"))
        except ValueError:
            continue
        if isinstance(data, dict):
            found["conversation" if match.group("label") == "Conversation info" else "sender"] = data
    body = _ANY_BLOCK.sub("", text).strip()
    envelope = _ENVELOPE.search(body)
    if envelope:
        found["envelope"] = {"channel": envelope.group("channel"), "from": envelope.group("from")}
        body = body[: envelope.start()] + body[envelope.end() :]
    tag = _MESSAGE_ID_TAG.search(body)
    if tag:
        found["message_id"] = tag.group("id")
        body = body[: tag.start()] + body[tag.end() :]
    body = body.strip()
    sender_id = (found.get("conversation") or {}).get("sender_id") or (found.get("sender") or {}).get("id")
    if isinstance(sender_id, str) and sender_id and body.startswith(f"{sender_id}: "):
        body = body[len(sender_id) + 2 :]
    if found:
        found["body"] = body
    return found


def feishu_context(meta: dict) -> dict | None:
    """Feishu ids from parsed inbound metadata, or None when the message did not come from Feishu."""
    conversation = meta.get("conversation") or {}
    sender = meta.get("sender") or {}
    envelope = meta.get("envelope") or {}

    def text(value) -> str:
        return value if isinstance(value, str) else ""

    message_id = text(conversation.get("message_id")) or text(meta.get("message_id"))
    sender_id = text(conversation.get("sender_id")) or text(sender.get("id"))
    envelope_from = text(envelope.get("from"))
    candidates = [message_id, sender_id, text(conversation.get("group_subject")), text(conversation.get("chat_id"))]
    if not (envelope.get("channel") in ("Feishu", "Lark") or any(c.startswith(_FEISHU_PREFIXES) for c in candidates)):
        return None
    chat_id = ""
    for value in (
        text(conversation.get("chat_id")),
        text(conversation.get("group_subject")),
        text(conversation.get("conversation_label")),
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
        if stop_reason == "error":
            # The call failed: an error message, not a response (and not counted as a request).
            error = message.get("errorMessage") if isinstance(message.get("errorMessage"), str) else ""
            metadata["kind"] = "api_error"
            self._emit(
                line.number, data, "error", error or join_texts(texts) or "API error", model=model, metadata=metadata
            )
            return
        response_id = message.get("responseId")
        request_id = self.request_key(
            response_id
            if isinstance(response_id, str) and response_id
            else self.own_id_or_line_id(data.get("id"), line.number)
        )
        self._emit(
            line.number,
            data,
            "assistant",
            join_texts(texts),
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
            metadata=metadata,
        )
