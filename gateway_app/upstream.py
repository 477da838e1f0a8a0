"""The HTTP client the gateway calls upstreams with: httpx2 (the official SDKs' own client), one pooled client per
process, its connections opened under the outbound policy (platform_kit.outbound): the name resolved once, every
address checked, the socket connected to a checked address (TLS still verifies the name). An operator's own vLLM or
Ollama on a private network is reached by listing it in ACE_OUTBOUND_ALLOW. Upstreams are called directly, never
through an HTTP proxy from the environment."""

from __future__ import annotations

import anyio
import httpcore2
import httpx2
from django.conf import settings

from platform_kit.outbound import (
    OutboundRefused,
    _host_normalised,
    address_refusal,
    allowed,
    host_refusal,
    how_to_allow,
)


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend, connecting only to addresses the outbound policy allows."""

    def __init__(self):
        self.backend = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        allow = allowed()
        why = host_refusal(host, allow=allow)
        if why:
            raise OutboundRefused(why)
        checked = not allow.covers_name(_host_normalised(host))
        refusals, last_error = [], None
        with anyio.fail_after(timeout):
            addresses = await anyio.getaddrinfo(host, port, type=2)  # SOCK_STREAM
        for *_, sockaddr in addresses:
            why = address_refusal(sockaddr[0], allow=allow) if checked else None
            if why:
                refusals.append(why)
                continue
            try:
                return await self.backend.connect_tcp(
                    sockaddr[0], port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as error:
                last_error = error
        if last_error is not None:
            raise last_error
        if refusals:
            raise OutboundRefused(f"{host} resolves only to refused addresses ({refusals[0]}); {how_to_allow(host)}")
        raise httpcore2.ConnectError(f"{host} has no address")

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # pragma: no cover - never asked
        raise OutboundRefused("Upstreams are reached over TCP only.")

    async def sleep(self, seconds):
        await self.backend.sleep(seconds)


class GuardedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, *, limits: httpx2.Limits):
        super().__init__(limits=limits, trust_env=False, http2=False)
        pool = self._pool
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=pool._ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=GuardedBackend(),
        )


def client() -> httpx2.AsyncClient:
    limits = httpx2.Limits(
        max_connections=settings.ACE_GATEWAY_UPSTREAM_CONNECTIONS,
        max_keepalive_connections=min(200, settings.ACE_GATEWAY_UPSTREAM_CONNECTIONS),
        keepalive_expiry=30,
    )
    timeout = httpx2.Timeout(
        connect=settings.ACE_GATEWAY_CONNECT_TIMEOUT,
        read=settings.ACE_GATEWAY_READ_TIMEOUT,
        write=60,
        pool=30,
    )
    return httpx2.AsyncClient(
        transport=GuardedTransport(limits=limits), timeout=timeout, follow_redirects=False, trust_env=False
    )
