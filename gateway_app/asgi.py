"""The gateway's ASGI application (Starlette): `/gateway/{provider}/v1/chat/completions` (OpenAI-compatible),
`/gateway/{provider}/v1/messages` (Anthropic), and every other path under a provider passed through to it
(authenticated, not recorded: the SDKs' `models.list`, Claude Code's `count_tokens`). aceproject/asgi.py mounts it
beside the Django site; the Procfile's `gateway` process serves both with uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import httpx2
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway_app import relay, upstream
from gateway_app.database import Database
from gateway_app.dialects import Anthropic, OpenAI, dialect_for
from gateway_app.secrets import SecretUnreadable
from platform_kit.outages import RETRY_AFTER_SECONDS, database_unavailable

log = logging.getLogger("gateway_app")
DRAIN_SECONDS = 30


class Gateway:
    """What one process shares between its calls: the database threads, the upstream client, the recording tasks
    still running (awaited before the process stops)."""

    def __init__(self):
        self.db: Database | None = None
        self.client: httpx2.AsyncClient | None = None
        self.tasks: set[asyncio.Task] = set()

    def track(self, task: asyncio.Task) -> asyncio.Task:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def open(self) -> None:
        self.db = Database()
        self.client = upstream.client()

    async def close(self) -> None:
        if self.tasks:
            log.info("Waiting for %d recordings to finish…", len(self.tasks))
            await asyncio.wait(list(self.tasks), timeout=DRAIN_SECONDS)
        await self.client.aclose()
        self.db.close()

    async def drained(self, timeout: float = 10.0) -> bool:
        """Every recording started so far finished (tests)."""
        deadline = time.monotonic() + timeout
        while self.tasks and time.monotonic() < deadline:
            await asyncio.wait(list(self.tasks), timeout=deadline - time.monotonic())
        return not self.tasks


gateway = Gateway()


async def _answered(request: Request, dialect, handler) -> Response:
    """`handler`'s answer; an outage of the database before forwarding is a 503 with Retry-After, any other failure
    of ours a 500, both in the provider's shape (the SDKs retry the first) and nothing forwarded."""
    try:
        return await handler(request, dialect)
    except Exception as error:
        reason = database_unavailable(error)
        if reason:
            log.warning("Gateway call refused: %s.", reason)
            message = f"The gateway cannot reach its database ({reason}); try again in {RETRY_AFTER_SECONDS} s."
            return relay._error(dialect, 503, message, "database_unavailable", RETRY_AFTER_SECONDS)
        log.exception("Gateway call failed.")
        return relay._error(dialect, 500, "The gateway failed on this call; it was logged.", "gateway_error")


async def _call(request: Request, dialect) -> Response:
    return await relay.relay(gateway, request, request.path_params["provider"], dialect)


async def chat_completions(request: Request) -> Response:
    return await _answered(request, OpenAI(), _call)


async def messages(request: Request) -> Response:
    return await _answered(request, Anthropic(), _call)


async def passthrough(request: Request) -> Response:
    guess = Anthropic() if request.path_params["path"].startswith("v1/messages") else OpenAI()
    return await _answered(request, guess, _passed_through)


async def _passed_through(request: Request, guess) -> Response:
    """Another endpoint of the provider's API: authenticated, forwarded, relayed as it comes, not recorded."""
    name, path = request.path_params["provider"], request.path_params["path"]
    found = await relay.caller(gateway, request, name, guess)
    if isinstance(found, Response):
        return found
    _, provider = found
    dialect = dialect_for(provider.kind)
    if provider.kind == "openai":
        if not path.startswith("v1/"):
            return relay._error(dialect, 404, "OpenAI-compatible paths start with /v1/.")
        target = provider.base_url.rstrip("/") + "/" + path[3:]
    else:
        target = provider.base_url.rstrip("/") + "/" + path
    try:
        headers = relay._forwarded_headers(request, dialect, provider.api_key)
    except SecretUnreadable:
        return relay._error(dialect, 502, f"The key of the provider '{name}' cannot be decrypted: enter it again.")
    if request.method in ("GET", "HEAD", "DELETE"):
        headers.pop("content-type", None)
    try:
        body = await relay._body(request)
        answer = await gateway.client.send(
            gateway.client.build_request(
                request.method, target, params=request.query_params, headers=headers, content=body
            ),
            stream=True,
        )
    except relay._TooLarge:
        return relay._error(dialect, 413, "The body is too large (ACE_GATEWAY_MAX_BODY).")
    except (httpx2.HTTPError, OSError) as error:
        return relay._error(dialect, 502, f"The provider could not be reached ({error.__class__.__name__}).")

    async def body_of():
        try:
            async for chunk in answer.aiter_raw():
                yield chunk
        except httpx2.HTTPError:
            pass
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(answer.aclose())

    return StreamingResponse(body_of(), status_code=answer.status_code, headers=relay._returned_headers(answer, ""))


@contextlib.asynccontextmanager
async def lifespan(app):
    await gateway.open()
    try:
        yield
    finally:
        await gateway.close()


routes = [
    Route("/gateway/{provider}/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/gateway/{provider}/v1/messages", messages, methods=["POST"]),
    Route("/gateway/{provider}/{path:path}", passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
]
