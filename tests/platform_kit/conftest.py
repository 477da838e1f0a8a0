"""Local HTTP(S) servers for the outbound policy's tests (test_outbound.py, test_outbound_proxy.py)."""

from __future__ import annotations

import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class LocalServer:
    """An HTTP server on 127.0.0.1 answering every request with `status` (and `location`), counting requests."""

    def __init__(self, status=200, location=None):
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                server.requests.append((self.path, self.headers.get("Host")))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    running = LocalServer()
    yield running
    running.close()


@pytest.fixture
def tls_server(tmp_path):
    """An HTTPS server on 127.0.0.1 whose certificate (self-signed) names hooks.example.com; it records the SNI
    name each client sent."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=hooks.example.com",
         "-addext", "subjectAltName=DNS:hooks.example.com"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    running = LocalServer()
    running.httpd.socket = context.wrap_socket(running.httpd.socket, server_side=True)
    running.sni_names = names
    running.client_context = ssl.create_default_context(cafile=str(cert))
    yield running
    running.close()
