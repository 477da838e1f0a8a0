"""Server-sent events read as they arrive: each complete event is handed on with its own bytes (relayed as they
came) and its parsed name and data (read into the answer). A stream that never ends an event within MAX_EVENT
bytes is not SSE: what is buffered is relayed as it is, and the rest passes through unread."""

from __future__ import annotations

import re

MAX_EVENT = 8 * 1024 * 1024
_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class SSEReader:
    def __init__(self):
        self.buffer = b""
        self.broken = False  # gave up parsing: everything passes through as it is

    def feed(self, chunk: bytes) -> list[tuple[bytes, str, str]]:
        """(raw bytes, event name, data) for each event completed by `chunk`; with `broken`, one raw piece."""
        if self.broken:
            return [(chunk, "", "")] if chunk else []
        self.buffer += chunk
        events = []
        start = 0
        for end in _END.finditer(self.buffer):
            raw = self.buffer[start : end.end()]
            start = end.end()
            events.append((raw, *self._parse(raw)))
        self.buffer = self.buffer[start:]
        if len(self.buffer) > MAX_EVENT:
            self.broken = True
            events.append((self.buffer, "", ""))
            self.buffer = b""
        return events

    def rest(self) -> bytes:
        """What was left unterminated when the stream ended."""
        rest, self.buffer = self.buffer, b""
        return rest

    @staticmethod
    def _parse(raw: bytes) -> tuple[str, str]:
        name, data = "", []
        for line in raw.decode("utf-8", "replace").splitlines():
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        return name, "\n".join(data)
