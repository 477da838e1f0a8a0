"""MCP over stdio (`manage.py ace_mcp`): the SDK's stdio transport, with each line's envelope checked first
(envelope.py) so that a request whose id cannot be read is answered with an Invalid Request error, not taken
for a notification and left unanswered.

While serving, the protocol runs on private copies of stdin and stdout; fd 0 reads the null device and fd 1
writes to stderr, so a stray print or a child process never corrupts the protocol (what the SDK does for the
streams it opens itself)."""

from __future__ import annotations

import io
import json
import os

import anyio
from mcp.server.stdio import stdio_server

from mcp_app.envelope import envelope_errors


class _Wire:
    """stdout, one whole line per write even when the envelope check and the server answer at once."""

    def __init__(self, file):
        self.file = file
        self.lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self.lock:
            await self.file.write(text)
            await self.file.flush()

    async def flush(self) -> None:
        return None  # every write is flushed


class _CheckedLines:
    """stdin's lines, less those answered here with an Invalid Request error."""

    def __init__(self, file, wire: _Wire):
        self.file, self.wire = file, wire

    async def __aiter__(self):
        async for line in self.file:
            errors = envelope_errors(line) if line.strip() else None
            if errors is None:
                yield line
                continue
            for error in errors:
                await self.wire.write(json.dumps(error) + "\n")


def _private_std_streams() -> tuple[io.BufferedReader, io.BufferedWriter]:
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return os.fdopen(wire_in, "rb"), os.fdopen(wire_out, "wb")


async def serve_stdio(server) -> None:
    """Serve the MCP server `server` (mcp_server()) on this process's stdin and stdout until stdin ends."""
    wire_in, wire_out = _private_std_streams()
    wire = _Wire(anyio.wrap_file(io.TextIOWrapper(wire_out, encoding="utf-8", write_through=True)))
    lines = _CheckedLines(anyio.wrap_file(io.TextIOWrapper(wire_in, encoding="utf-8", errors="replace")), wire)
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin=lines, stdout=wire) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
