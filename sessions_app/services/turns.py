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

from django.db import IntegrityError, transaction
from django.utils import timezone

from platform_kit.db import (
    add_to_rows_sql,
    insert_rows_sql,
    mark_saved,
    prepared_cursor,
    select_instances,
    unsaved_instance,
    update_rows_sql,
)
from platform_kit.redaction import redact, redact_text
from sessions_app.accounting import cache_writes, long_context, total_tokens, turn_answer_usage
from sessions_app.models import (
    Budget,
    Conversation,
    Message,
    Role,
    Session,
    Tenant,
    Turn,
    TurnStatus,
)
from sessions_app.schema import COUNTER_FIELDS, LONG_CONTEXT_FIELDS, MEASURE_FIELDS
from sessions_app.search import index_after_commit, needs_index
from sessions_app.services.ledger import Change, Locked, Way, write
from sessions_app.services.messages import MessagesAppend
from sessions_app.signals import turn_completed, turn_completing

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
    api_key_id=None,
    way: Way = Way.TURN_START,
    system_prompt: str | None = None,
) -> TurnStarted:
    """Write the user message and the assistant placeholder. A repeated `external_id` returns the turn.

    Two statements: the session's row locked (with whether a budget refuses the write, and the turn a
    repeated `external_id` names), then the messages, the turn, the counters and the roll-ups in one.
    `system_prompt`, when the caller has it already (the gateway), is kept as turn_system_ready keeps it, in the
    same write.
    Raises Session.DoesNotExist (not the tenant's) and BudgetUsedUp."""
    change = TurnStart(
        tenant=tenant,
        session_id=session_id,
        content=content,
        attachments=attachments,
        thinking_mode=thinking_mode,
        conversation=conversation,
        external_id=external_id,
        api_key_id=api_key_id,
        way=way,
        system_prompt=system_prompt,
    )
    try:
        with transaction.atomic():  # a savepoint when the caller has a transaction open: the retry below reads on
            write(change)
        return change.started
    except IntegrityError as error:
        # Its twin (the same external_id) committed while this one waited for the session's lock, after
        # this statement's snapshot was taken: the next one sees it.
        if not external_id or "turn_session_external_id" not in str(error):
            raise
    return TurnStarted(
        turn=_with_messages(_turns(tenant).get(session_id=session_id, external_id=external_id)), created=False
    )


_START_SQL = f"""
SELECT {{columns}},
  EXISTS (SELECT 1 FROM {Budget._meta.db_table} b
          WHERE b.tenant_id = s.tenant_id AND b.active AND b.hard_limit AND b.blocked_until > %s),
  (SELECT t.id FROM {Turn._meta.db_table} t WHERE t.session_id = s.id AND t.external_id = %s)
FROM {Session._meta.db_table} s WHERE s.id = %s AND s.tenant_id = %s AND s.deleted_at IS NULL
FOR UPDATE OF s
"""


class TurnStart(MessagesAppend):
    """A turn's start: the user message and the assistant placeholder, appended by the ledger's unit of work
    (services.ledger) with the turn's row a clause of the same statement. `started`: the TurnStarted."""

    def __init__(
        self,
        *,
        tenant,
        session_id,
        content,
        attachments,
        thinking_mode,
        conversation,
        external_id,
        api_key_id,
        way=Way.TURN_START,
        system_prompt=None,
    ):
        self.now = now = timezone.now()
        user = {"role": Role.USER, "content": content, "created_at": now, "thinking_mode": thinking_mode}
        self.system_ready = bool(system_prompt)
        if system_prompt:
            user["thinking"] = system_prompt  # redacted with the rest of the message (MessagesAppend.validate)
        if attachments is not None:
            user["attachments"] = attachments
        if conversation:
            user["conversation"] = conversation
        placeholder = {"role": Role.ASSISTANT, "content": "", "created_at": now}
        # Embedding and the strategies' triggers wait for the turn's end (turn_completed, with both messages'
        # final text; an abandoned turn ends too): the question is not looked at twice.
        super().__init__(
            way=way,
            appends=[(None, [user, placeholder])],
            also=self.the_turn,
            announce=False,
            api_key_id=api_key_id,
        )
        self.tenant, self.session_id, self.external_id = tenant, session_id, external_id
        self.started: TurnStarted | None = None

    def lock(self) -> Locked | None:
        """The session's lock first, as every counter writer takes it: a repeated external_id then cannot race
        its twin. With it: whether a hard-limit budget of the tenant is used up, and the turn a repeated
        external_id names (returned: nothing to write)."""
        found = select_instances(
            _START_SQL, [self.now, self.external_id, self.session_id, self.tenant.pk], (("s", Session),)
        )
        if found is None:
            raise Session.DoesNotExist
        session, budget_blocked, repeated_turn = found
        if repeated_turn is not None:
            self.started = TurnStarted(turn=_with_messages(Turn.objects.get(pk=repeated_turn)), created=False)
            return None
        return Locked(sessions=[session], budget_blocked=budget_blocked)

    def the_turn(self, messages: list[list[Message]]):
        user_message, assistant_message = messages[0]
        turn = unsaved_instance(
            Turn,
            tenant_id=self.tenant.pk,
            session_id=user_message.session_id,
            conversation_id=user_message.conversation_id,
            user_message_id=user_message.id,
            assistant_message_id=assistant_message.id,
            external_id=self.external_id,
            started_at=self.now,
            last_activity_at=self.now,
            system_ready_at=self.now if self.system_ready else None,
        )
        cache = turn._state.fields_cache
        cache["user_message"], cache["assistant_message"] = user_message, assistant_message
        self.started = TurnStarted(turn=turn, created=True)
        return [insert_rows_sql(Turn, [turn])]

    def after_write(self) -> None:
        super().after_write()
        mark_saved([self.started.turn])


def _with_messages(turn: Turn) -> Turn:
    messages = Message.objects.in_bulk([turn.user_message_id, turn.assistant_message_id])
    cache = turn._state.fields_cache
    cache["user_message"], cache["assistant_message"] = (
        messages[turn.user_message_id],
        messages[turn.assistant_message_id],
    )
    return turn


@dataclass(frozen=True)
class TurnProgress:
    """What system-ready and checkpoints answer: the turn's state, not the text just sent."""

    id: object
    status: str
    system_ready_at: datetime | None
    last_activity_at: datetime
    message_id: object  # the message it wrote on


# One statement per checkpoint (and per system-ready): the open turn's row updated (its lock taken, as
# completion takes it, so a checkpoint never lands after the completion) and its message with it.
_PROGRESS_SQL = """
WITH turn AS (
  UPDATE {turn} t SET last_activity_at = %s{ready}
  FROM {session} s
  WHERE t.id = %s AND t.tenant_id = %s AND t.status = 'streaming' AND s.id = t.session_id AND s.deleted_at IS NULL
  RETURNING t.id, t.{message}, t.status, t.system_ready_at, t.last_activity_at
), message AS (
  UPDATE {message_table} m SET {sets} FROM turn WHERE m.id = turn.{message} RETURNING m.id
)
SELECT turn.id, turn.status, turn.system_ready_at, turn.last_activity_at, (SELECT id FROM message) FROM turn
"""


def _progress(*, tenant: Tenant, turn_id, message: str, fields: dict, ready: bool) -> TurnProgress:
    if not fields:
        raise ValueError("Nothing to write: give content and/or thinking.")
    now = timezone.now()
    sets = ", ".join(f"{name} = %s" for name in fields)
    sql = _PROGRESS_SQL.format(
        turn=Turn._meta.db_table,
        session=Session._meta.db_table,
        message_table=Message._meta.db_table,
        message=message,
        ready=", system_ready_at = %s" if ready else "",
        sets=sets,
    )
    params = [now, *([now] if ready else []), turn_id, tenant.pk, *fields.values()]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise TurnClosed(_turns(tenant).get(pk=turn_id))  # closed, or Turn.DoesNotExist
    return TurnProgress(id=row[0], status=row[1], system_ready_at=row[2], last_activity_at=row[3], message_id=row[4])


def turn_system_ready(*, tenant: Tenant, turn_id, system_prompt: str) -> TurnProgress:
    """Keep the complete system prompt of the turn on its user message (before the first chunk)."""
    return _progress(
        tenant=tenant,
        turn_id=turn_id,
        message="user_message_id",
        fields={"thinking": redact_text(system_prompt)},
        ready=True,
    )


def turn_checkpoint(
    *, tenant: Tenant, turn_id, content: str | None = None, thinking: str | None = None
) -> TurnProgress:
    """Save the partial answer of a stream in progress."""
    fields = {
        name: redact_text(value) for name, value in (("content", content), ("thinking", thinking)) if value is not None
    }
    progress = _progress(tenant=tenant, turn_id=turn_id, message="assistant_message_id", fields=fields, ready=False)
    if needs_index(content):
        index_after_commit([progress.message_id])
    return progress


def completion_digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def turn_complete(*, tenant: Tenant, turn_id, data: dict) -> tuple[Turn, bool]:
    """Write the finished turn in one transaction. Returns (turn, changed), the turn with both its messages.

    The same completion again changes nothing; a different one raises TurnClosed. A turn closed as
    abandoned still takes its completion: the client's data is the truth, the timeout was a guess.
    Two statements: the turn read with its session and messages (the session's row and the turn's locked),
    then every change in one.
    """
    change = TurnFinish(turn_id=turn_id, tenant=tenant, data=data)
    with transaction.atomic():
        write(change)
    return change.turn, change.changed


_LOCKED_TURN_SQL = f"""
SELECT {{columns}} FROM {Turn._meta.db_table} t
JOIN {Session._meta.db_table} s ON s.id = t.session_id
JOIN {Message._meta.db_table} u ON u.id = t.user_message_id
JOIN {Message._meta.db_table} a ON a.id = t.assistant_message_id
WHERE t.id = %s AND (%s::uuid IS NULL OR t.tenant_id = %s) AND s.deleted_at IS NULL
FOR UPDATE OF s, t
"""


def _locked_turn(turn_id, tenant: Tenant | None = None) -> Turn:
    """The turn with its session and both messages; the session's row locked, then the turn's (the order every
    writer takes them in). Raises Turn.DoesNotExist (not the tenant's, or its session deleted)."""
    tenant_id = tenant.pk if tenant else None
    found = select_instances(
        _LOCKED_TURN_SQL,
        [turn_id, tenant_id, tenant_id],
        (("t", Turn), ("s", Session), ("u", Message), ("a", Message)),
    )
    if found is None:
        raise Turn.DoesNotExist
    turn, session, user, assistant = found
    cache = turn._state.fields_cache
    cache["session"], cache["user_message"], cache["assistant_message"] = session, user, assistant
    return turn


def _difference(after: dict, before: dict) -> dict[str, int]:
    return {field: after.get(field, 0) - before.get(field, 0) for field in COUNTER_FIELDS}


# What a completion writes on the assistant message.
ANSWER_FIELDS = (
    "role",
    "content",
    "thinking",
    "model",
    "max_tokens",
    "temperature",
    "finish_reason",
    "elapsed_ms",
    *MEASURE_FIELDS,
    "tool_calls",
    "tool_names",
    "api_calls",
    "metadata",
)

# What a completion writes on the user message: (field, the completion's name for it).
USER_FIELDS = (("skill_names", "skill_names"), ("tool_names", "available_tool_names"))


class TurnFinish(Change):
    """A turn's completion, or its close as abandoned (`abandoned_before`: the cutoff of its last activity), in
    the ledger's unit of work (services.ledger): both messages, the turn, and the counters moved from the
    placeholder's contribution to the finished message's. `turn`, `changed`: the outcome."""

    way = Way.TURN_COMPLETE
    prepared = True

    def __init__(self, *, turn_id, data: dict, tenant: Tenant | None = None, abandoned_before: datetime | None = None):
        self.turn_id, self.data, self.tenant, self.abandoned_before = turn_id, data, tenant, abandoned_before
        self.changed = False

    # 1.
    def validate(self) -> None:
        self.digest = "" if self.abandoned_before is not None else completion_digest(self.data)

    # 2.
    def lock(self) -> Locked | None:
        """The turn with its session and messages, locked; a closed turn takes only the same completion again
        (nothing to write), and an abandoned turn's close only a turn still streaming since the cutoff."""
        self.turn = turn = _locked_turn(self.turn_id, self.tenant)
        if self.abandoned_before is not None:
            if turn.status != TurnStatus.STREAMING or turn.last_activity_at >= self.abandoned_before:
                return None
            self.status = TurnStatus.ABANDONED
        else:
            if turn.status in CLOSED:
                if turn.completion_digest == self.digest:
                    return None
                raise TurnCompletedDifferently(turn)
            self.status = TurnStatus.FAILED if self.data["finish_reason"] == "error" else TurnStatus.COMPLETED
        self.changed = True
        return Locked(sessions=[turn.session])

    # 3.
    def rows(self, locked: Locked) -> list:
        turn, data, status = self.turn, self.data, self.status
        self.now = now = timezone.now()
        session, assistant, user = turn.session, turn.assistant_message, turn.user_message
        before_key, before = turn_answer_usage(assistant)

        assistant.role = Role.ERROR if data["finish_reason"] == "error" else Role.ASSISTANT
        for field in ("content", "thinking", "model", "max_tokens", "temperature", "finish_reason", "elapsed_ms"):
            if field in data and data[field] is not None:
                setattr(assistant, field, redact_text(data[field]) if field in ("content", "thinking") else data[field])
        for field in MEASURE_FIELDS:
            if data.get(field) is not None:
                setattr(assistant, field, data[field])
        assistant.total_tokens = total_tokens(assistant.input_tokens, assistant.output_tokens, assistant.total_tokens)
        assistant.cache_creation_tokens, assistant.cache_creation_5m_tokens, assistant.cache_creation_1h_tokens = (
            cache_writes(
                assistant.cache_creation_tokens, assistant.cache_creation_5m_tokens, assistant.cache_creation_1h_tokens
            )
        )
        long = long_context(
            *(getattr(assistant, name) for name in ("input_tokens", "output_tokens", "cache_read_tokens")),
            assistant.cache_creation_tokens,
            assistant.cache_creation_1h_tokens,
        )
        for name, value in zip(LONG_CONTEXT_FIELDS, long, strict=True):
            setattr(assistant, name, value)
        if "tool_calls" in data:
            assistant.tool_calls = redact(data["tool_calls"])
        if "tool_names" in data:
            assistant.tool_names = data["tool_names"]
        elif assistant.tool_calls:
            assistant.tool_names = sorted({call.get("name") for call in assistant.tool_calls if call.get("name")})
        assistant.api_calls = data.get("requests", 1 if status != TurnStatus.ABANDONED else 0)
        # A reported cost covers the calls the answer reports (compared like for like when every call reported one).
        assistant.reported_cost_requests = assistant.api_calls if assistant.reported_cost_nano_usd is not None else None
        # The error of this completion, or none: a late completion replaces the abandoned close's error.
        assistant.metadata = {k: v for k, v in assistant.metadata.items() if k != "error"}
        if isinstance(data.get("metadata"), dict):  # what the caller knows of the call (the gateway's timings)
            assistant.metadata.update(redact(data["metadata"]))
        if data.get("error"):
            assistant.metadata["error"] = redact_text(data["error"])
        if needs_index(assistant.content):
            index_after_commit([assistant.pk])

        user_fields = [name for name, key in USER_FIELDS if key in data]
        for name, key in USER_FIELDS:
            if key in data:
                setattr(user, name, data[key])

        after_key, after = turn_answer_usage(assistant)
        self.delta = _difference(after, before)
        self.rollup: dict[tuple[datetime, str], Counter] = defaultdict(Counter)
        for field in COUNTER_FIELDS:  # out of the placeholder's hour/model bucket, into the finished message's
            self.rollup[before_key][field] -= before.get(field, 0)
            self.rollup[after_key][field] += after.get(field, 0)

        turn.status = status
        turn.completed_at = turn.last_activity_at = now
        turn.completion_digest = self.digest
        clauses = [
            update_rows_sql(Message, [assistant], list(ANSWER_FIELDS)),
            update_rows_sql(Message, [user], user_fields) if user_fields else None,
            update_rows_sql(Turn, [turn], ["status", "completed_at", "last_activity_at", "completion_digest"]),
        ]
        # Other apps' bookkeeping of the changed text (the memory status's embedding watermark), in the same
        # statement.
        clauses.extend(
            clause
            for _, clause in turn_completing.send(
                sender=Turn, session_id=session.pk, first_seq=user.seq, message_ids=[user.pk, assistant.pk]
            )
        )
        return clauses

    # 4.
    def counters(self) -> list:
        counters = (*(self.delta[field] for field in COUNTER_FIELDS), self.now)
        last_message_at = {"last_message_at": ("timestamptz", "GREATEST(t.last_message_at, v.last_message_at)")}
        return [
            add_to_rows_sql(
                Conversation, add=COUNTER_FIELDS, assign=last_message_at, rows=[(self.turn.conversation_id, *counters)]
            ),
            add_to_rows_sql(
                Session, add=COUNTER_FIELDS, assign=last_message_at, rows=[(self.turn.session_id, *counters)]
            ),
        ]

    def usage(self) -> list:
        return [(self.turn.session, self.rollup)]

    # 6.
    def after_write(self) -> None:
        turn, session = self.turn, self.turn.session
        for name in COUNTER_FIELDS:
            setattr(session, name, getattr(session, name) + self.delta[name])
        assistant, tool_schema, error = turn.assistant_message, self.data.get("tool_schema"), self.data.get("error")
        transaction.on_commit(lambda: _after_commit(turn, assistant, tool_schema, error))


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
        "pk", flat=True
    )[:limit]
    closed = 0
    for turn_id in candidates:
        seconds = int(older_than.total_seconds())
        data = {"finish_reason": "error", "error": f"Abandoned: no completion within {seconds} s."}
        with transaction.atomic():  # each turn re-checked under its lock (TurnFinish.lock)
            closed += write(TurnFinish(turn_id=turn_id, data=data, abandoned_before=cutoff)).changed
    return closed
