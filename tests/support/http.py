"""A fake HTTP server on loopback for the tests: the webhook receivers, the chat bots, the OpenAI-compatible
endpoints, odd or lossy servers in front of the push client. One small server, configured by the function that
answers each request; every request it received is kept, in order."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.waiting import wait_for


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)  # when it arrived

    def json(self):
        return json.loads(self.body)


# What an answer function returns: (status, body) or (status, body, headers). A body of bytes is sent as it is,
# a str as UTF-8, anything else as JSON; an iterable of bytes (a generator) is streamed, chunk by chunk, with no
# Content-Length (the end of the body is the end of the connection, as in HTTP/1.0). None: the server hangs up
# without answering (the request was received, the client never hears of it).
Answer = tuple | None


def ok(request: Request) -> Answer:
    return 200, {"status": 200}


class FakeServer:
    """An HTTP server on 127.0.0.1 (a free port), serving in a thread from creation until close()."""

    def __init__(self, answer: Callable[[Request], Answer] = ok):
        self.answer_with = answer
        self.received: list[Request] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(self.command, self.path, dict(self.headers.items()), self.rfile.read(length))
                with fake.lock:
                    fake.received.append(request)
                answer = fake.answer_with(request)
                try:
                    if answer is None:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    fake.send(self, *answer)
                except OSError:
                    pass  # the client stopped waiting (its timeout)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one  # noqa: N815 - http.server's names

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @staticmethod
    def send(handler: BaseHTTPRequestHandler, status: int, body=b"", headers: dict | None = None):
        headers = dict(headers or {})
        streamed = isinstance(body, Iterable) and not isinstance(body, bytes | str | dict | list)
        if streamed:
            handler.close_connection = True  # a stream: its end is the connection's
        else:
            if not isinstance(body, bytes):
                body = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
            headers["Content-Length"] = str(len(body))
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        for chunk in body if streamed else [body]:
            handler.wfile.write(chunk)
            handler.wfile.flush()

    def wait_for(self, count: int, seconds: float = 20.0) -> list[Request]:
        """The requests received, once there are `count` of them (or all there are after `seconds`)."""
        wait_for(lambda: len(self.received) >= count, seconds)
        return list(self.received)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
