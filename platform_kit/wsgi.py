"""WSGI middleware for request bodies sent with `Transfer-Encoding: chunked` (and so without a Content-Length).

Django reads a request body only as far as CONTENT_LENGTH says, so a chunked body reads as empty: Node's HTTP
client sends a streamed body that way — Claude Code's OpenTelemetry exporter does — and an OTLP export would be
answered 200 with nothing in it. gunicorn de-chunks the stream and says so (`wsgi.input_terminated`); this reads
it, up to the size limit, and hands Django the body with its length. A server that cannot de-chunk (Django's
development server) gets a 411 that says what to do, instead of an empty body.

The body is read in chunks into a temporary file that stays in memory only while small (`SPOOL_BYTES`), so a
large upload is on disk, never whole in memory; paths with a larger limit of their own (log uploads:
ACE_MAX_UPLOAD_BYTES) have it here too.
"""

import json
import tempfile

SPOOL_BYTES = 1024 * 1024
READ_BYTES = 64 * 1024


def _refuse(start_response, status: str, detail: str) -> list[bytes]:
    body = json.dumps({"detail": detail, "errors": {}}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


class ChunkedRequestBodies:
    """`limit`: the largest body; `large_paths` (exact paths) may send up to `large_limit` instead."""

    def __init__(self, app, *, limit: int, large_limit: int | None = None, large_paths: tuple[str, ...] = ()):
        self.app = app
        self.limit = limit
        self.large_limit = limit if large_limit is None else large_limit
        self.large_paths = large_paths

    def __call__(self, environ, start_response):
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if not chunked or environ.get("CONTENT_LENGTH"):
            return self.app(environ, start_response)
        if not environ.get("wsgi.input_terminated"):
            return _refuse(
                start_response,
                "411 Length Required",
                "This server cannot read a chunked request body: send a Content-Length (or serve Open ACE with "
                "gunicorn, as scripts/up does).",
            )
        limit = self.large_limit if environ.get("PATH_INFO", "") in self.large_paths else self.limit
        body = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        size = 0
        source = environ["wsgi.input"]
        while size <= limit:
            chunk = source.read(min(READ_BYTES, limit + 1 - size))
            if not chunk:
                break
            body.write(chunk)
            size += len(chunk)
        if size > limit:
            body.close()
            return _refuse(start_response, "413 Request Entity Too Large", f"The body is larger than {limit} bytes.")
        body.seek(0)
        environ = {**environ, "wsgi.input": body, "CONTENT_LENGTH": str(size)}
        del environ["HTTP_TRANSFER_ENCODING"]
        return self.app(environ, start_response)
