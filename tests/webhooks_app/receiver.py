"""A real HTTP receiver on loopback for the webhook tests: answers with the statuses it is given, in turn (the
last one repeats), after `delay` seconds if given (a slow receiver), and keeps every request it received."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = 0.0  # time.monotonic() when it arrived


class Receiver:
    def __init__(self, statuses=(200,), delay: float = 0.0):
        self.statuses = list(statuses)
        self.delay = delay
        self.received: list[Received] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.received.append(Received(self.path, dict(self.headers.items()), body, time.monotonic()))
                    status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                if receiver.delay:
                    time.sleep(receiver.delay)  # a slow receiver: the sender's timeout ends the wait first
                answer = f'{{"status": {status}}}'.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # the sender stopped waiting (its timeout)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/ace"

    def wait_for(self, count: int, seconds: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and len(self.received) < count:
            time.sleep(0.05)
        return list(self.received)


@contextlib.contextmanager
def receiving(statuses=(200,), delay: float = 0.0):
    receiver = Receiver(statuses, delay)
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(timeout=5)
