"""What every agent-log parser shares: the normalised output, the parser base class and small helpers.

Every tool's parser (`<tool>/parser.py`) turns the lines of one log file into `ParsedMessage`s
shaped like the body of `POST /api/v1/sessions/{id}/messages/`, so the importer can hand them to the same
`messages_append` service the API uses. Nothing here touches the database or reads a file:
`jsonl` reads the lines, `dispatch.parse_file` picks the parser and runs it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from sessions_app.schema import MAX_REPORTED_COST_NANO_USD, MAX_TOKENS, MESSAGE_TEXT_LIMITS, NANO_PER_USD, TOKEN_FIELDS

# -- the normalised output ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ParseIssue:
    """Something wrong in a file. `line` is 1-based; 0 means the file as a whole.

    `level` is "error" for a line that was skipped (corrupt JSON, not an object) and "warning" for data
    that was read with a caveat (bytes that are not UTF-8, a last line left for the next import)."""

    path: str
    line: int
    message: str
    level: str = "error"


@dataclass
class ParsedSession:
    """One tool-level session as the log describes it.

    `agent_session_id` is the tool's own id for this file's session. A sub-agent file has its own id
    (`agent-<id>`) and names its parent in `parent_agent_session_id`; its messages belong to the parent's
    Open ACE session, which `attributed_session_id` gives."""

    tool: str
    agent_session_id: str
    project: str = ""
    cwd: str = ""
    git_branch: str = ""
    version: str = ""
    user: str = ""  # a hint at who the human is (e.g. a Feishu open_id), when the log says
    started_at: datetime | None = None
    ended_at: datetime | None = None
    parent_agent_session_id: str = ""
    is_subagent: bool = False
    metadata: dict = field(default_factory=dict)

    @property
    def attributed_session_id(self) -> str:
        return self.parent_agent_session_id or self.agent_session_id

    def to_carry(self) -> dict:
        return {
            "agent_session_id": self.agent_session_id,
            "project": self.project,
            "cwd": self.cwd,
            "git_branch": self.git_branch,
            "version": self.version,
            "user": self.user,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "parent_agent_session_id": self.parent_agent_session_id,
            "is_subagent": self.is_subagent,
            "metadata": self.metadata,
        }

    @classmethod
    def from_carry(cls, tool: str, data: dict) -> ParsedSession:
        return cls(
            tool=tool,
            agent_session_id=data.get("agent_session_id") or "",
            project=data.get("project") or "",
            cwd=data.get("cwd") or "",
            git_branch=data.get("git_branch") or "",
            version=data.get("version") or "",
            user=data.get("user") or "",
            started_at=parse_timestamp(data.get("started_at")),
            ended_at=parse_timestamp(data.get("ended_at")),
            parent_agent_session_id=data.get("parent_agent_session_id") or "",
            is_subagent=bool(data.get("is_subagent")),
            metadata=dict(data.get("metadata") or {}),
        )

    def seen_at(self, when: datetime | None) -> None:
        if when is None:
            return
        if self.started_at is None or when < self.started_at:
            self.started_at = when
        if self.ended_at is None or when > self.ended_at:
            self.ended_at = when


@dataclass
class ParsedMessage:
    """One message in the shape of the messages API body, plus where it came from.

    `conversation` is an explicit conversation reference: the ingest creates the conversation the first
    time it sees a reference, so rounds come out the same whichever order or batches files are imported
    in. It is None before the first real prompt of a file (the ingest then uses the session's current
    conversation). `line` is the file line the message starts at."""

    role: str
    content: str
    external_id: str
    line: int
    created_at: datetime | None = None
    conversation: str | None = None
    auth_type: str | None = None
    request_id: str | None = None
    model: str | None = None
    thinking: str | None = None
    tool_calls: list | None = None
    tool_name: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    cache_creation_5m_tokens: int | None = None
    cache_creation_1h_tokens: int | None = None
    total_tokens: int | None = None
    reported_cost_nano_usd: int | None = None  # what the tool said the call cost (nano_usd() of its figure)
    finish_reason: str | None = None
    feishu_conversation_id: str | None = None
    metadata: dict = field(default_factory=dict)
    is_sidechain: bool = False
    is_meta: bool = False
    is_subagent: bool = False

    def to_carry(self) -> dict:
        """A JSON-serialisable copy, for a message held in the carry until the messages before it are done."""
        data = asdict(self)
        data["created_at"] = _iso(self.created_at)
        return data

    @classmethod
    def from_carry(cls, data: dict) -> ParsedMessage:
        return cls(**{**data, "created_at": parse_timestamp(data.get("created_at"))})

    def to_ingest(self) -> dict:
        """The JSON body item for the messages API / `messages_append` (fields left unset are omitted).

        Text columns cannot hold NUL, so it becomes U+FFFD here; in the JSON fields (tool calls, metadata)
        the message service's jsonb encoder does the same."""
        item: dict[str, Any] = {"role": self.role, "content": _clean_text(self.content)}
        if self.created_at is not None:
            item["created_at"] = _iso(self.created_at)
        for name in ("external_id", "conversation", "auth_type", "request_id", "model", "tool_name"):
            value = getattr(self, name)
            if value:
                item[name] = _clean_text(value[: MESSAGE_TEXT_LIMITS[name]])
        if self.thinking:
            item["thinking"] = _clean_text(self.thinking)
        if self.tool_calls:
            item["tool_calls"] = self.tool_calls
        for name in TOKEN_FIELDS:
            value = getattr(self, name)
            if value is not None and value <= MAX_TOKENS:  # more is no count (the API's bound, schema.MAX_TOKENS)
                item[name] = value
        cost = self.reported_cost_nano_usd
        if cost is not None and 0 <= cost <= MAX_REPORTED_COST_NANO_USD:
            item["reported_cost_usd"] = usd_of_nano(cost)  # as the messages API takes it
        for name in ("finish_reason", "feishu_conversation_id"):
            value = getattr(self, name)
            if value:
                item[name] = _clean_text(value[: MESSAGE_TEXT_LIMITS[name]])
        metadata = dict(self.metadata)
        metadata["line"] = self.line
        for flag, key in ((self.is_sidechain, "sidechain"), (self.is_subagent, "subagent"), (self.is_meta, "meta")):
            if flag:
                metadata[key] = True
        item["metadata"] = metadata
        return item


@dataclass
class ParseResult:
    session: ParsedSession | None
    messages: list[ParsedMessage]
    issues: list[ParseIssue]
    end_offset: int
    lines_read: int
    carry: dict = field(default_factory=dict)
    tool: str | None = None
    pending: int = 0  # responses in `messages` still streaming: open in `carry`, emitted again as they grow
    complete: bool = True  # False when `max_bytes` stopped the read before the end of the file

    def ingest_items(self) -> list[dict]:
        return [message.to_ingest() for message in self.messages]

    @property
    def errors(self) -> list[ParseIssue]:
        return [issue for issue in self.issues if issue.level == "error"]


# -- what a tool parser looks like ---------------------------------------------------------------------


@dataclass
class JsonLine:
    """One complete line of a log, as `jsonl.JsonlReader` yields it and a parser is fed it."""

    number: int  # 1-based line number in the file
    end_offset: int  # byte offset just after this line (and its newline)
    data: dict


@dataclass(frozen=True)
class SourceFile:
    """A log file and what its path says (see detect.describe_layout)."""

    path: Path
    file_key: str  # a file-relative id for external ids of lines without an id of their own
    is_subagent: bool = False
    parent_session_id: str = ""
    agent_id: str = ""
    project_dir: str = ""


class LogParser:
    """Base of the tool parsers: feed it lines in order, then `finish`, then read `messages` and `carry()`.

    `read_to_end` is False in `finish` when the read stopped at a byte budget with more lines after it:
    a response is then never taken as complete just because the bytes read ended with it.

    A tool that writes a session as one JSON document, rewritten whole as it grows (Gemini CLI's
    `session-*.json`, older Qwen Code's `chats/*.json`), sets `document = True`: `dispatch.parse_file` then
    reads the whole file every time it changed and calls `feed_document` once (no offsets, no carry); the
    import stores what is new and completes in place what was stored before (same `external_id`)."""

    tool = ""
    document = False

    def __init__(self, source: SourceFile, carry: dict):
        self.source = source
        self.read_to_end = True
        self.messages: list[ParsedMessage] = []
        self.issues: list[ParseIssue] = []
        self.conversation: str | None = carry.get("conversation")
        self.request_ids: dict[str, int] = dict(carry.get("request_ids") or {})
        saved = carry.get("session")
        self.session = (
            ParsedSession.from_carry(self.tool, saved) if saved else ParsedSession(tool=self.tool, agent_session_id="")
        )
        self.load(carry)

    # Hooks for the tool modules.
    def load(self, carry: dict) -> None:
        """Restore tool-specific state from the carry."""

    def save(self) -> dict:
        """Tool-specific state for the carry (JSON-serialisable)."""
        return {}

    def feed(self, line: JsonLine) -> None:
        raise NotImplementedError

    def feed_document(self, data: Any) -> None:
        """The whole file, parsed (for `document` tools)."""
        raise NotImplementedError

    def finish(self, *, flush: bool) -> int:
        """End of the bytes available now: emit what was read (a message that may still grow is emitted as far
        as it goes, and again, under the same `external_id`, when it grows). Returns how many of them are
        still streaming."""
        return 0

    # Shared helpers.
    def issue(self, line: int, message: str, level: str = "error") -> None:
        self.issues.append(ParseIssue(str(self.source.path), line, message, level))

    def request_key(self, provider_id: str) -> str:
        """The `request_id` of a call the log names `provider_id`, taken once per call, when the call opens.

        A request's identity is its id plus where it sits: providers do not all make ids unique
        (OpenAI-compatible servers such as Ollama answer `chatcmpl-<small number>`), so the first call of
        this file with an id keeps it as it is, and a later call that reuses it becomes `<id>#<n>` (n = 2,
        3, …). The same bytes always give the same ids, read in one pass or in many (the counts are in the
        carry), and a copy of a call in another file (a fork) keeps the plain id, so it still counts once."""
        key = hashlib.blake2b(provider_id.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
        seen = self.request_ids.get(key, 0) + 1
        self.request_ids[key] = seen
        return provider_id if seen == 1 else f"{provider_id}#{seen}"

    def line_id(self, line: int) -> str:
        return f"{self.source.file_key}:{line}"

    def own_id_or_line_id(self, value: Any, line: int) -> str:
        """An entry's own id (a non-empty string), else the id of the line it is on."""
        return value if isinstance(value, str) and value else self.line_id(line)

    def name_subagent_session_from_path(self) -> None:
        """A sub-agent file's session as its path names it: its own id (`agent-<id>`, else the file key) and
        its parent's."""
        source = self.source
        self.session.agent_session_id = f"agent-{source.agent_id}" if source.agent_id else source.file_key
        self.session.parent_agent_session_id = source.parent_session_id
        self.session.is_subagent = True

    def note_session_id(self, session_id: Any) -> None:
        """A line's session id (Claude Code and Qwen Code write it on every line): the session's own id, or,
        in a sub-agent file, its parent's."""
        session = self.session
        if isinstance(session_id, str) and session_id:
            if session.is_subagent:
                if not session.parent_agent_session_id and session_id != session.agent_session_id:
                    session.parent_agent_session_id = session_id
            elif not session.agent_session_id:
                session.agent_session_id = session_id

    def line_metadata(self, data: dict, ids: tuple[tuple[str, str], ...], extra: dict) -> dict:
        """A message's metadata in the Claude Code family of logs (Claude Code, Qwen Code): the tool, the line's
        own ids that it has (`ids`: (their key, our name)), the sidechain and sub-agent flags, then `extra`
        (None values left out)."""
        metadata = {"tool": self.tool}
        for key, name in ids:
            if data.get(key):
                metadata[name] = data[key]
        if data.get("isSidechain"):
            metadata["sidechain"] = True
        if self.source.is_subagent:
            metadata["subagent"] = True
        metadata.update({key: value for key, value in extra.items() if value is not None})
        return metadata

    def carry(self) -> dict:
        state = self.save()
        state["conversation"] = self.conversation
        if self.request_ids:
            state["request_ids"] = self.request_ids
        state["session"] = self.session.to_carry()
        return state


# -- small shared helpers ----------------------------------------------------------------------------

# An id that is a word and a small number (Ollama's `chatcmpl-<0..998>`) is a counter, not a call's identity.
_COUNTER_ID = re.compile(r"[A-Za-z]+[-_]\d{1,6}")


def call_id(provider_id: str, inputs: Iterable[int | None]) -> str:
    """The id a call is known by across the files of a session, for `LogParser.request_key`. A counter-like id
    can name another call in a sub-agent's file, where the per-file count does not reach, so it takes the
    input side of the call's usage too (`chatcmpl-17@7861/0/0`: input, cache read, cache write tokens): a
    sub-agent's copy of its parent's call (the same id, the same input) still counts once, and two calls
    that drew the same number do not merge."""
    inputs = list(inputs)
    if not _COUNTER_ID.fullmatch(provider_id) or all(value is None for value in inputs):
        return provider_id
    return provider_id + "@" + "/".join("" if value is None else str(value) for value in inputs)


def nano_usd(value: Any) -> int | None:
    """A cost a tool reported, in USD (a number, or a numeric string), as whole nano-dollars (exact: read through its
    decimal text, so 0.1 is 100000000); None for anything else, negative or not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount < 0:
        return None
    nano = int((amount * NANO_PER_USD).to_integral_value(rounding=ROUND_HALF_UP))
    return nano if nano <= MAX_REPORTED_COST_NANO_USD else None


def usd_of_nano(nano: int) -> str:
    """Whole nano-dollars as a decimal string of USD, exactly (4200000 → "0.004200000")."""
    return format(Decimal(nano).scaleb(-9), "f")


def parse_timestamp(value: Any) -> datetime | None:
    """ISO-8601 strings (with `Z` or an offset) and epoch numbers (seconds or milliseconds), as UTC."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return None
        seconds = value / 1000 if abs(value) > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        return _parse_iso(value)
    return None


@functools.lru_cache(maxsize=256)
def _parse_iso(value: str) -> datetime | None:
    # Cached: each line's timestamp is read for the session's span and again for its message.
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


MAX_COUNT = 2**53  # beyond this a number is not a count (nor exact as JSON); tokens: MAX_TOKENS (to_ingest)


def as_int(value: Any) -> int | None:
    """A non-negative token count, or None when the value is not a number (or an absurd one)."""
    if isinstance(value, bool) or value is None:
        count = None
    elif isinstance(value, int):
        count = max(value, 0)
    elif isinstance(value, float) and math.isfinite(value):
        count = max(int(value), 0)
    elif isinstance(value, str) and value.strip().isdigit():
        count = int(value.strip())
    else:
        count = None
    return count if count is None or count <= MAX_COUNT else None


def total_of(input_tokens: int | None, output_tokens: int | None) -> int | None:
    """A response's total when the log gives none: input + output (cache reads and writes are not in it)."""
    if input_tokens is None and output_tokens is None:
        return None
    return (input_tokens or 0) + (output_tokens or 0)


def project_of(cwd: str) -> str:
    """The project a working directory names: its last part (`/`- or `\\`-separated)."""
    return cwd.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


MAX_OPEN_TOOL_CALLS = 500  # tool calls remembered while their results have not come: the oldest go first


def remember_tool_name(tool_names: dict[str, str], call_id: Any, name: Any) -> None:
    """Note a tool call's name by its id, for the result that names only the id."""
    if isinstance(call_id, str) and isinstance(name, str):
        tool_names[call_id] = name
        while len(tool_names) > MAX_OPEN_TOOL_CALLS:
            tool_names.pop(next(iter(tool_names)))


def join_texts(parts: Iterable[str | None], separator: str = "\n\n") -> str:
    return separator.join(part for part in parts if part)


def block_text(content: Any) -> str:
    """The text of a message content: a string, or a list of blocks whose text blocks are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind in (None, "text", "input_text", "output_text") and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif kind == "image" or kind == "input_image":
                    texts.append("[image]")
                elif kind == "document":
                    texts.append("[document]")
        return join_texts(texts, "\n")
    if isinstance(content, dict):
        return block_text([content])
    return str(content)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _clean_text(value: str) -> str:
    # PostgreSQL text and jsonb cannot hold NUL.
    return value.replace("\x00", "\ufffd") if "\x00" in value else value
