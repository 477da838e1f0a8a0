"""WSGI middleware for request bodies sent with `Transfer-Encoding: chunked` (and so without a Content-Length).

Django reads a request body only as far as CONTENT_LENGTH says, so a chunked body reads as empty: Node's HTTP
client sends a streamed body that way — Claude Code's OpenTelemetry exporter does — and an OTLP export would be
answered 200 with nothing in it. gunicorn de-chunks the stream and says so (`wsgi.input_terminated`); this reads
it, up to the size limit, and hands Django the body with its length. A server that cannot de-chunk (Django's
development server) gets a 411 that says what to do, instead of an empty body.
"""

import io
import json


def _refuse(start_response, status: str, detail: str) -> list[bytes]:
    body = json.dumps({"detail": detail, "errors": {}}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


class ChunkedRequestBodies:
    def __init__(self, app, *, limit: int):
        self.app = app
        self.limit = limit

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
        body = environ["wsgi.input"].read(self.limit + 1)
        if len(body) > self.limit:
            return _refuse(
                start_response, "413 Request Entity Too Large", f"The body is larger than {self.limit} bytes."
            )
        environ = {**environ, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
        del environ["HTTP_TRANSFER_ENCODING"]
        return self.app(environ, start_response)
