"""/mcp/: the MCP server over streamable HTTP, stateless, answering in JSON.

Every POST is self-contained (no MCP session kept in memory), so any web worker answers any request. Django
serves it like every other URL (its middleware checks the Host, sizes, outages and adds the security headers);
the SDK does the protocol: this view checks the key, hands the SDK the request as ASGI and returns what it
answered.
"""

from __future__ import annotations

import anyio
from asgiref.sync import async_to_sync
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework.exceptions import AuthenticationFailed, Throttled

from mcp_app.envelope import envelope_errors
from mcp_app.server import mcp_server, tenant_bound
from platform_kit.api.auth import HasTenant
from sessions_app.auth import ApiKeyAuthentication

# Django validates the Host (ALLOWED_HOSTS) before the view runs; the SDK's own check would only refuse the
# names Django was configured to accept.
HOST_CHECKED_BY_DJANGO = TransportSecuritySettings(enable_dns_rebinding_protection=False)


STATELESS = "Send MCP requests as POST (streamable HTTP, stateless: no GET stream, no DELETE)."


def _unauthorized(detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail, "errors": {}}, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="Open ACE"'
    return response


def _tenant_of(request: HttpRequest):
    """The tenant of the request's API key (the REST API's check), or the 401 to answer."""
    try:
        found = ApiKeyAuthentication().authenticate(request)
    except AuthenticationFailed as failed:
        return _unauthorized(str(failed.detail))
    except Throttled as throttled:
        response = JsonResponse({"detail": str(throttled.detail), "errors": {}}, status=429)
        response["Retry-After"] = str(throttled.wait)
        return response
    if found is None:
        return _unauthorized(HasTenant.message)
    return found[0].tenant


def _scope(request: HttpRequest) -> dict:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host(), int(request.get_port() or 0)),
    }


async def _answer(request: HttpRequest, body: bytes) -> HttpResponse:
    """Run the SDK's stateless streamable-HTTP handler on the request; its response as Django's."""
    manager = StreamableHTTPSessionManager(
        app=mcp_server()._lowlevel_server,  # what the SDK's own Client connects to in-process
        json_response=True,
        stateless=True,
        security_settings=HOST_CHECKED_BY_DJANGO,
        max_request_body_size=settings.ACE_MAX_REQUEST_BYTES,
    )
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.Event().wait()  # the client stays connected until the answer is sent
        raise AssertionError("unreachable")

    start: dict = {}
    chunks: list[bytes] = []

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(_scope(request), receive, send)
    response = HttpResponse(b"".join(chunks), status=start.get("status", 500))
    for name, value in start.get("headers", []):
        if name.lower() not in (b"content-length", b"content-type"):
            response[name.decode("latin-1")] = value.decode("latin-1")
        elif name.lower() == b"content-type":
            response["Content-Type"] = value.decode("latin-1")
    return response


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        # Stateless: no server-initiated stream to open (GET) and no session to end (DELETE).
        response = JsonResponse(
            {"detail": STATELESS, "errors": {}},
            status=405,
        )
        response["Allow"] = "POST"
        return response
    tenant = _tenant_of(request)
    if isinstance(tenant, HttpResponse):
        return tenant
    # The SDK runs on an event loop of its own for the request; the tools' database work comes back to this
    # thread (asgiref's thread-sensitive mode), whose connection Django closes when the request ends.
    errors = envelope_errors(request.body)
    if errors is not None:
        return JsonResponse(errors[0] if len(errors) == 1 else errors, status=400, safe=False)
    with tenant_bound(tenant):
        return async_to_sync(_answer)(request, request.body)
