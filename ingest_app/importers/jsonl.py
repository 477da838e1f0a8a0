"""Reading a JSONL log incrementally: complete lines from a byte offset, leniently decoded, as `JsonLine`s.

Nothing here knows a tool: `dispatch.parse_file` feeds what `JsonlReader` yields to a tool's parser.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ingest_app.importers.base import JsonLine, ParseIssue
from ingest_app.importers.limits import (
    LogLimitExceeded,
    check_document_size,
    read_limits,
    read_line,
    zstd_decompressed,
)


class JsonlReader:
    """Yields the JSON objects of a file from a byte offset, one complete line at a time.

    A line counts as complete when it ends with a newline, or when it is the last bytes of the file and
    already a valid JSON object. A last line that is neither is a line still being written: it is not
    consumed, so `end_offset` stays before it and a later import reads it whole; it is reported once
    (`tail` names those exact bytes: given back as `reported_tail`, the same tail is not reported again, so
    a file left with a cut last line warns once, not at every re-read). Blank lines are
    consumed silently; a line that is not JSON (or not an object) is reported and skipped; bytes that are
    not UTF-8 are decoded with replacement characters and reported as a warning.

    With `max_bytes`, reading stops at the first line that starts that many bytes or more after
    `start_offset` (`stopped_early` is then True): the importer reads a big file in chunks. A line longer
    than ACE_IMPORT_MAX_LINE_BYTES raises `limits.LineTooLong` before it is read into memory."""

    def __init__(
        self,
        path: Path,
        *,
        start_offset: int = 0,
        first_line: int = 1,
        line_open: bool = False,
        max_bytes: int | None = None,
        reported_tail: str = "",
    ):
        self.path = path
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.next_line = first_line
        self.lines_read = 0
        self.max_bytes = max_bytes
        self.stopped_early = False
        self.issues: list[ParseIssue] = []
        self.reported_tail = reported_tail
        self.tail = ""  # the incomplete last line left unread, as `tail_key` gives it ("" when there is none)
        # The previous read consumed a last line that had no newline yet: the newline that ends it is
        # not a line of its own (so line numbers stay the same however the file is read).
        self.line_open = line_open

    def _issue(self, line: int, message: str, level: str = "error") -> None:
        self.issues.append(ParseIssue(str(self.path), line, message, level))

    def __iter__(self) -> Iterator[JsonLine]:
        max_line = read_limits().max_line_bytes
        with open_log(self.path, self.start_offset) as handle:
            offset = self.start_offset
            while raw := read_line(handle, line=self.next_line, limit=max_line):
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
                                self.tail = tail_key(offset, raw)
                                if self.tail != self.reported_tail:
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
                        data, not_finite = loads_finite(stripped)
                    except ValueError as error:
                        self._issue(number, f"not valid JSON ({error.msg} at column {error.colno}); line skipped")
                        continue
                    if not_finite:
                        self._issue(number, not_finite_warning(not_finite), "warning")
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


def tail_key(offset: int, raw: bytes) -> str:
    """Names an incomplete last line by where it starts, its length and a hash of its bytes: any change to
    it (it grows, or is rewritten) gives another key."""
    return f"{offset}:{len(raw)}:{hashlib.blake2b(raw, digest_size=8).hexdigest()}"


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
        data, _ = loads_finite(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class _NotFinite:
    def __init__(self, written: str):
        self.written = written


def loads_finite(text: str | bytes) -> tuple[Any, list[str]]:
    """json.loads, with NaN, Infinity, -Infinity and numbers too large for a double (1e999) read as null: a log
    that writes one (a tool that divided by zero) is still read, its other values kept. PostgreSQL's jsonb has
    no such numbers, and a token count or a cost cannot be one. Also where they were
    ("message.usage.input_tokens = NaN"), for a warning. ValueError when the text is not JSON."""
    marked = []

    def constant(name: str) -> _NotFinite:
        marked.append(name)
        return _NotFinite(name)

    def number(written: str) -> float | _NotFinite:
        value = float(written)
        if math.isfinite(value):
            return value
        marked.append(written)
        return _NotFinite(written)

    data = json.loads(text, parse_constant=constant, parse_float=number)
    found: list[str] = []
    if marked:
        data = _without_not_finite(data, "", found)
    return data, found


def _without_not_finite(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, _NotFinite):
        found.append(f"{path or '(the line)'} = {value.written}")
        return None
    if isinstance(value, dict):
        return {key: _without_not_finite(item, f"{path}.{key}" if path else key, found) for key, item in value.items()}
    if isinstance(value, list):
        return [
            _without_not_finite(item, f"{path}.{index}" if path else str(index), found)
            for index, item in enumerate(value)
        ]
    return value


def not_finite_warning(found: list[str]) -> str:
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return f"numbers that are not finite (NaN or Infinity) were read as null: {shown}"


def is_compressed(path: Path) -> bool:
    """A zstd-compressed log (`.zst`: newer OpenClaw compresses its archived transcripts). Its offsets count
    decompressed bytes; it is never appended to, so it is read once, whole."""
    return path.name.endswith(".zst")


def open_log(path: Path, offset: int = 0) -> BinaryIO:
    """A log's bytes from `offset`, as a binary file to read by line (`limits.read_line`); a compressed one
    decompressed as it is read, within ACE_IMPORT_MAX_DECOMPRESSED_BYTES and ACE_IMPORT_MAX_COMPRESSION_RATIO
    (`limits.DecompressedTooLarge` past them)."""
    if not is_compressed(path):
        handle = path.open("rb")
        handle.seek(offset)
        return handle
    raw = path.open("rb")
    try:
        handle = zstd_decompressed(raw, compressed_size=os.fstat(raw.fileno()).st_size)
    except BaseException:
        raw.close()
        raise
    remaining = offset
    while remaining > 0:  # the stream cannot seek: read up to the offset
        chunk = handle.read(min(remaining, 1 << 20))
        if not chunk:
            break
        remaining -= len(chunk)
    return handle


def log_size(path: Path) -> int:
    """The bytes a log holds: its size, or decompressed, a compressed one's (read through once). Raises
    OSError, and ValueError for a compressed file that is not valid zstd (`limits.LogLimitExceeded` for one
    that decompresses to more than its limits)."""
    if not is_compressed(path):
        return path.stat().st_size
    size = 0
    try:
        with open_log(path) as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                size += len(chunk)
    except (OSError, LogLimitExceeded):
        raise
    except Exception as error:  # zstandard.ZstdError
        raise ValueError(f"not a readable zstd archive ({error})") from None
    return size


def count_lines_before(path: Path, offset: int) -> int:
    """How many newlines the first `offset` bytes hold (the line number before `offset`, when no carry says)."""
    count = 0
    remaining = offset
    with open_log(path) as handle:
        while remaining > 0:
            chunk = handle.read(min(remaining, 1 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
    return count


def load_document(raw: bytes) -> Any:
    """A whole JSON document (a `.json` log), leniently: None when it is not JSON. Lone surrogates (half an
    emoji) become U+FFFD, as in lines."""
    data = _fast_loads(raw)
    if data is not None:
        return data
    text, _ = _decode(raw)
    try:
        data, _ = loads_finite(text.lstrip("\ufeff"))
    except ValueError:
        return None
    return _without_lone_surrogates(data) if _SURROGATE_ESCAPE.search(text) else data


def read_head(path: Path, limit: int = 25) -> list[str]:
    """The first `limit` complete lines of a file (decoded leniently), for detection. A last line still
    being written (no newline, not yet valid JSON) is left out. A `.json` file is one document: its whole
    text is the one "line", so detection judges the document. A first line (a document) longer than
    ACE_IMPORT_MAX_LINE_BYTES raises `limits.LineTooLong` (`limits.DocumentTooLarge`; a compressed log past its
    limits, `limits.DecompressedTooLarge`)."""
    lines: list[str] = []
    if path.name.endswith(".json"):
        try:
            check_document_size(path.stat().st_size)
            return [_decode(path.read_bytes())[0]]
        except OSError:
            return []
    max_line = read_limits().max_line_bytes
    try:
        with open_log(path) as handle:
            while raw := read_line(handle, line=len(lines) + 1, limit=max_line):
                text = _decode(raw)[0]
                if not raw.endswith(b"\n") and _loads_object(text.strip().lstrip("\ufeff")) is None:
                    break
                lines.append(text)
                if len(lines) >= limit:
                    break
    except OSError:
        return []
    except LogLimitExceeded:
        raise
    except Exception:  # a compressed file that is not valid zstd (zstandard.ZstdError): nothing to judge by
        if is_compressed(path):
            return []
        raise
    return lines
