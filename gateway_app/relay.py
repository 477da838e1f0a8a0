"""One call through the gateway, from the client's bytes to the upstream's and back, recorded as a chat turn.

Before anything is forwarded (awaited): the key, the provider, the call read, the hard budgets and the key's rate
limits, and the memory block when asked for. Then the upstream is called while the turn's start is written beside
it; the answer is relayed as it arrives (each server-sent event as its bytes came), read into the turn on the way,
checkpointed every ACE_GATEWAY_CHECKPOINT_SECONDS, and completed after its last byte has gone to the client. A
client that leaves, or an upstream that breaks, leaves the partial answer stored and the turn failed with why.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid

import httpx2
from django.conf import settings
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from gateway_app import recording
from gateway_app.dialects import Answer, BadCall, Dialect
from gateway_app.memory import memory_block
from gateway_app.secrets import SecretUnreadable
from gateway_app.services.providers import provider_cached, provider_for_call
from gateway_app.sse import SSEReader
from platform_kit.auth_throttle import api_key_blocked, api_key_failed
from platform_kit.outbound import OutboundRefused
from sessions_app.services.apikeys import apikey_authenticate, apikey_cached

log = logging.getLogger("gateway_app")

# Not forwarded either way: the connection's own headers, the client's credentials, ours.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        "host",
    }
)
NOT_FORWARDED = HOP_BY_HOP | {"authorization", "x-api-key", "cookie", "accept-encoding", "api-key"}
NOT_RETURNED = HOP_BY_HOP | {"set-cookie", "alt-svc"}
# A stream's turn starts once its first event has been relayed, or after this long without one (a model thinking).
FIRST_EVENT_WAIT = 0.05


def authenticate(plain_key: str, address: str):
    """(api_key, None) or (None, (status, message, retry_after)): the key, with the throttle of unknown keys."""
    wait = api_key_blocked(address)
    api_key = apikey_authenticate(plain_key=plain_key) if plain_key else None
    if api_key is not None:
        return api_key, None
    if wait is not None:
        return None, (429, f"Too many unknown API keys from this address: try again in {wait} s.", wait)
    if plain_key:
        wait = api_key_failed(address)
        if wait is not None:
            return None, (429, f"Too many unknown API keys from this address: try again in {wait} s.", wait)
        return None, (401, "Unknown or revoked Open ACE API key.", None)
    return None, (
        401,
        "Send your Open ACE API key: 'Authorization: Bearer <key>' or 'x-api-key: <key>' (the SDK's api_key).",
        None,
    )


def _key_of(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key", "").strip()


def _error(dialect: Dialect, status: int, message: str, code: str = "", retry_after: int | None = None) -> Response:
    headers = {"retry-after": str(retry_after)} if retry_after else None
    return JSONResponse(dialect.error_body(status, message, code), status_code=status, headers=headers)


def _forwarded_headers(request: Request, dialect: Dialect, api_key: str) -> dict:
    headers = {
        name: value
        for name, value in request.headers.items()
        if name not in NOT_FORWARDED and not name.startswith("x-ace-") and not name.startswith("x-forwarded-")
    }
    headers["accept-encoding"] = "identity"  # read as it streams: no compressed frames to undo
    headers["content-type"] = "application/json"
    headers.update(dialect.auth_headers(api_key))
    return headers


def _returned_headers(upstream: httpx2.Response, call_id: str) -> dict:
    headers = {name: value for name, value in upstream.headers.items() if name.lower() not in NOT_RETURNED}
    headers["x-ace-call-id"] = call_id
    return headers


class Recorder:
    """The turn's writes, in order, behind the stream: each job waits for the one before (start, checkpoints,
    completion) and none holds the stream up. A failed start leaves the rest undone, said in the log."""

    def __init__(self, gateway, api_key):
        self.gateway, self.api_key = gateway, api_key
        self.turn_id = None
        self.last: asyncio.Task | None = None
        self.checkpoint_pending = False
        self.start_fields: dict | None = None
        self.timer: asyncio.TimerHandle | None = None

    def _then(self, job) -> asyncio.Task:
        previous = self.last

        async def run():
            if previous is not None:
                await asyncio.wait([previous])
            try:
                await job()
            except Exception:  # a job's failure is logged; the client's answer is not affected
                log.exception("The gateway could not record a step of a call (turn %s).", self.turn_id)

        self.last = self.gateway.track(asyncio.get_running_loop().create_task(run()))
        return self.last

    def start(self, *, defer: float | None = None, **fields) -> None:
        """The turn's start, now, or (`defer`) once the first event has gone to the client or `defer` seconds have
        passed, whichever comes first: its write then never competes with the relay for the interpreter while the
        first token is on its way. Every later step starts it first if it has not started."""
        self.start_fields = fields
        if defer is None:
            self.started()
        else:
            self.timer = asyncio.get_running_loop().call_later(defer, self.started)

    def started(self) -> None:
        if self.start_fields is None:
            return
        fields, self.start_fields = self.start_fields, None
        if self.timer is not None:
            self.timer.cancel()

        async def job():
            self.turn_id = await self.gateway.db.write(recording.start, api_key=self.api_key, **fields)

        self._then(job)

    def checkpoint(self, answer: Answer) -> None:
        self.started()
        if self.checkpoint_pending:
            return  # the one waiting will take the text as it is then
        self.checkpoint_pending = True

        async def job():
            self.checkpoint_pending = False
            if self.turn_id is not None:
                await self.gateway.db.write(
                    recording.checkpoint,
                    tenant=self.api_key.tenant,
                    turn_id=self.turn_id,
                    content=answer.text,
                    thinking=answer.thoughts,
                )

        self._then(job)

    def complete(self, data_of) -> None:
        self.started()

        async def job():
            if self.turn_id is not None:
                await self.gateway.db.write(
                    recording.complete, api_key=self.api_key, turn_id=self.turn_id, data=data_of()
                )

        self._then(job)


async def caller(gateway, request: Request, provider_name: str, dialect: Dialect):
    """(the calling key, the provider it names), read from this process's caches when they hold them (no hop off
    the event loop), else from the database; or the refusal, a Response in the provider's shape."""
    plain_key = _key_of(request)
    api_key, refusal = apikey_cached(plain_key=plain_key), None
    if api_key is None:
        address = request.client.host if request.client else "unknown"
        api_key, refusal = await gateway.db.run(authenticate, plain_key, address)
    if refusal is not None:
        status, message, wait = refusal
        return _error(dialect, status, message, "invalid_api_key" if status == 401 else "", wait)
    provider = provider_cached(api_key.tenant_id, provider_name)
    if provider is None:
        provider = await gateway.db.run(provider_for_call, api_key.tenant_id, provider_name)
    if provider is None:
        return _error(dialect, 404, f"No provider named '{provider_name}': add it at /api/v1/providers/.")
    if not provider.active:
        return _error(dialect, 403, f"The provider '{provider.name}' is inactive.")
    return api_key, provider


async def relay(gateway, request: Request, provider_name: str, dialect: Dialect) -> Response:
    received = time.perf_counter()
    found = await caller(gateway, request, provider_name, dialect)
    if isinstance(found, Response):
        return found
    api_key, provider = found
    if provider.kind != dialect.kind:
        right = "v1/chat/completions" if provider.kind == "openai" else "v1/messages"
        return _error(
            dialect, 404, f"'{provider.name}' is an {provider.kind} provider: call /gateway/{provider.name}/{right}."
        )
    try:
        body_bytes = await _body(request)
        body = json.loads(body_bytes) if body_bytes else None
        call = dialect.read_call(body)
    except _TooLarge:
        return _error(dialect, 413, f"The body is over {settings.ACE_GATEWAY_MAX_BODY} bytes (ACE_GATEWAY_MAX_BODY).")
    except (ValueError, BadCall) as error:
        message = str(error) if isinstance(error, BadCall) else f"The body is not JSON: {error}."
        return _error(dialect, 400, message)
    except ClientDisconnect:
        return Response(status_code=499)
    if not provider.allows_model(call.model):
        return _error(dialect, 403, f"The provider '{provider.name}' does not allow the model '{call.model[:255]}'.")

    user_id = (request.headers.get("x-ace-user") or call.user or api_key.name or f"key:{api_key.prefix}")[:255]
    agent_session_id = (
        request.headers.get("x-ace-session")
        or request.headers.get("x-claude-code-session-id")  # Claude Code's session, sent with each of its calls
        or f"{user_id}:{time.strftime('%Y-%m-%d', time.gmtime())}"
    )[:255]
    refusal = None
    if recording.preflight_needed(api_key):  # usually not: no budget used up, no rate limit on the key
        refusal = await gateway.db.run(
            recording.preflight, api_key=api_key, agent_session_id=agent_session_id, user_id=user_id
        )
    if refusal is not None:
        return _error(dialect, refusal.status, refusal.message, refusal.code, refusal.retry_after)
    memory = ""
    if request.headers.get("x-ace-memory", "").strip().lower() == "inject":
        memory = await gateway.db.run(
            memory_block, api_key=api_key, agent_session_id=agent_session_id, user_id=user_id, query=call.content
        )
    try:
        upstream_key = provider.api_key
    except SecretUnreadable:
        return _error(dialect, 502, f"The key of the provider '{provider.name}' cannot be decrypted: enter it again.")
    forwarded = dialect.prepare(body, call, memory)
    system = call.system_prompt if not memory else "\n\n".join(p for p in (call.system_prompt, memory) if p)

    call_id = uuid.uuid4().hex
    recorder = Recorder(gateway, api_key)
    recorder.start(
        defer=FIRST_EVENT_WAIT if call.stream else None,
        agent_session_id=agent_session_id,
        user_id=user_id,
        provider=provider.name,
        call=call,
        external_id=f"gw_{call_id}",
        system=system,
    )
    answer = Answer()
    upstream_request = gateway.client.build_request(
        "POST",
        provider.base_url.rstrip("/") + dialect.upstream_path,
        params=request.query_params,
        headers=_forwarded_headers(request, dialect, upstream_key),
        content=json.dumps(forwarded, ensure_ascii=False).encode() if forwarded is not body else body_bytes,
    )

    def finish(status: int, error: str = "", ttft_ms=None):
        elapsed_ms = round((time.perf_counter() - received) * 1000)
        recorder.complete(
            lambda: recording.completion(
                call=call,
                answer=answer,
                dialect=dialect,
                ttft_ms=ttft_ms,
                elapsed_ms=elapsed_ms,
                provider=provider.name,
                status=status,
                error=error,
            )
        )

    try:
        upstream = await gateway.client.send(upstream_request, stream=True)
    except OutboundRefused as refused:
        finish(502, f"The upstream's address is refused by the outbound policy: {refused}")
        return _error(dialect, 502, f"The provider's base URL is refused by this server's outbound policy: {refused}")
    except httpx2.TimeoutException:
        finish(504, "The upstream did not answer in time.")
        return _error(dialect, 504, "The provider did not answer in time.")
    except httpx2.HTTPError as error:
        finish(502, f"The upstream could not be reached: {error.__class__.__name__}: {error}")
        return _error(dialect, 502, f"The provider could not be reached ({error.__class__.__name__}).")

    headers = _returned_headers(upstream, call_id)
    if upstream.status_code >= 400 or not call.stream:
        try:
            content = await upstream.aread()
        except httpx2.HTTPError as error:
            finish(502, f"The upstream broke its answer: {error.__class__.__name__}: {error}")
            return _error(dialect, 502, "The provider broke its answer off.")
        finally:
            await upstream.aclose()
        ttft_ms = round((time.perf_counter() - received) * 1000)
        if upstream.status_code >= 400:
            finish(upstream.status_code, f"{upstream.status_code}: {dialect.upstream_error(content)}", ttft_ms)
        else:
            try:
                dialect.read_answer(json.loads(content), answer)
                finish(upstream.status_code, "", ttft_ms)
            except ValueError:
                finish(upstream.status_code, "The upstream's answer is not JSON.", ttft_ms)
        return Response(content, status_code=upstream.status_code, headers=headers)

    return StreamingResponse(
        _stream(upstream, dialect, answer, recorder, finish, received),
        status_code=upstream.status_code,
        headers=headers,
    )


async def _stream(upstream: httpx2.Response, dialect: Dialect, answer: Answer, recorder, finish, received: float):
    reader = SSEReader()
    ttft_ms = None
    error = ""
    finished = False
    every = settings.ACE_GATEWAY_CHECKPOINT_SECONDS
    next_checkpoint = time.monotonic() + every
    try:
        try:
            async for chunk in upstream.aiter_raw():
                # The events a read brought go on together: one write to the client, not one per event.
                relayed = [
                    raw
                    for raw, event, data in reader.feed(chunk)
                    if reader.broken or dialect.read_event(event, data, answer)
                ]
                if relayed:
                    if ttft_ms is None:
                        ttft_ms = round((time.perf_counter() - received) * 1000)
                    yield b"".join(relayed) if len(relayed) > 1 else relayed[0]
                if answer.size:
                    recorder.started()  # once the answer's first text has gone out, not before it
                if time.monotonic() >= next_checkpoint and answer.size:
                    recorder.checkpoint(answer)
                    next_checkpoint = time.monotonic() + every
            rest = reader.rest()
            if rest:
                yield rest
            if not answer.stop_reason:
                error = "The upstream's stream ended without a stop reason."
        except httpx2.HTTPError as broken:
            error = f"The upstream broke the stream after {answer.chunks} events: {broken.__class__.__name__}: {broken}"
            body = dialect.error_body(502, "The provider broke the stream off.", "upstream_broken")
            event = "event: error\n" if dialect.kind == "anthropic" else ""
            yield f"{event}data: {json.dumps(body)}\n\n".encode()
        finished = True
    finally:
        if not finished:
            error = f"The client disconnected after {answer.chunks} events."
        if answer.stop_reason == "error" and not error:
            error = "The upstream reported an error in the stream."
        finish(upstream.status_code, error, ttft_ms)
        await asyncio.shield(upstream.aclose())


class _TooLarge(Exception):
    pass


async def _body(request: Request) -> bytes:
    limit = settings.ACE_GATEWAY_MAX_BODY
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise _TooLarge
        parts.append(part)
    return b"".join(parts)
