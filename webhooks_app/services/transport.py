"""The POST of one delivery: a timeout, no redirects followed, the answer read up to a bound, and (unless
ACE_WEBHOOKS_ALLOW_PRIVATE) no private, loopback or link-local address — checked on the address actually
connected to, so a name that resolves elsewhere on the second lookup (DNS rebinding) gains nothing."""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings

MAX_BODY_KEPT = 4096  # characters of the answer's body kept on the delivery
MAX_HEADERS_KEPT = 50
USER_AGENT = "OpenACE-Webhooks/1"


@dataclass
class Answer:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    error: str = ""  # no answer: why (a timeout, a refused connection, a refused address)
    duration_ms: float = 0.0


class AddressRefused(Exception):
    """The URL's host is a private, loopback, link-local or reserved address and ACE_WEBHOOKS_ALLOW_PRIVATE is off."""


def address_refusal(address: str) -> str | None:
    """Why an IP address may not be posted to (None when it may)."""
    if settings.ACE_WEBHOOKS_ALLOW_PRIVATE:
        return None
    ip = ipaddress.ip_address(address.split("%")[0])
    if not ip.is_global or ip.is_multicast:
        return (
            f"{address} is a private, loopback, link-local or reserved address; set ACE_WEBHOOKS_ALLOW_PRIVATE=true "
            "to allow it"
        )
    return None


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    """A connection to the first of the host's addresses that is allowed and answers."""
    last_error: Exception | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        refusal = address_refusal(address[0])
        if refusal:
            last_error = AddressRefused(refusal)
            continue
        sock = socket.socket(family, kind, proto)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except OSError as error:
            sock.close()
            last_error = error
            continue
        return sock
    raise last_error or OSError(f"{host} has no address")


class _HTTPConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = _connect(self.host, self.port, self.timeout)


class _HTTPSConnection(http.client.HTTPSConnection):
    def connect(self):
        sock = _connect(self.host, self.port, self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post(url: str, *, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST `body` to `url`; never raises for the network's or the receiver's failures: they are in the Answer."""
    parts = urlsplit(url)
    connection_class = _HTTPSConnection if parts.scheme == "https" else _HTTPConnection
    kwargs = {"context": ssl.create_default_context()} if parts.scheme == "https" else {}
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    started = time.perf_counter()
    answer = Answer()
    connection = connection_class(parts.hostname, parts.port, timeout=timeout, **kwargs)
    try:
        connection.request(
            "POST", path, body=body, headers={"User-Agent": USER_AGENT, "Content-Type": "application/json", **headers}
        )
        response = connection.getresponse()
        answer.status = response.status
        answer.headers = dict(list(response.getheaders())[:MAX_HEADERS_KEPT])
        answer.body = response.read(MAX_BODY_KEPT * 4).decode("utf-8", "replace")[:MAX_BODY_KEPT]
    except AddressRefused as refused:
        answer.error = f"Refused: {refused}"
    except TimeoutError:
        answer.error = f"Timed out after {timeout:g} s"
    except (OSError, http.client.HTTPException) as error:
        answer.error = f"{type(error).__name__}: {error}"
    finally:
        connection.close()
        answer.duration_ms = round((time.perf_counter() - started) * 1000, 2)
    return answer
