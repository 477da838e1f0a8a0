"""Chat turns: the persistence flow of ../shared/seeds/003 for a streamed LLM answer.

1. start: the user message and an assistant placeholder are written at once (a crash later still
   leaves the question, and the placeholder shows an answer was under way);
2. system ready: the full system prompt (skills and recalled memory included) is kept on the user
   message as its snapshot (`thinking`, which on a user message means "the context we injected");
3. checkpoints: partial content and reasoning are saved while streaming;
4. complete: everything else, and every counter, in one transaction.

Counters: the placeholder was counted as an assistant message when it was written. Completing (or
closing an abandoned turn) replaces the placeholder's contribution by the finished message's, so a
failed turn moves from assistant to error messages and its usage lands under the model that served it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from platform_kit.redaction import redact, redact_text
from sessions_app.accounting import total_tokens, turn_answer_usage
from sessions_app.models import (
    Conversation,
    Message,
    Role,
    Session,
    Tenant,
    Turn,
    TurnStatus,
)
from sessions_app.schema import COUNTER_FIELDS, TOKEN_FIELDS
from sessions_app.search import index_after_commit, needs_index
from sessions_app.services.messages import messages_append
from sessions_app.services.rollups import rollup_add
from sessions_app.signals import turn_completed

FINISH_REASONS = ("stop", "length", "tool_calls", "error")
CLOSED = (TurnStatus.COMPLETED, TurnStatus.FAILED)


class TurnClosed(Exception):
    """The turn is closed: it takes no more checkpoints, and (once completed) only the same completion."""

    def __init__(self, turn: Turn):
        when = f"{turn.completed_at:%Y-%m-%dT%H:%M:%SZ}"
        if turn.status == TurnStatus.ABANDONED:
            message = f"The turn was closed as abandoned at {when}; complete it to store the answer."
        else:
            message = f"The turn was completed at {when} ({turn.status})."
        super().__init__(message)
        self.turn = turn


class TurnCompletedDifferently(TurnClosed):
    def __init__(self, turn: Turn):
        super().__init__(turn)
        self.args = (f"{self.args[0]} It was completed with different data.",)


@dataclass(frozen=True)
class TurnStarted:
    turn: Turn
    created: bool


def _turns(tenant: Tenant):
    return Turn.objects.filter(tenant=tenant, session__deleted_at__isnull=True)


def turn_start(
    *,
    tenant: Tenant,
    session_id,
    content: str,
    attachments: list | None = None,
    thinking_mode: str = "",
    conversation: str | None = None,
    external_id: str | None = None,
) -> TurnStarted:
    """Write the user message and the assistant placeholder. A repeated `external_id` returns the turn."""
    now = timezone.now()
    with transaction.atomic():
        # The session's lock first, as every counter writer takes it: a repeated external_id then
        # cannot race its twin.
        Session.objects.select_for_update().get(pk=session_id, tenant=tenant, deleted_at__isnull=True)
        if external_id:
            existing = Turn.objects.filter(session_id=session_id, external_id=external_id).first()
            if existing is not None:
                return TurnStarted(turn=existing, created=False)
        user = {"role": Role.USER, "content": content, "created_at": now, "thinking_mode": thinking_mode}
        if attachments is not None:
            user["attachments"] = attachments
        if conversation:
            user["conversation"] = conversation
        placeholder = {"role": Role.ASSISTANT, "content": "", "created_at": now}
        user_message, assistant_message = messages_append(
            tenant=tenant, session_id=session_id, items=[user, placeholder]
        ).messages
        turn = Turn.objects.create(
            tenant=tenant,
            session_id=session_id,
            conversation_id=user_message.conversation_id,
            user_message=user_message,
            assistant_message=assistant_message,
            external_id=external_id,
            started_at=now,
            last_activity_at=now,
        )
    return TurnStarted(turn=turn, created=True)


def _open_turn(*, tenant: Tenant, turn_id) -> Turn:
    turn = _turns(tenant).select_for_update(of=("self",)).get(pk=turn_id)
    if turn.status != TurnStatus.STREAMING:
        raise TurnClosed(turn)
    return turn


def turn_system_ready(*, tenant: Tenant, turn_id, system_prompt: str) -> Turn:
    """Keep the complete system prompt of the turn on its user message (before the first chunk)."""
    now = timezone.now()
    with transaction.atomic():
        turn = _open_turn(tenant=tenant, turn_id=turn_id)
        Message.objects.filter(pk=turn.user_message_id).update(thinking=redact_text(system_prompt))
        turn.system_ready_at = turn.last_activity_at = now
        turn.save(update_fields=["system_ready_at", "last_activity_at"])
    return turn


def turn_checkpoint(*, tenant: Tenant, turn_id, content: str | None = None, thinking: str | None = None) -> Turn:
    """Save the partial answer of a stream in progress."""
    now = timezone.now()
    with transaction.atomic():
        turn = _open_turn(tenant=tenant, turn_id=turn_id)
        fields = {
            name: redact_text(value)
            for name, value in (("content", content), ("thinking", thinking))
            if value is not None
        }
        if fields:
            Message.objects.filter(pk=turn.assistant_message_id).update(**fields)
            if needs_index(content):
                index_after_commit([turn.assistant_message_id])
        turn.last_activity_at = now
        turn.save(update_fields=["last_activity_at"])
    return turn


def completion_digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def turn_complete(*, tenant: Tenant, turn_id, data: dict) -> tuple[Turn, bool]:
    """Write the finished turn in one transaction. Returns (turn, changed).

    The same completion again changes nothing; a different one raises TurnClosed. A turn closed as
    abandoned still takes its completion: the client's data is the truth, the timeout was a guess.
    """
    digest = completion_digest(data)
    with transaction.atomic():
        session_id = _turns(tenant).values_list("session_id", flat=True).get(pk=turn_id)
        session = Session.objects.select_for_update().get(pk=session_id)
        turn = Turn.objects.select_for_update().get(pk=turn_id)
        if turn.status in CLOSED:
            if turn.completion_digest == digest:
                return turn, False
            raise TurnCompletedDifferently(turn)
        status = TurnStatus.FAILED if data["finish_reason"] == "error" else TurnStatus.COMPLETED
        _finish(session=session, turn=turn, data=data, status=status, digest=digest)
    return turn, True


def _difference(after: dict, before: dict) -> dict[str, int]:
    return {field: after.get(field, 0) - before.get(field, 0) for field in COUNTER_FIELDS}


def _finish(*, session: Session, turn: Turn, data: dict, status: str, digest: str) -> None:
    now = timezone.now()
    assistant = Message.objects.get(pk=turn.assistant_message_id)
    before_key, before = turn_answer_usage(assistant)

    assistant.role = Role.ERROR if data["finish_reason"] == "error" else Role.ASSISTANT
    for field in ("content", "thinking", "model", "max_tokens", "temperature", "finish_reason", "elapsed_ms"):
        if field in data and data[field] is not None:
            setattr(assistant, field, redact_text(data[field]) if field in ("content", "thinking") else data[field])
    for field in TOKEN_FIELDS:
        if data.get(field) is not None:
            setattr(assistant, field, data[field])
    assistant.total_tokens = total_tokens(assistant.input_tokens, assistant.output_tokens, assistant.total_tokens)
    if "tool_calls" in data:
        assistant.tool_calls = redact(data["tool_calls"])
    if "tool_names" in data:
        assistant.tool_names = data["tool_names"]
    elif assistant.tool_calls:
        assistant.tool_names = sorted({call.get("name") for call in assistant.tool_calls if call.get("name")})
    assistant.api_calls = data.get("requests", 1 if status != TurnStatus.ABANDONED else 0)
    # The error of this completion, or none: a late completion replaces the abandoned close's error.
    assistant.metadata = {k: v for k, v in assistant.metadata.items() if k != "error"}
    if data.get("error"):
        assistant.metadata["error"] = redact_text(data["error"])
    assistant.save()
    if needs_index(assistant.content):
        index_after_commit([assistant.pk])

    user_fields = {}
    if "skill_names" in data:
        user_fields["skill_names"] = data["skill_names"]
    if "available_tool_names" in data:
        user_fields["tool_names"] = data["available_tool_names"]
    if user_fields:
        Message.objects.filter(pk=turn.user_message_id).update(**user_fields)

    after_key, after = turn_answer_usage(assistant)
    delta = _difference(after, before)
    changes = {field: F(field) + value for field, value in delta.items() if value}
    Conversation.objects.filter(pk=turn.conversation_id).update(
        **changes, last_message_at=Greatest(F("last_message_at"), now)
    )
    Session.objects.filter(pk=session.pk).update(**changes, last_message_at=Greatest(F("last_message_at"), now))
    rollup: dict[tuple[datetime, str], Counter] = defaultdict(Counter)
    for field in COUNTER_FIELDS:  # out of the placeholder's hour/model bucket, into the finished message's
        rollup[before_key][field] -= before.get(field, 0)
        rollup[after_key][field] += after.get(field, 0)
    rollup_add(session=session, deltas=rollup)

    turn.status = status
    turn.completed_at = turn.last_activity_at = now
    turn.completion_digest = digest
    turn.save(update_fields=["status", "completed_at", "last_activity_at", "completion_digest"])

    tool_schema = data.get("tool_schema")
    transaction.on_commit(lambda: _after_commit(turn, assistant, tool_schema, data.get("error")))


def _after_commit(turn: Turn, assistant: Message, tool_schema, error: str | None) -> None:
    from sessions_app.tracing import record_turn_spans

    # The stream as the client timed it, when it says; otherwise as the server saw it.
    started_at = turn.started_at
    if assistant.elapsed_ms is not None:
        started_at = max(turn.started_at, turn.completed_at - timedelta(milliseconds=assistant.elapsed_ms))
    record_turn_spans(
        turn_id=turn.pk,
        session_id=turn.session_id,
        conversation_id=turn.conversation_id,
        model=assistant.model,
        started_at=started_at,
        ended_at=turn.completed_at,
        finish_reason=assistant.finish_reason,
        input_tokens=assistant.input_tokens,
        output_tokens=assistant.output_tokens,
        tool_calls=assistant.tool_calls if isinstance(assistant.tool_calls, list) else None,
        tool_schema=redact(tool_schema) if tool_schema is not None else None,
        error=error,
    )
    turn_completed.send(
        sender=Turn,
        turn_id=turn.pk,
        session_id=turn.session_id,
        tenant_id=turn.tenant_id,
        status=turn.status,
        tool_names=assistant.tool_names or [],
        message_ids=[turn.user_message_id, turn.assistant_message_id],
    )


def turns_close_abandoned(*, older_than: timedelta, limit: int = 500) -> int:
    """Close turns that streamed but were never completed: finish_reason error, partial content kept.

    Safe to run twice or concurrently: each turn is re-checked under its lock.
    """
    cutoff = timezone.now() - older_than
    candidates = Turn.objects.filter(status=TurnStatus.STREAMING, last_activity_at__lt=cutoff).values_list(
        "pk", "session_id"
    )[:limit]
    closed = 0
    for turn_id, session_id in candidates:
        with transaction.atomic():
            session = Session.objects.select_for_update().get(pk=session_id)
            turn = Turn.objects.select_for_update().get(pk=turn_id)
            if turn.status != TurnStatus.STREAMING or turn.last_activity_at >= cutoff:
                continue
            seconds = int(older_than.total_seconds())
            _finish(
                session=session,
                turn=turn,
                data={"finish_reason": "error", "error": f"Abandoned: no completion within {seconds} s."},
                status=TurnStatus.ABANDONED,
                digest="",
            )
            closed += 1
    return closed
