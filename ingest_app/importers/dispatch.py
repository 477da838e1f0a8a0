"""`parse_file`: one agent log from a byte offset, through the parser of the tool that wrote it.

Incremental imports: `parse_file` reads from a byte offset and returns the offset just after the last
line it consumed plus a small JSON-serialisable `carry` dict. Store both; pass them back next time. The
carry holds what must survive between two calls on one file (the session header, the current
conversation, a streamed response whose lines straddle the offset, unresolved tool calls), so parsing a
file in several steps gives exactly the messages that one pass gives. See docs/accounting.md.

This module sits above the parsers: it imports `detect` and the `registry` (which imports every tool's
package), and the tools import only `tool`, `base` and `jsonl`, so nothing imports back.
"""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers import registry
from ingest_app.importers.base import LogParser, ParseIssue, ParseResult, SourceFile
from ingest_app.importers.detect import describe_layout, explain_detection, parser_for
from ingest_app.importers.jsonl import (
    JsonlReader,
    count_lines_before,
    load_document,
    log_size,
    open_log,
    read_head,
    tail_key,
)
from ingest_app.importers.limits import LogLimitExceeded, check_document_size

CARRY_VERSION = 1


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

    `tool` forces the format (a name of `registry.TOOLS`); otherwise it is detected from the
    path and the first lines. `carry` is what the previous call returned for the same file and offset.
    `flush=True` also emits a streamed response whose last line has not arrived yet (use it when the
    file is known to be finished, e.g. its session ended or it has not changed for a while).
    `max_bytes` reads a chunk: it stops at the first line starting `max_bytes` or more after
    `start_offset` (`ParseResult.complete` is then False and `flush` is ignored); the next call continues
    from `end_offset` with the returned carry, and the chunks together give what one pass gives.

    A file that passes a reading limit (`importers.limits`: a line too long, a compressed log that decompresses
    to too much) gives no messages and an error naming the limit, as a file no parser recognises does."""
    path = Path(path)
    carry = dict(carry or {})
    issues: list[ParseIssue] = []

    def failed(message: str, level: str = "error") -> ParseResult:
        issues.append(ParseIssue(str(path), 0, message, level))
        return ParseResult(None, [], issues, start_offset, 0, carry)

    if tool is not None and tool not in registry.NAMES:
        return failed(f"unknown tool {tool!r}; use one of {', '.join(registry.NAMES)}")
    source = registry.store_layout(path)
    if source is not None:  # a session of a store (OpenCode's database or storage folder)
        store_tool = registry.get(source.tool)
        if tool not in (None, store_tool.name):
            return failed(f"not a {tool} log: it is an {store_tool.label} session")
        return store_tool.store.parse(path, carry=carry, flush=flush)
    try:
        size = log_size(path)
    except OSError as error:
        return failed(f"cannot read the file: {error.strerror or error}")
    except ValueError as error:  # a compressed archive that cannot be decompressed
        return failed(str(error))
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
        try:
            head = read_head(path)
        except LogLimitExceeded as error:
            return failed(str(error))
        if not any(line.strip() for line in head):
            return _nothing_to_judge_yet(path, carry, issues)
        detection = explain_detection(path, head)
        if detection.tool is None:
            return failed(f"not a recognised agent log: {detection.reason}")
        resolved = detection.tool

    parser_class = parser_for(resolved, path)
    if parser_class.document:
        return _parse_document(path, parser_class, _source_file(path, layout), issues, carry.get("conversation"))

    if "line" in carry:
        first_line = int(carry["line"]) + 1
    else:
        first_line = count_lines_before(path, start_offset) + 1 if start_offset else 1
    if start_offset and not carry.get("line_open"):
        # (After a last line consumed before its newline, the offset is rightly just after its closing brace.)
        with open_log(path, start_offset - 1) as handle:
            if handle.read(1) != b"\n":
                issues.append(
                    ParseIssue(str(path), first_line, f"offset {start_offset} is not at a line start", "warning")
                )

    parser: LogParser = parser_class(_source_file(path, layout), carry)
    reader = JsonlReader(
        path,
        start_offset=start_offset,
        first_line=first_line,
        line_open=bool(carry.get("line_open")),
        max_bytes=max_bytes,
        reported_tail=carry.get("tail", ""),
    )
    try:
        for line in reader:
            parser.feed(line)
    except LogLimitExceeded as error:
        return failed(str(error))
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
    if reader.tail:
        new_carry["tail"] = reader.tail  # reported: the next read of the same unfinished line stays quiet
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


def stat_source(path: Path):
    """`path.stat()`, or for a store's session (an OpenCode session has no file of its own) what stands in for
    it: the bytes of its rows and its last update (`Store.stat`). Raises OSError."""
    stat = registry.source_stat(path)
    return stat if stat is not None else path.stat()


def is_document_log(path: str | Path, tool: str | None) -> bool:
    """Whether this file of the tool is one JSON document rewritten whole (read from the start each time)."""
    return tool in registry.NAMES and parser_for(tool, path).document


def _nothing_to_judge_yet(path: Path, carry: dict, issues: list[ParseIssue]) -> ParseResult:
    """An empty file, or one whose first line is still being written: nothing to judge by yet. Said once for
    the same bytes (the carry names them, as `JsonlReader.tail` does a cut last line), not at every scan of a
    file left that way; said again when they change."""
    tail = tail_key(0, path.read_bytes())
    if tail != carry.get("tail"):
        issues.append(
            ParseIssue(str(path), 0, "not a recognised agent log yet: the file has no complete line", "warning")
        )
    return ParseResult(None, [], issues, 0, 0, {"tail": tail})


def _source_file(path: Path, layout) -> SourceFile:
    return SourceFile(
        path=path,
        file_key=layout.file_key,
        is_subagent=layout.is_subagent,
        parent_session_id=layout.parent_session_id,
        agent_id=layout.agent_id,
        project_dir=layout.project_dir,
    )


def _parse_document(
    path: Path, parser_class: type[LogParser], source: SourceFile, issues: list, conversation: str | None
) -> ParseResult:
    """A whole-document log, read from the start: every message it holds now (the import stores the new ones
    and completes the changed ones in place). A document that is not valid JSON is left for the next change:
    the tool may be rewriting it this very moment (it is not taken as read: `tool` stays None, as for a JSONL
    file whose first line is still being written). `conversation` seeds a sub-agent's round (the import's
    seed is all a document's carry ever holds)."""
    tool = parser_class.tool
    try:
        check_document_size(path.stat().st_size)
    except LogLimitExceeded as error:
        issues.append(ParseIssue(str(path), 0, str(error)))
        return ParseResult(None, [], issues, 0, 0, {})
    raw = path.read_bytes()
    size = len(raw)
    data = load_document(raw)
    if not isinstance(data, dict | list):
        why = "it is not valid JSON" if data is None else f"it is a JSON {type(data).__name__}"
        issues.append(
            ParseIssue(
                str(path), 0, f"not read: {why} (a file being rewritten; read again at the next import)", "warning"
            )
        )
        return ParseResult(None, [], issues, 0, 0, {})
    parser = parser_class(source, {"conversation": conversation} if conversation else {})
    parser.feed_document(data)
    parser.finish(flush=True)
    issues.extend(parser.issues)
    issues.sort(key=lambda issue: issue.line)
    carry = {"v": CARRY_VERSION, "tool": tool, "document": True}
    return ParseResult(
        session=parser.session,
        messages=parser.messages,
        issues=issues,
        end_offset=size,
        lines_read=raw.count(b"\n") + (1 if raw and not raw.endswith(b"\n") else 0),
        carry=carry,
        tool=tool,
    )
