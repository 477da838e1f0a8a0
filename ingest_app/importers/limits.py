"""How much of a log one read may take, so that no file can sink the process reading it: a line of hundreds of
megabytes, or a few kilobytes of zstd that decompress to gigabytes (a "bomb").

- `ACE_IMPORT_MAX_LINE_BYTES`: the longest line read (the newline not counted). A line is held whole while it
  is parsed; a longer one is refused with its line number, never read into memory. A whole-document log (a
  `.json` one) is held whole too: it may be no larger.
- `ACE_IMPORT_MAX_DECOMPRESSED_BYTES`: the most a compressed log may hold decompressed (it is read whole).
- `ACE_IMPORT_MAX_COMPRESSION_RATIO`: how many times its own size a compressed log may decompress to (past its
  first `RATIO_FLOOR` bytes): text logs compress ten to thirty times; a bomb, thousands.

Every read of a log goes through these (`jsonl.open_log`, `jsonl.JsonlReader`, `jsonl.read_head`), and so does the
upload endpoint's check of a part before it is stored (`check_log_bytes`): the same limits, the same messages.
A limit passed raises `LogLimitExceeded`, whose `status` is the HTTP answer an upload gets (413 for a size, 400
for a line) and whose message names the setting and its value.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO

DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_COMPRESSION_RATIO = 100
RATIO_FLOOR = 1024 * 1024  # a small archive of a short log may well compress better than any ratio
READ_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class ReadLimits:
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    max_compression_ratio: int = DEFAULT_MAX_COMPRESSION_RATIO

    def decompressed_allowance(self, compressed_size: int) -> int:
        """The most bytes a compressed file of `compressed_size` bytes may decompress to."""
        by_ratio = max(self.max_compression_ratio * max(compressed_size, 0), RATIO_FLOOR)
        return min(self.max_decompressed_bytes, by_ratio)


def read_limits() -> ReadLimits:
    """The limits as configured (settings.py reads them from the environment)."""
    from django.conf import settings

    return ReadLimits(
        max_line_bytes=getattr(settings, "ACE_IMPORT_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES),
        max_decompressed_bytes=getattr(settings, "ACE_IMPORT_MAX_DECOMPRESSED_BYTES", DEFAULT_MAX_DECOMPRESSED_BYTES),
        max_compression_ratio=getattr(settings, "ACE_IMPORT_MAX_COMPRESSION_RATIO", DEFAULT_MAX_COMPRESSION_RATIO),
    )


class LogLimitExceeded(ValueError):
    """A log passes one of the limits: `status` is what an upload of it is answered (413 or 400)."""

    status = 413


class LineTooLong(LogLimitExceeded):
    status = 400

    def __init__(self, line: int, limit: int):
        super().__init__(f"line {line} is longer than ACE_IMPORT_MAX_LINE_BYTES ({limit:,} bytes)")
        self.line, self.limit = line, limit


class DocumentTooLarge(LogLimitExceeded):
    status = 400

    def __init__(self, size: int, limit: int):
        super().__init__(
            f"a whole-document log of {size:,} bytes, larger than ACE_IMPORT_MAX_LINE_BYTES ({limit:,} bytes): it "
            "is read whole"
        )


def check_document_size(size: int, limits: ReadLimits | None = None) -> None:
    """Raises DocumentTooLarge for a whole-document log larger than a line may be."""
    limit = (limits or read_limits()).max_line_bytes
    if size > limit:
        raise DocumentTooLarge(size, limit)


class DecompressedTooLarge(LogLimitExceeded):
    def __init__(self, compressed_size: int, limits: ReadLimits):
        allowance = limits.decompressed_allowance(compressed_size)
        if allowance >= limits.max_decompressed_bytes:
            why = f"ACE_IMPORT_MAX_DECOMPRESSED_BYTES ({limits.max_decompressed_bytes:,} bytes)"
        else:
            why = (
                f"ACE_IMPORT_MAX_COMPRESSION_RATIO ({limits.max_compression_ratio}) times its size "
                f"({compressed_size:,} bytes; {allowance:,} bytes allowed)"
            )
        super().__init__(f"it decompresses to more than {why}")


class BoundedDecompression(io.RawIOBase):
    """A decompressed stream that fails (DecompressedTooLarge) as soon as it would give more than the allowance:
    whatever the reader asks for, it never holds more than one read's worth."""

    def __init__(self, stream: BinaryIO, *, compressed_size: int, limits: ReadLimits):
        self.stream = stream
        self.compressed_size = compressed_size
        self.limits = limits
        self.allowance = limits.decompressed_allowance(compressed_size)
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        wanted = min(len(buffer), READ_CHUNK, self.allowance + 1 - self.given)
        if wanted <= 0:
            raise DecompressedTooLarge(self.compressed_size, self.limits)
        data = self.stream.read(wanted)
        self.given += len(data)
        if self.given > self.allowance:
            raise DecompressedTooLarge(self.compressed_size, self.limits)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            super().close()


def zstd_decompressed(raw: BinaryIO, *, compressed_size: int, limits: ReadLimits | None = None) -> io.BufferedReader:
    """The decompressed bytes of a zstd stream, bounded (see `BoundedDecompression`); closing it closes `raw`."""
    import zstandard  # only when a compressed log is met

    stream = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
    bounded = BoundedDecompression(stream, compressed_size=compressed_size, limits=limits or read_limits())
    return io.BufferedReader(bounded, buffer_size=64 * 1024)


def read_line(handle: BinaryIO, *, line: int, limit: int) -> bytes:
    """The next line of `handle` (b"" at its end), read no further than `limit` bytes past its start: a longer
    line raises LineTooLong (with `line`, its number) instead of being read into memory."""
    raw = handle.readline(limit + 1)  # a line of `limit` bytes and its newline, at most
    if len(raw) > limit and not raw.endswith(b"\n"):
        raise LineTooLong(line, limit)
    return raw


class LineLengthCheck:
    """Fed a log's bytes chunk by chunk, raises LineTooLong at the first line longer than the limit. `carried` is
    the length of an unfinished line the bytes continue (an append to a stored copy that ends mid-line)."""

    def __init__(self, limit: int, *, carried: int = 0, first_line: int = 1):
        self.limit = limit
        self.current = carried
        self.line = first_line

    def feed(self, chunk: bytes) -> None:
        start = 0
        newline = chunk.find(b"\n")
        if newline >= 0 and len(chunk) <= self.limit:
            # Lines wholly inside a chunk no longer than the limit cannot pass it: only the first and the last
            # (which join the lines before and after) need measuring.
            if self.current + newline > self.limit:
                raise LineTooLong(self.line, self.limit)
            last = chunk.rfind(b"\n")
            self.line += chunk.count(b"\n", 0, last + 1)
            self.current = len(chunk) - last - 1
            return
        while newline >= 0:
            if self.current + newline - start > self.limit:
                raise LineTooLong(self.line, self.limit)
            self.current, self.line, start = 0, self.line + 1, newline + 1
            newline = chunk.find(b"\n", start)
        self.current += len(chunk) - start
        if self.current > self.limit:
            raise LineTooLong(self.line, self.limit)


def check_log_bytes(
    stream: BinaryIO, *, compressed: bool, compressed_size: int = 0, carried: int = 0, first_line: int = 1,
    limits: ReadLimits | None = None,
) -> None:  # fmt: skip
    """Read a log's bytes through (decompressed, when `compressed`) in bounded memory and time, raising
    LogLimitExceeded at the first limit passed. Other read errors (a corrupt archive) are the caller's."""
    limits = limits or read_limits()
    check = LineLengthCheck(limits.max_line_bytes, carried=carried, first_line=first_line)
    source = zstd_decompressed(stream, compressed_size=compressed_size, limits=limits) if compressed else stream
    try:
        for chunk in iter(lambda: source.read(READ_CHUNK), b""):
            check.feed(chunk)
    finally:
        if compressed:
            source.close()  # and `stream` with it
