"""What the gateway writes, through the ledger's services, on the database threads (gateway_app.database): never on
the event loop, and never before the first byte reaches the client except the checks that must come first.

1. `preflight` (before anything is forwarded, reads only but for a rate-limited key): the session the call goes to
   if it exists, the hard-limit budget that refuses it if one is used up, the key's rate limits;
2. `start`: the session (made on its first call), the turn's user message and answer placeholder
   (`turn_start`), the system prompt as forwarded (`turn_system_ready`);
3. `checkpoint`: the partial answer, while it streams (`turn_checkpoint`);
4. `complete`: the answer with its usage, counted as one request (`turn_complete`), and the key's tokens.
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from gateway_app.models import RateWindow
from sessions_app.models import ApiKey, Budget, Session, Tenant
from sessions_app.schema import MESSAGE_TEXT_LIMITS
from sessions_app.selectors.budgets import budget_blocking, budgets_blocked
from sessions_app.services.ledger import Way
from sessions_app.services.sessions import session_create
from sessions_app.services.turns import turn_checkpoint, turn_complete, turn_start

TOOL = "gateway"  # the sessions the gateway makes: `tool` says where they came from
MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class Refusal:
    """Why a call is not forwarded: the status, the message, a code, and when to try again (seconds)."""

    status: int
    message: str
    code: str
    retry_after: int | None = None


def session_find(*, tenant_id, agent_session_id: str) -> Session | None:
    return (
        Session.objects.filter(
            tenant_id=tenant_id, tool=TOOL, agent_session_id=agent_session_id, deleted_at__isnull=True
        )
        .order_by("started_at")
        .first()
    )


# Whether a tenant has a used-up hard budget, as this process last read it: the call that finds none within
# ACE_GATEWAY_BUDGET_CACHE_SECONDS is forwarded without a query (the common case); one that finds some reads them
# again. A budget used up on this process is seen at once (its completions forget the tenant's entry), on another
# within that time.
_NONE_BLOCKED: dict = {}


def none_blocked(tenant_id) -> bool:
    """True when this process read, within ACE_GATEWAY_BUDGET_CACHE_SECONDS, that the tenant has no used-up hard
    budget (no query: an event loop may ask)."""
    until = _NONE_BLOCKED.get(tenant_id)
    return until is not None and until > time.monotonic()


def _remember_blocked(tenant_id, blocked: list) -> None:
    seconds = settings.ACE_GATEWAY_BUDGET_CACHE_SECONDS
    if blocked or seconds <= 0:
        _NONE_BLOCKED.pop(tenant_id, None)
        return
    if len(_NONE_BLOCKED) > 10_000:
        _NONE_BLOCKED.clear()
    _NONE_BLOCKED[tenant_id] = time.monotonic() + seconds


def preflight(*, api_key: ApiKey, agent_session_id: str, user_id: str) -> Refusal | None:
    """Whether the call may be forwarded: a used-up hard budget covering it, or the key's rate limits, refuse it."""
    now = timezone.now()
    if not none_blocked(api_key.tenant_id):
        blocked = budgets_blocked(tenant_id=api_key.tenant_id, now=now)
        _remember_blocked(api_key.tenant_id, blocked)
        if blocked:
            session = session_find(tenant_id=api_key.tenant_id, agent_session_id=agent_session_id) or Session(
                tenant_id=api_key.tenant_id, user_id=user_id, project="", api_key_id=api_key.pk
            )
            budget = budget_blocking(session=session, api_key_id=api_key.pk, blocked=blocked)
            if budget is not None:
                return _budget_refusal(budget, now)
    if api_key.requests_per_minute or api_key.tokens_per_minute:
        return rate_take(api_key, now=now)
    return None


def preflight_needed(api_key: ApiKey) -> bool:
    """Whether preflight must query (else it is known to pass, without a query)."""
    return bool(api_key.requests_per_minute or api_key.tokens_per_minute) or not none_blocked(api_key.tenant_id)


def _budget_refusal(budget: Budget, now: datetime) -> Refusal:
    resets_at = budget.blocked_until
    return Refusal(
        status=429,
        message=f"Budget '{budget.name}' is used up; calls it covers are refused until {resets_at.isoformat()}.",
        code="budget_exceeded",
        retry_after=max(1, math.ceil((resets_at - now).total_seconds())),
    )


# -- rate limits: a sliding window of a minute, estimated from this minute's count and the last one's ------------
def _window(row: RateWindow, minute: datetime) -> tuple[int, int, int, int]:
    """(requests, tokens) of the current minute and of the one before, rolled forward to `minute`."""
    if row.minute == minute:
        return row.requests, row.tokens, row.previous_requests, row.previous_tokens
    if row.minute == minute - MINUTE:
        return 0, 0, row.requests, row.tokens
    return 0, 0, 0, 0


def _locked_window(api_key_id, minute: datetime) -> RateWindow:
    RateWindow.objects.bulk_create([RateWindow(api_key_id=api_key_id, minute=minute)], ignore_conflicts=True)
    return RateWindow.objects.select_for_update().get(pk=api_key_id)


def _wait(limit: int, current: float, previous: float, elapsed: float, more: float) -> int:
    """Seconds until previous × (1 − f) + current + more ≤ limit, f the part of the minute gone by."""
    if current + more > limit:  # this minute alone is over: wait for the next, then for the previous' share
        return max(1, math.ceil(60 - elapsed))
    fraction = 1 - (limit - current - more) / previous if previous else 0
    return max(1, math.ceil(fraction * 60 - elapsed))


def rate_take(api_key: ApiKey, *, now: datetime) -> Refusal | None:
    """Count one call against the key's limits, or refuse it (not counted) with when to try again."""
    minute = now.replace(second=0, microsecond=0)
    elapsed = (now - minute).total_seconds()
    with transaction.atomic():
        row = _locked_window(api_key.pk, minute)
        requests, tokens, previous_requests, previous_tokens = _window(row, minute)
        share = 1 - elapsed / 60
        if api_key.requests_per_minute and previous_requests * share + requests + 1 > api_key.requests_per_minute:
            wait = _wait(api_key.requests_per_minute, requests, previous_requests, elapsed, 1)
            return Refusal(
                429,
                f"Rate limit of this key: {api_key.requests_per_minute} calls a minute; try again in {wait} s.",
                "rate_limit_exceeded",
                wait,
            )
        if api_key.tokens_per_minute and previous_tokens * share + tokens >= api_key.tokens_per_minute:
            wait = _wait(api_key.tokens_per_minute, tokens, previous_tokens, elapsed, 1)
            return Refusal(
                429,
                f"Rate limit of this key: {api_key.tokens_per_minute} tokens a minute; try again in {wait} s.",
                "rate_limit_exceeded",
                wait,
            )
        row.minute, row.requests, row.tokens = minute, requests + 1, tokens
        row.previous_requests, row.previous_tokens = previous_requests, previous_tokens
        row.save()
    return None


def rate_add_tokens(api_key: ApiKey, tokens: int) -> None:
    if not api_key.tokens_per_minute or tokens <= 0:
        return
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    with transaction.atomic():
        row = _locked_window(api_key.pk, minute)
        requests, current, previous_requests, previous_tokens = _window(row, minute)
        row.minute, row.requests, row.tokens = minute, requests, current + tokens
        row.previous_requests, row.previous_tokens = previous_requests, previous_tokens
        row.save()


# -- the turn -------------------------------------------------------------------------------------------------
def _session(*, tenant: Tenant, api_key: ApiKey, agent_session_id: str, user_id: str, provider: str) -> Session:
    """The session of `agent_session_id`, made on its first call (one maker at a time: an advisory lock)."""
    found = session_find(tenant_id=tenant.pk, agent_session_id=agent_session_id)
    if found is not None:
        return found
    with transaction.atomic():
        with connection.cursor() as cursor:
            key = zlib.crc32(f"{tenant.pk}:{agent_session_id}".encode())
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [1_396_786_007, key - 2**31])
        found = session_find(tenant_id=tenant.pk, agent_session_id=agent_session_id)
        if found is not None:
            return found
        return session_create(
            tenant=tenant,
            api_key=api_key,
            tool=TOOL,
            agent_session_id=agent_session_id,
            user_id=user_id,
            app=provider[: Session._meta.get_field("app").max_length],
            name=f"Gateway: {agent_session_id}"[:255],
        )


def start(*, api_key: ApiKey, agent_session_id: str, user_id: str, provider: str, call, external_id: str, system):
    """The session, the turn's start and its system prompt as forwarded. Returns the turn's id."""
    tenant = api_key.tenant
    session = _session(
        tenant=tenant, api_key=api_key, agent_session_id=agent_session_id, user_id=user_id, provider=provider
    )
    started = turn_start(
        tenant=tenant,
        session_id=session.pk,
        content=call.content,
        attachments=call.attachments or None,
        external_id=external_id,
        api_key_id=api_key.pk,
        way=Way.GATEWAY,
        system_prompt=system or None,
    )
    return started.turn.pk


def checkpoint(*, tenant: Tenant, turn_id, content: str, thinking: str) -> None:
    turn_checkpoint(tenant=tenant, turn_id=turn_id, content=content, thinking=thinking or None)


def complete(*, api_key: ApiKey, turn_id, data: dict) -> None:
    turn_complete(tenant=api_key.tenant, turn_id=turn_id, data=data)
    _NONE_BLOCKED.pop(api_key.tenant_id, None)  # its usage may have used a budget up: read again next call
    usage = [data.get(name) or 0 for name in ("input_tokens", "output_tokens", "cache_read_tokens")]
    rate_add_tokens(api_key, sum(usage) + (data.get("cache_creation_tokens") or 0))


def completion(*, call, answer, dialect, ttft_ms, elapsed_ms, provider: str, status: int, error: str = "") -> dict:
    """The turn's completion from what the upstream answered."""
    finish = "error" if error else (dialect.finish_reason(answer) or "stop")
    model = (answer.model or call.model)[: MESSAGE_TEXT_LIMITS["model"]]
    calls = answer.calls()
    data = {
        "finish_reason": finish,
        "content": answer.text,
        "thinking": answer.thoughts,
        "model": model,
        "max_tokens": call.max_tokens,
        "temperature": call.temperature,
        "elapsed_ms": elapsed_ms,
        "requests": 1,
        "tool_calls": calls,
        "tool_names": sorted({c["name"] for c in calls if c["name"]}),
        "available_tool_names": call.tool_names,
        "tool_schema": call.tool_schema,
        "metadata": {
            "gateway": {
                "provider": provider,
                "stream": call.stream,
                "status": status,
                "ttft_ms": ttft_ms,
                "stop_reason": answer.stop_reason[:64],
                "upstream_id": answer.upstream_id[:255],
            }
        },
        **answer.usage,
    }
    if error:
        data["error"] = error
    return data
