"""The outbound policy behind an operator's egress proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY): the LLM extractor,
the embedder and budget bots reach the internet through it, as urllib did before the policy; what the policy
refuses never reaches the proxy, and a tenant's URL naming the proxy gains nothing (docs/security.md, "Outbound
calls")."""

from __future__ import annotations

import select
import socket
import socketserver
import threading
import urllib.error

import pytest

from platform_kit import outbound
from webhooks_app.services import transport

PROXY_VARIABLES = ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


class _Proxy:
    """An HTTP proxy on 127.0.0.1, as an operator runs one: CONNECT tunnels and absolute-URI requests, forwarded
    to `upstream` (the port every name stands for here), recording what it was asked for."""

    def __init__(self, upstream: int):
        self.asked: list[str] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                block, body = head.split(b"\r\n\r\n", 1)
                line, _, headers = block.partition(b"\r\n")
                method, target, version = line.decode().split(" ")
                proxy.asked.append(f"{method} {target}")
                onward = socket.create_connection(("127.0.0.1", upstream), timeout=5)
                if method == "CONNECT":
                    self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    rest = body
                else:  # an absolute URI: the origin's form onward
                    path = "/" + target.split("://", 1)[1].split("/", 1)[1]
                    rest = f"{method} {path} {version}\r\n".encode() + headers + b"\r\n\r\n" + body
                onward.sendall(rest)
                _pipe(self.request, onward)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            ready, _, _ = select.select([a, b], [], [], 5)
            if not ready:
                return
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                (b if sock is a else a).sendall(data)
    finally:
        b.close()


@pytest.fixture
def environment(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def proxy(server, environment):
    running = _Proxy(server.port)
    environment.setenv("HTTP_PROXY", running.url)
    environment.setenv("HTTPS_PROXY", running.url)
    yield running
    running.close()


def test_a_public_name_is_reached_through_the_operators_proxy_which_the_policy_does_not_refuse(
    proxy,
    server,
    resolver,
    settings,
):
    settings.ACE_OUTBOUND_ALLOW = ""  # the proxy's own address (loopback) is not listed: it is the operator's
    resolver["api.example.com"] = ["93.184.216.34"]
    with outbound.urlopen("http://api.example.com/v1/embeddings", timeout=5) as response:
        assert response.status == 200 and response.read() == b"ok"
    assert proxy.asked == ["GET http://api.example.com/v1/embeddings"]
    assert server.requests == [("/v1/embeddings", "api.example.com")]


def test_a_name_only_the_proxy_can_resolve_is_left_to_it(proxy, server, resolver, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    resolver["api.example.com"] = None  # a closed network: this host resolves no outside name
    with outbound.urlopen("http://api.example.com/v1/models", timeout=5) as response:
        assert response.status == 200
    assert proxy.asked == ["GET http://api.example.com/v1/models"]


@pytest.mark.parametrize(
    "url, why",
    [
        ("http://127.0.0.1:8000/admin/", "127.0.0.1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://localhost/", "loopback name"),
        ("http://internal.example.com/", "resolves to a refused address (10.0.0.5 is a private address)"),
        ("https://internal.example.com/", "resolves to a refused address (10.0.0.5 is a private address)"),
    ],
)
def test_what_the_policy_refuses_never_reaches_the_proxy(proxy, resolver, settings, url, why):
    settings.ACE_OUTBOUND_ALLOW = ""
    resolver["internal.example.com"] = ["93.184.216.34", "10.0.0.5"]  # one refused address is enough: the proxy
    with pytest.raises(urllib.error.URLError) as raised:  # picks which one it connects to, not us
        outbound.urlopen(url, timeout=5)
    refusal = outbound.refusal_of(raised.value)
    assert refusal is not None and why in str(refusal) and "ACE_OUTBOUND_ALLOW" in str(refusal)
    assert proxy.asked == []


def test_no_proxy_hosts_go_straight_there_through_the_policy(
    proxy,
    server,
    resolver,
    settings,
    environment,
):
    settings.ACE_OUTBOUND_ALLOW = ""
    resolver["vllm.example.com"] = ["127.0.0.1"]
    environment.setenv("NO_PROXY", "vllm.example.com")
    with pytest.raises(urllib.error.URLError) as raised:
        outbound.urlopen(f"http://vllm.example.com:{server.port}/v1", timeout=5)
    assert "resolves only to refused addresses" in str(outbound.refusal_of(raised.value))
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    with outbound.urlopen(f"http://vllm.example.com:{server.port}/v1", timeout=5) as response:
        assert response.status == 200
    assert proxy.asked == []  # both times straight there


def test_https_goes_through_a_tunnel_with_the_certificate_checked_for_the_name(
    tls_server,
    resolver,
    settings,
    environment,
):
    settings.ACE_OUTBOUND_ALLOW = ""
    tunnel = _Proxy(tls_server.port)
    environment.setenv("HTTPS_PROXY", tunnel.url)
    resolver["hooks.example.com"] = ["93.184.216.34"]
    try:
        connection = outbound.HTTPSConnection(
            "127.0.0.1", int(tunnel.url.rsplit(":", 1)[1]), timeout=5, context=tls_server.client_context,
            via_proxy=True,
        )  # fmt: skip
        connection.set_tunnel("hooks.example.com", 443)
        connection.request("GET", "/through")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        tunnel.close()
    assert tunnel.asked == ["CONNECT hooks.example.com:443"]
    assert tls_server.sni_names == ["hooks.example.com"]  # TLS end to end: the proxy saw no plain text


def test_a_tenants_url_naming_the_proxy_is_not_let_through_as_the_proxy(proxy, resolver, settings, environment):
    """A webhook (sent directly, never through a proxy) whose URL names the operator's proxy host and port goes
    through the policy like any other: the proxy's address is loopback here, so it is refused."""
    settings.ACE_OUTBOUND_ALLOW = ""
    port = int(proxy.url.rsplit(":", 1)[1])
    resolver["proxy.example.com"] = ["127.0.0.1"]
    environment.setenv("HTTP_PROXY", f"http://proxy.example.com:{port}")
    answer = transport.post(f"http://proxy.example.com:{port}/", body=b"{}", headers={}, timeout=2)
    assert answer.status is None and "no address this server may call" in answer.error
    assert proxy.asked == []


def test_without_a_proxy_nothing_changes(environment, server, resolver, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    resolver["api.example.com"] = ["127.0.0.1"]
    with pytest.raises(urllib.error.URLError):
        outbound.urlopen(f"http://api.example.com:{server.port}/", timeout=5)
    assert server.requests == []
