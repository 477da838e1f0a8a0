"""The shared core of the agent-log importers: reading JSONL incrementally and the normalised output.

Every tool module (claude_code, qwen_code, openclaw) turns the lines of one log file into `ParsedMessage`s
shaped like the body of `POST /api/v1/sessions/{id}/messages/`, so the importer can hand them to the same
`messages_append` service the API uses. Nothing here touches the database.

Incremental imports: `parse_file` reads from a byte offset and returns the offset just after the last
line it consumed plus a small JSON-serialisable `carry` dict. Store both; pass them back next time. The
carry holds what must survive between two calls on one file (the session header, the current
conversation, a streamed response whose lines straddle the offset, unresolved tool calls), so parsing a
file in several steps gives exactly the messages that one pass gives. See docs/accounting.md.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from sessions_app.schema import MESSAGE_TEXT_LIMITS, TOKEN_FIELDS

TOOLS = ("claude-code", "qwen-code", "openclaw")
CARRY_VERSION = 1


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
    total_tokens: int | None = None
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
            if value is not None:
                item[name] = value
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
    pending: int = 0  # streamed responses held in `carry` until their last line arrives (or flush=True)
    complete: bool = True  # False when `max_bytes` stopped the read before the end of the file

    def ingest_items(self) -> list[dict]:
        return [message.to_ingest() for message in self.messages]

    @property
    def errors(self) -> list[ParseIssue]:
        return [issue for issue in self.issues if issue.level == "error"]


# -- reading JSONL from an offset --------------------------------------------------------------------


@dataclass
class JsonLine:
    number: int  # 1-based line number in the file
    end_offset: int  # byte offset just after this line (and its newline)
    data: dict


class JsonlReader:
    """Yields the JSON objects of a file from a byte offset, one complete line at a time.

    A line counts as complete when it ends with a newline, or when it is the last bytes of the file and
    already a valid JSON object. A last line that is neither is a line still being written: it is not
    consumed, so `end_offset` stays before it and a later import reads it whole. Blank lines are
    consumed silently; a line that is not JSON (or not an object) is reported and skipped; bytes that are
    not UTF-8 are decoded with replacement characters and reported as a warning.

    With `max_bytes`, reading stops at the first line that starts that many bytes or more after
    `start_offset` (`stopped_early` is then True): the importer reads a big file in chunks."""

    def __init__(
        self,
        path: Path,
        *,
        start_offset: int = 0,
        first_line: int = 1,
        line_open: bool = False,
        max_bytes: int | None = None,
    ):
        self.path = path
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.next_line = first_line
        self.lines_read = 0
        self.max_bytes = max_bytes
        self.stopped_early = False
        self.issues: list[ParseIssue] = []
        # The previous read consumed a last line that had no newline yet: the newline that ends it is
        # not a line of its own (so line numbers stay the same however the file is read).
        self.line_open = line_open

    def _issue(self, line: int, message: str, level: str = "error") -> None:
        self.issues.append(ParseIssue(str(self.path), line, message, level))

    def __iter__(self) -> Iterator[JsonLine]:
        with self.path.open("rb") as handle:
            handle.seek(self.start_offset)
            offset = self.start_offset
            for raw in handle:
                if self.max_bytes is not None and offset - self.start_offset >= self.max_bytes:
                    self.stopped_early = True
                    return
                if self.line_open:
                    self.line_open = False
                    if raw in (b"\n", b"\r\n"):
                        offset += len(raw)
                        self.end_offset = offset
                        continue
                number = self.next_line
                complete = raw.endswith(b"\n")
                data = _fast_loads(raw) if complete else None
                fast = data is not None
                replaced = False
                if data is None:
                    text, replaced = _decode(raw)
                    stripped = text.strip().lstrip("\ufeff")
                    if not complete:
                        data = _loads_object(stripped) if stripped else None
                        if data is None:
                            if stripped:
                                self._issue(
                                    number,
                                    f"line {number} is incomplete (no newline and not yet valid JSON); "
                                    "left unread for the next import",
                                    "warning",
                                )
                            return
                offset += len(raw)
                self.end_offset = offset
                self.next_line += 1
                self.lines_read += 1
                self.line_open = not complete
                if replaced:
                    self._issue(number, "bytes that are not UTF-8 were replaced with U+FFFD", "warning")
                if data is None:
                    if not stripped:
                        continue
                    try:
                        data = json.loads(stripped)
                    except ValueError as error:
                        self._issue(number, f"not valid JSON ({error.msg} at column {error.colno}); line skipped")
                        continue
                if not isinstance(data, dict):
                    self._issue(number, f"a JSON {type(data).__name__}, not an object; line skipped")
                    continue
                if not fast and _SURROGATE_ESCAPE.search(stripped):
                    # Half of a character (a tool cut a string between the two UTF-16 halves of an emoji):
                    # no UTF-8 text can hold it, so it would fail the write of the whole batch.
                    cleaned = _without_lone_surrogates(data)
                    if cleaned != data:
                        data = cleaned
                        self._issue(
                            number, "a character cut in half (a lone UTF-16 surrogate) was replaced with U+FFFD",
                            "warning",
                        )  # fmt: skip
                yield JsonLine(number=number, end_offset=offset, data=data)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(value: Any) -> Any:
    """`value` with every lone UTF-16 surrogate (json reads a valid pair as one character) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(key): _without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    return value


def _fast_loads(raw: bytes) -> Any:
    """orjson, at over twice json's speed on these logs, for the common case: a valid UTF-8 line of standard
    JSON. None when it cannot (a blank line, NaN, integers over 64 bits, lone surrogates, bytes that are
    not UTF-8, a byte order mark, not JSON): `json` then reads the line exactly as before."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _decode(raw: bytes) -> tuple[str, bool]:
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), True


def _loads_object(text: str) -> dict | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def count_lines_before(path: Path, offset: int) -> int:
    """How many newlines the first `offset` bytes hold (the line number before `offset`, when no carry says)."""
    count = 0
    remaining = offset
    with path.open("rb") as handle:
        while remaining > 0:
            chunk = handle.read(min(remaining, 1 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
    return count


def read_head(path: Path, limit: int = 25) -> list[str]:
    """The first `limit` complete lines of a file (decoded leniently), for detection. A last line still
    being written (no newline, not yet valid JSON) is left out."""
    lines: list[str] = []
    try:
        with path.open("rb") as handle:
            for raw in handle:
                text = _decode(raw)[0]
                if not raw.endswith(b"\n") and _loads_object(text.strip().lstrip("\ufeff")) is None:
                    break
                lines.append(text)
                if len(lines) >= limit:
                    break
    except OSError:
        return []
    return lines


# -- what a tool parser looks like ---------------------------------------------------------------------


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
    a response is then never taken as complete just because the bytes read ended with it."""

    tool = ""

    def __init__(self, source: SourceFile, carry: dict):
        self.source = source
        self.read_to_end = True
        self.messages: list[ParsedMessage] = []
        self.issues: list[ParseIssue] = []
        self.conversation: str | None = carry.get("conversation")
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

    def finish(self, *, flush: bool) -> int:
        """End of the bytes available now. Returns how many responses stay pending in the carry."""
        return 0

    # Shared helpers.
    def issue(self, line: int, message: str, level: str = "error") -> None:
        self.issues.append(ParseIssue(str(self.source.path), line, message, level))

    def line_id(self, line: int) -> str:
        return f"{self.source.file_key}:{line}"

    def carry(self) -> dict:
        state = self.save()
        state["conversation"] = self.conversation
        state["session"] = self.session.to_carry()
        return state


def parse_file(
    path: str | Path,
    *,
    start_offset: int = 0,
    tool: str | None = None,
    carry: dict | None = None,
    flush: bool = False,
    max_bytes: int | None = None,
) -> ParseResult:
    """Parse one agent log from `start_offset`.

    `tool` forces the format ("claude-code", "qwen-code", "openclaw"); otherwise it is detected from the
    path and the first lines. `carry` is what the previous call returned for the same file and offset.
    `flush=True` also emits a streamed response whose last line has not arrived yet (use it when the
    file is known to be finished, e.g. its session ended or it has not changed for a while).
    `max_bytes` reads a chunk: it stops at the first line starting `max_bytes` or more after
    `start_offset` (`ParseResult.complete` is then False and `flush` is ignored); the next call continues
    from `end_offset` with the returned carry, and the chunks together give what one pass gives."""
    from sessions_app.importers.detect import PARSERS, describe_layout, explain_detection

    path = Path(path)
    carry = dict(carry or {})
    issues: list[ParseIssue] = []

    def failed(message: str, level: str = "error") -> ParseResult:
        issues.append(ParseIssue(str(path), 0, message, level))
        return ParseResult(None, [], issues, start_offset, 0, carry)

    if tool is not None and tool not in TOOLS:
        return failed(f"unknown tool {tool!r}; use one of {', '.join(TOOLS)}")
    try:
        size = path.stat().st_size
    except OSError as error:
        return failed(f"cannot read the file: {error.strerror or error}")
    if start_offset < 0 or start_offset > size:
        return failed(
            f"the saved offset {start_offset} is beyond the end of the file ({size} bytes): "
            "it was truncated or replaced; import it again from offset 0"
        )

    if carry:
        if carry.get("v", CARRY_VERSION) != CARRY_VERSION:
            issues.append(ParseIssue(str(path), 0, "the carry is from another parser version; ignored", "warning"))
            carry = {}
        elif "offset" in carry and carry["offset"] != start_offset:
            issues.append(
                ParseIssue(
                    str(path),
                    0,
                    f"the carry was saved at offset {carry['offset']}, not {start_offset}; ignored",
                    "warning",
                )
            )
            carry = {}

    layout = describe_layout(path)
    resolved = tool or carry.get("tool")
    if resolved is None:
        head = read_head(path)
        if not any(line.strip() for line in head):
            # Nothing to judge by yet: an empty file, or one whose first line is still being written.
            return failed("not a recognised agent log yet: the file has no complete line", "warning")
        detection = explain_detection(path, head)
        if detection.tool is None:
            return failed(f"not a recognised agent log: {detection.reason}")
        resolved = detection.tool

    if "line" in carry:
        first_line = int(carry["line"]) + 1
    else:
        first_line = count_lines_before(path, start_offset) + 1 if start_offset else 1
    if start_offset:
        with path.open("rb") as handle:
            handle.seek(start_offset - 1)
            if handle.read(1) != b"\n":
                issues.append(
                    ParseIssue(str(path), first_line, f"offset {start_offset} is not at a line start", "warning")
                )

    source = SourceFile(
        path=path,
        file_key=layout.file_key,
        is_subagent=layout.is_subagent,
        parent_session_id=layout.parent_session_id,
        agent_id=layout.agent_id,
        project_dir=layout.project_dir,
    )
    parser: LogParser = PARSERS[resolved](source, carry)
    reader = JsonlReader(
        path,
        start_offset=start_offset,
        first_line=first_line,
        line_open=bool(carry.get("line_open")),
        max_bytes=max_bytes,
    )
    for line in reader:
        parser.feed(line)
    parser.read_to_end = not reader.stopped_early
    pending = parser.finish(flush=flush and parser.read_to_end)

    issues.extend(reader.issues)
    issues.extend(parser.issues)
    issues.sort(key=lambda issue: issue.line)
    new_carry = parser.carry()
    new_carry.update(
        {
            "v": CARRY_VERSION,
            "tool": resolved,
            "offset": reader.end_offset,
            "line": reader.next_line - 1,
            "line_open": reader.line_open,
        }
    )
    return ParseResult(
        session=parser.session,
        messages=parser.messages,
        issues=issues,
        end_offset=reader.end_offset,
        lines_read=reader.lines_read,
        carry=new_carry,
        tool=resolved,
        pending=pending,
        complete=parser.read_to_end,
    )


# -- what the ingest will count ----------------------------------------------------------------------


def count_usage(messages: Iterable[ParsedMessage | dict]) -> dict[str, int]:
    """The counters the message ingest (services/messages.messages_append) derives from these messages,
    for a fresh session: requests, conversations, messages by role and tokens by kind.

    It mirrors the ingest's rules so an importer can print a summary and tests can assert totals: a
    message with a `request_id` or an `auth_type` is a request, messages sharing a `request_id` count
    once and their request keeps the largest value of each token kind; a token field left empty on a
    message without a request adds nothing; `total_tokens` defaults to input + output."""
    counters = {
        "requests": 0,
        "conversations": 0,
        "messages": 0,
        "message_user": 0,
        "message_assistant": 0,
        "message_toolresult": 0,
        "message_error": 0,
        "message_system": 0,
        **{name: 0 for name in TOKEN_FIELDS},
    }
    role_counter = {
        "user": "message_user",
        "assistant": "message_assistant",
        "toolResult": "message_toolresult",
        "error": "message_error",
        "system": "message_system",
    }
    requests: dict[str, dict[str, int]] = {}
    conversations: set[str] = set()
    seen_external: set[str] = set()
    for message in messages:
        item = message.to_ingest() if isinstance(message, ParsedMessage) else message
        external_id = item.get("external_id")
        if external_id:
            if external_id in seen_external:
                continue
            seen_external.add(external_id)
        counters["messages"] += 1
        counters[role_counter[item["role"]]] += 1
        ref = item.get("conversation")
        if ref:
            if ref not in conversations:
                conversations.add(ref)
                counters["conversations"] += 1
        elif item["role"] == "user":
            counters["conversations"] += 1
        tokens = {name: item.get(name) for name in TOKEN_FIELDS}
        if tokens["total_tokens"] is None and (
            tokens["input_tokens"] is not None or tokens["output_tokens"] is not None
        ):
            tokens["total_tokens"] = (tokens["input_tokens"] or 0) + (tokens["output_tokens"] or 0)
        request_id = item.get("request_id")
        if request_id or item.get("auth_type"):
            if not request_id:
                request_id = f"\0{len(requests)}"  # a request of its own
            best = requests.get(request_id)
            if best is None:
                counters["requests"] += 1
                best = requests[request_id] = {name: 0 for name in TOKEN_FIELDS}
            for name in TOKEN_FIELDS:
                grown = max(best[name], tokens[name] or 0)
                counters[name] += grown - best[name]
                best[name] = grown
        else:
            for name in TOKEN_FIELDS:
                counters[name] += tokens[name] or 0
    return counters


# -- small shared helpers ----------------------------------------------------------------------------


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


MAX_COUNT = 2**53  # more tokens than any model has read; beyond this a number is not a count (nor exact as JSON)


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
