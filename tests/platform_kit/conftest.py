"""Local HTTP(S) servers for the outbound policy's tests (test_outbound.py, test_outbound_proxy.py)."""

from __future__ import annotations

import ssl
import subprocess

import pytest

from tests.support.http import FakeServer


class LocalServer(FakeServer):
    """An HTTP server on 127.0.0.1 answering every request with `status` (and `location`); `requests` lists the
    path and Host header of each."""

    def __init__(self, status=200, location=None):
        headers = {"Location": location} if location else {}
        super().__init__(lambda request: (status, b"ok", headers))

    @property
    def requests(self) -> list[tuple[str, str]]:
        return [(request.path, request.headers.get("Host")) for request in self.received]


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
    running.server.socket = context.wrap_socket(running.server.socket, server_side=True)
    running.sni_names = names
    running.client_context = ssl.create_default_context(cafile=str(cert))
    yield running
    running.close()
