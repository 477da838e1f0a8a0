"""Appending messages: seq, conversations, requests and every counter, in one transaction — the messages' part
(`MessagesAppend`) of the ledger's unit of work (`services.ledger.write`), for the API, a turn's start, imports
and OTLP.

The session row is locked (`SELECT … FOR UPDATE`) for the whole append, which makes seq assignment,
conversation boundaries, request de-duplication and the counters exact under concurrent writers to the
same session. Writers to different sessions only meet on the hourly roll-up rows, which are upserted in
a fixed order so they cannot deadlock.

An import may also complete a stored message in place (`amend=True`): a log that re-emits a message under
the same `external_id` (a streamed response whose later lines arrived, a record its tool rewrote) grows the
stored row and its request, and the counters by exactly that growth — never a second message or request.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from platform_kit.db import (
    Clause,
    add_to_rows_sql,
    copy_insert,
    insert_rows_sql,
    mark_saved,
    unsaved_instance,
    update_rows_sql,
)
from platform_kit.redaction import redact_fields
from sessions_app.accounting import (
    CONVERSATIONS,
    MESSAGES,
    REQUESTS,
    ROLE_POSITION,
    SESSIONS,
    Round,
    conversation_target,
    empty_tally,
    hour_of,
    is_request,
    message_tokens,
    own_tokens,
    request_growth,
    tally_as_dict,
    tally_growth,
    tally_message,
)
from sessions_app.models import Conversation, LlmRequest, Message, Session, Tenant
from sessions_app.schema import (
    COUNTER_FIELDS,
    MEASURE_FIELDS,
    MESSAGE_INPUT_FIELDS,
    ROLLUP_FIELDS,
    SESSION_COUNTER_FIELDS,
)
from sessions_app.search import index_after_commit, needs_index
from sessions_app.services.ledger import Change, Locked, Way, lock_session, write
from sessions_app.signals import Appended, messages_amended, messages_appended


@dataclass(frozen=True)
class AppendResult:
    messages: list[Message]  # one per input item, in input order; a repeated external_id gives the stored row
    created: int
    counters: dict[str, int] = field(default_factory=dict)  # what the append added to the session's counters
    new: list[bool] = field(default_factory=list)  # per item: stored now (True) or a repeat of a stored one
    amended: int = 0  # stored messages completed in place (`amend=True`)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# The message fields stored as the writer gave them; the tokens are stored as accounting.message_tokens says.
_INPUT_FIELDS = frozenset(MESSAGE_INPUT_FIELDS) - set(MEASURE_FIELDS)
# What a re-emitted message replaces when it differs (its tokens only grow). Where and when it was said —
# role, conversation, request, model, created_at — stay as first stored: the counters were kept under them.
AMENDED_FIELDS = ("content", "thinking", "tool_calls", "finish_reason", "metadata")
# What a client writes freely, where a credential may hide: redacted before anything is counted or stored.
REDACTED_FIELDS = ("content", "thinking", "tool_calls", "metadata", "attachments")
_AMENDED_DEFAULTS = {name: Message._meta.get_field(name).get_default() for name in AMENDED_FIELDS}


class _Append:
    """The bookkeeping of one append call for one session (see messages_append): the rows it makes and what
    they add to the counters, by the rules of `sessions_app.accounting`. Rows are referred to by `.id` (the
    primary key of every model here), not `.pk`, a property that looks the name up, a few times per message."""

    def __init__(self, session: Session, items: list[dict], now: datetime):
        self.session = session
        self.items = items  # redacted (MessagesAppend.validate)
        self.now = now
        self.seq = session.last_seq
        self.conversation_count = session.conversations
        self.current: Conversation | None = None
        self.current_loaded = session.current_conversation_id is None
        self.conversations_by_ref: dict[str, Conversation] = {}
        self.new_conversations: list[Conversation] = []
        self.requests_by_id: dict[str, LlmRequest] = {}
        self.new_requests: list[LlmRequest] = []
        self.new_request_ids: set[uuid.UUID] = set()
        self.changed_requests: dict[uuid.UUID, LlmRequest] = {}
        self.session_tally = empty_tally()
        self.conversation_tally: dict[uuid.UUID, list[int]] = {}
        self.conversation_last: dict[uuid.UUID, datetime] = {}
        self.conversation_feishu: dict[uuid.UUID, str] = {}
        self.rollup: dict[tuple[datetime, str], list[int]] = {}
        self.last_message_at: datetime | None = None
        self.amended: dict[uuid.UUID, Message] = {}  # stored rows completed in place
        self.restated: list[uuid.UUID] = []  # of those, the ones whose content changed (to index and embed again)

    def current_conversation(self) -> Conversation | None:
        if not self.current_loaded:
            self.current = Conversation.objects.filter(pk=self.session.current_conversation_id).first()
            self.current_loaded = True
        return self.current

    def rollup_tally(self, created_at: datetime, model: str) -> list[int]:
        key = (hour_of(created_at), model)
        tally = self.rollup.get(key)
        if tally is None:
            tally = self.rollup[key] = empty_tally()
        return tally

    # -- per message ---------------------------------------------------------------------------------
    def _new_conversation(self, *, external_id: str, item: dict, created_at: datetime) -> Conversation:
        self.conversation_count += 1
        conversation = unsaved_instance(
            Conversation,
            tenant_id=self.session.tenant_id,
            session_id=self.session.id,
            ordinal=self.conversation_count,
            conversation_id=external_id,
            feishu_conversation_id=item.get("feishu_conversation_id") or "",
            started_at=created_at,
        )
        self.new_conversations.append(conversation)
        self.session_tally[CONVERSATIONS] += 1
        self.rollup_tally(created_at, item.get("model") or "")[CONVERSATIONS] += 1
        return conversation

    def conversation_for(self, item: dict, created_at: datetime) -> Conversation | None:
        target = conversation_target(item)
        if target is Round.NEW:
            conversation = self._new_conversation(external_id="", item=item, created_at=created_at)
        elif target is Round.CURRENT:
            conversation = self.current_conversation()
        else:
            conversation = self.conversations_by_ref.get(target)
            if conversation is None:
                conversation = self._new_conversation(external_id=target, item=item, created_at=created_at)
                self.conversations_by_ref[target] = conversation
        if conversation is not None:
            self.current, self.current_loaded = conversation, True
            feishu = item.get("feishu_conversation_id")
            if feishu and not conversation.feishu_conversation_id:
                conversation.feishu_conversation_id = feishu
                self.conversation_feishu[conversation.id] = feishu
        return conversation

    def request_for(
        self, item: dict, tokens: tuple, conversation_id, created_at
    ) -> tuple[LlmRequest | None, int, tuple]:
        """The request the message belongs to, whether it is new (0/1), and the tokens it adds to the counters."""
        request_id = item.get("request_id") or ""
        request = self.requests_by_id.get(request_id) if request_id else None
        new = 0
        if request is None and is_request(item):
            request = unsaved_instance(
                LlmRequest,
                tenant_id=self.session.tenant_id,
                session_id=self.session.id,
                conversation_id=conversation_id,
                request_id=request_id,
                auth_type=item.get("auth_type") or "",
                model=item.get("model") or "",
                created_at=created_at,
            )
            self.new_requests.append(request)
            self.new_request_ids.add(request.id)
            if request_id:
                self.requests_by_id[request_id] = request
            new = 1
        elif request is not None and request.id not in self.new_request_ids:
            self.changed_requests[request.id] = request
        if request is None:
            return None, 0, own_tokens(tokens)
        growth = request_growth(request.__dict__, tokens)  # the request's largest values are its fields
        if not request.model and item.get("model"):
            request.model = item["model"]
        if not request.auth_type and item.get("auth_type"):
            request.auth_type = item["auth_type"]
        return request, new, growth

    def add(self, item: dict) -> Message:
        created_at = item.get("created_at") or self.now
        conversation = self.conversation_for(item, created_at)
        tokens = message_tokens(item)
        request, new_request, growth = self.request_for(
            item, tokens, conversation.id if conversation else None, created_at
        )
        role = item["role"]

        tally_message(self.session_tally, role, new_request, growth)
        rollup = self.rollup_tally(created_at, item.get("model") or (request.model if request else ""))
        tally_message(rollup, role, new_request, growth)
        if self.seq == 0:
            # The session's first message: the session counts once, in this message's hour and model.
            rollup[SESSIONS] += 1
        if conversation is not None:
            conversation_id = conversation.id
            tally = self.conversation_tally.get(conversation_id)
            if tally is None:
                tally = self.conversation_tally[conversation_id] = empty_tally()
            tally_message(tally, role, new_request, growth)
            previous = self.conversation_last.get(conversation_id)
            self.conversation_last[conversation_id] = max(previous, created_at) if previous else created_at
        self.last_message_at = max(self.last_message_at, created_at) if self.last_message_at else created_at

        self.seq += 1
        fields = {name: value for name, value in item.items() if value is not None and name in _INPUT_FIELDS}
        for name, value in zip(MEASURE_FIELDS, tokens, strict=True):
            if value is not None:
                fields[name] = value
        message = unsaved_instance(
            Message,
            tenant_id=self.session.tenant_id,
            session_id=self.session.id,
            conversation_id=conversation.id if conversation else None,
            llm_request_id=request.id if request else None,
            seq=self.seq,
            created_at=created_at,
            received_at=self.now,
            **fields,
        )
        cache = message._state.fields_cache
        cache["session"], cache["conversation"], cache["llm_request"] = self.session, conversation, request
        return message

    def amend(self, message: Message, item: dict) -> bool:
        """Complete `message` (stored, or made earlier in this append) with `item`, a later version of it: the
        text fields replaced where they differ, each token field grown to the larger value, its request grown
        by rule 3, and the counters by exactly what that added. False when the item adds nothing."""
        values = {name: _AMENDED_DEFAULTS[name] if item.get(name) is None else item[name] for name in AMENDED_FIELDS}
        changed = {name: value for name, value in values.items() if getattr(message, name) != value}
        if message.content_purged_at is not None:
            changed = {}  # its text went by the tenant's retention: a later version of it does not bring it back
        stored = tuple(getattr(message, name) for name in MEASURE_FIELDS)
        tokens = tuple(
            old if new is None or (old is not None and old >= new) else new
            for old, new in zip(stored, message_tokens(item), strict=True)
        )
        request = self._request_of(message)
        promoted = request is None and is_request(item)
        if not promoted and not changed and tokens == stored:
            return False
        if promoted:
            self._promote(message, item, tokens)
        else:
            self._grow(message, request, item, stored, tokens)
        message.__dict__.update(changed)
        message.__dict__.update(zip(MEASURE_FIELDS, tokens, strict=True))
        if message._state.adding:
            return True  # made in this append: inserted as it is now
        message.received_at = self.now
        self.amended[message.id] = message
        if "content" in changed and message.id not in self.restated:
            self.restated.append(message.id)
        return True

    def _grow(self, message: Message, request: LlmRequest | None, item: dict, stored: tuple, tokens: tuple) -> None:
        """Count what a later version of a message adds: its request's growth (rule 3), or for a message that is
        no request, its own tokens' growth — in the session, its conversation and its roll-up row."""
        if request is None:
            growth = tuple((new or 0) - (old or 0) for old, new in zip(stored, tokens, strict=True))
        else:
            growth = request_growth(request.__dict__, tokens)
            if not request.model and item.get("model"):
                request.model = item["model"]
            if request.id not in self.new_request_ids:
                self.changed_requests[request.id] = request
        model = message.model or (request.model if request else "")
        for tally in (
            self.session_tally,
            self.rollup_tally(message.created_at, model),
            self._conversation_tally_of(message),
        ):
            tally_growth(tally, growth)

    def _conversation_tally_of(self, message: Message) -> list[int]:
        """The tally of the conversation a stored message is in (a throwaway one when it is in none)."""
        conversation_id = message.conversation_id
        if conversation_id is None:
            return empty_tally()
        tally = self.conversation_tally.get(conversation_id)
        if tally is None:
            tally = self.conversation_tally[conversation_id] = empty_tally()
        previous = self.conversation_last.get(conversation_id)
        self.conversation_last[conversation_id] = max(previous, message.created_at) if previous else message.created_at
        return tally

    def _promote(self, message: Message, item: dict, tokens: tuple) -> None:
        """A message stored before it was known to be a call (a record written before its usage, a streamed
        step stored before it finished) is one now: it joins (or opens) its request, and what it counted as a
        message of its own is taken back and counted as the request's. Under its new roll-up model too: a
        message without a model of its own counts under its request's (as the recount does)."""
        role = message.role
        before = own_tokens(tuple(getattr(message, name) for name in MEASURE_FIELDS))
        old_model = message.model or ""
        request, new_request, growth = self.request_for(item, tokens, message.conversation_id, message.created_at)
        delta = tuple(after - was for after, was in zip(growth, before, strict=True))
        for tally in (self.session_tally, self._conversation_tally_of(message)):
            tally[REQUESTS] += new_request
            tally_growth(tally, delta)
        old = self.rollup_tally(message.created_at, old_model)
        old[MESSAGES] -= 1
        old[ROLE_POSITION[role]] -= 1
        tally_growth(old, tuple(-value for value in before))
        tally_message(self.rollup_tally(message.created_at, message.model or request.model), role, new_request, growth)
        message.request_id = request.request_id
        message.auth_type = message.auth_type or item.get("auth_type") or ""
        message.llm_request_id = request.id
        message._state.fields_cache["llm_request"] = request

    def _request_of(self, message: Message) -> LlmRequest | None:
        """The request a message was counted in: made in this append, loaded with the items' request ids, or
        (a request of its own, without an id) read now."""
        if message.llm_request_id is None:
            return None
        request = message._state.fields_cache.get("llm_request")
        if request is None:
            request = self.requests_by_id.get(message.request_id) if message.request_id else None
            if request is None or request.id != message.llm_request_id:
                request = LlmRequest.objects.get(pk=message.llm_request_id)
            message._state.fields_cache["llm_request"] = request
        return request

    # -- writing -------------------------------------------------------------------------------------
    def counters(self) -> dict[str, int]:
        return tally_as_dict(self.session_tally, SESSION_COUNTER_FIELDS)

    def rollup_deltas(self) -> dict[tuple[datetime, str], dict[str, int]]:
        return {key: tally_as_dict(tally, ROLLUP_FIELDS) for key, tally in self.rollup.items()}

    def update_session(self) -> None:
        """Bring the in-memory session row up to what write() stored (a caller may append to it again)."""
        session = self.session
        for name, value in self.counters().items():
            setattr(session, name, getattr(session, name) + value)
        session.last_seq = self.seq
        if self.current_loaded:
            session.current_conversation = self.current
        if self.last_message_at and (session.last_message_at is None or self.last_message_at > session.last_message_at):
            session.last_message_at = self.last_message_at


# -- what the appended items refer to, for all the sessions of one append: one query each, none for
# sessions without messages (conversations, requests) -------------------------------------------------------
def _load_stored(appends: list[_Append]) -> dict[tuple, Message]:
    """The stored messages the items repeat, by (session id, external id)."""
    wanted = {
        (append.session.pk, item["external_id"])
        for append in appends
        if append.session.last_seq
        for item in append.items
        if item.get("external_id")
    }
    if not wanted:
        return {}
    rows = Message.objects.filter(
        session_id__in={pair[0] for pair in wanted}, external_id__in={pair[1] for pair in wanted}
    )
    return {(m.session_id, m.external_id): m for m in rows if (m.session_id, m.external_id) in wanted}


def _load_conversation_refs(appends: list[_Append]) -> None:
    by_session = {append.session.pk: append for append in appends if append.session.conversations}
    refs = {item["conversation"] for append in by_session.values() for item in append.items if item.get("conversation")}
    if not refs:
        return
    for conversation in Conversation.objects.filter(session_id__in=by_session, conversation_id__in=refs).order_by(
        "session_id", "ordinal"
    ):
        by_session[conversation.session_id].conversations_by_ref.setdefault(conversation.conversation_id, conversation)
    ids = [ref for ref in refs if _is_uuid(ref)]
    for conversation in Conversation.objects.filter(session_id__in=by_session, pk__in=ids):
        # our id wins over a client id
        by_session[conversation.session_id].conversations_by_ref[str(conversation.pk)] = conversation


def _load_requests(appends: list[_Append], stored: dict[tuple, Message]) -> None:
    """The stored requests the items name, and (to complete them in place) those of the stored messages they repeat."""
    by_session = {append.session.pk: append for append in appends if append.session.requests}
    request_ids = {
        item["request_id"] for append in by_session.values() for item in append.items if item.get("request_id")
    }
    request_ids.update(message.request_id for message in stored.values() if message.request_id)
    if request_ids:
        for request in LlmRequest.objects.filter(session_id__in=by_session, request_id__in=request_ids):
            by_session[request.session_id].requests_by_id[request.request_id] = request


# -- writing what the appends made: one statement per table, whatever the number of sessions; for the few
# rows of an API call, one statement in all (the ledger's, services.ledger) ------------------------------------
# Up to this many new rows are inserted by clauses of the ledger's one statement; more go by COPY first.
INLINE_ROWS = 100


def _row_clauses(
    appends: list[_Append], messages: list[Message], *, index_later: bool
) -> tuple[list[Clause | None], bool]:
    """The new conversations, requests and messages (inserted by clauses, or COPYed first: then `copied`) and
    the stored requests and messages the appends changed. Returns (clauses, copied)."""
    new_conversations = []
    for append in appends:
        for conversation in append.new_conversations:
            tally = append.conversation_tally.get(conversation.pk)
            if tally is not None:
                conversation.__dict__.update(zip(COUNTER_FIELDS, tally, strict=False))
            conversation.last_message_at = append.conversation_last.get(conversation.pk)
            new_conversations.append(conversation)
    new_requests = [request for append in appends for request in append.new_requests]
    inserted = [(Conversation, new_conversations), (LlmRequest, new_requests), (Message, messages)]
    clauses = []
    copied = index_later or sum(len(rows) for _, rows in inserted) > INLINE_ROWS
    if copied:
        copy_insert(Conversation, new_conversations)
        copy_insert(LlmRequest, new_requests)
        if messages:
            if index_later:
                _defer_search(True)  # read by the insert trigger of migration 0008, for this write only
            copy_insert(Message, messages)
            if index_later:
                _defer_search(False)
    else:
        clauses.extend(insert_rows_sql(model, rows) for model, rows in inserted)
    changed = [request for append in appends for request in append.changed_requests.values()]
    clauses.append(update_rows_sql(LlmRequest, changed, [*MEASURE_FIELDS, "model", "auth_type"]))
    # A changed content gets its search vector again from the update trigger of migration 0008 (or NULL,
    # for the indexing task, when it is long).
    clauses.append(
        update_rows_sql(
            Message,
            [message for append in appends for message in append.amended.values()],
            [*AMENDED_FIELDS, *MEASURE_FIELDS, "received_at", "request_id", "auth_type", "llm_request"],
        )
    )
    return clauses, copied


def _counter_clauses(appends: list[_Append]) -> list[Clause | None]:
    """What the appends add to the counters of the stored conversations and of the sessions (with their last
    seq, current conversation and last message time); new conversations are inserted with theirs."""
    existing = []
    for append in appends:
        new_ids = {conversation.pk for conversation in append.new_conversations}
        existing.extend(
            (pk, *tally[: len(COUNTER_FIELDS)], append.conversation_last[pk], append.conversation_feishu.get(pk))
            for pk, tally in append.conversation_tally.items()
            if pk not in new_ids
        )
    return [
        add_to_rows_sql(
            Conversation,
            add=COUNTER_FIELDS,
            assign={
                "last_message_at": ("timestamptz", "GREATEST(t.last_message_at, v.last_message_at)"),
                "feishu_conversation_id": ("varchar", "COALESCE(v.feishu_conversation_id, t.feishu_conversation_id)"),
            },
            rows=existing,
        ),
        add_to_rows_sql(
            Session,
            add=SESSION_COUNTER_FIELDS,
            assign={
                "last_seq": ("bigint", "v.last_seq"),
                "current_conversation_id": ("uuid", "v.current_conversation_id"),
                "last_message_at": ("timestamptz", "GREATEST(t.last_message_at, v.last_message_at)"),
            },
            rows=[
                (
                    append.session.pk,
                    *append.session_tally[: len(SESSION_COUNTER_FIELDS)],
                    append.seq,
                    append.current.pk if append.current else append.session.current_conversation_id,
                    append.last_message_at,
                )
                for append in appends
            ],
        ),
    ]


def _defer_search(on: bool) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('ace.defer_search', %s, true)", ["on" if on else "off"])


class MessagesAppend(Change):
    """Messages appended to sessions: the messages' part of the ledger's unit of work (services.ledger), for
    every way in that brings messages (the API, a turn's start, imports, OTLP). `appends`: (session, items)
    pairs, each session once, its row locked (or created) by the caller's transaction; a subclass locks its
    own (`OneSession`, `turns.TurnStart`). `results`: an AppendResult per session, once written."""

    def __init__(
        self,
        *,
        way: Way,
        appends: list[tuple[Session | None, list[dict]]],
        index_later: bool = False,
        amend: bool = False,
        also: Callable[[list[list[Message]]], list[Clause]] | None = None,
        announce: bool = True,
        api_key_id=None,
    ):
        self.way = way
        self.appends_in = appends
        self.index_later, self.amend, self.also, self.announce = index_later, amend, also, announce
        self.api_key_id = api_key_id
        self.results: list[AppendResult] = []

    # 1.
    def validate(self) -> None:
        # Every message write (the API, turns, every importer, OTLP) comes through here: secrets go first.
        self.items = [[redact_fields(item, REDACTED_FIELDS) for item in items] for _, items in self.appends_in]

    # 2.
    def lock(self) -> Locked | None:
        return Locked(sessions=[session for session, _ in self.appends_in])

    # 3.
    def rows(self, locked: Locked) -> list[Clause | None]:
        """Each item counted by the rules of sessions_app.accounting: a repeated `external_id` stores nothing and
        gives the stored row (or, with `amend`, completes it in place); the others become new rows."""
        now = timezone.now()
        appends = [_Append(session, items, now) for session, items in zip(locked.sessions, self.items, strict=True)]
        stored = _load_stored(appends)
        _load_conversation_refs(appends)
        _load_requests(appends, stored if self.amend else {})
        self.outcomes, self.new_messages = [], []
        for append in appends:
            results: list[Message] = []
            new: list[bool] = []
            session_id = append.session.id
            for item in append.items:
                external_id = item.get("external_id")
                repeated = stored.get((session_id, external_id)) if external_id else None
                if repeated is not None:
                    if self.amend:
                        append.amend(repeated, item)
                    results.append(repeated)
                    new.append(False)
                    continue
                message = append.add(item)
                if external_id:
                    stored[(session_id, external_id)] = message
                self.new_messages.append(message)
                results.append(message)
                new.append(True)
            self.outcomes.append((append, results, new))
        self.written = [append for append, _, new in self.outcomes if any(new) or append.amended]
        if not self.written:
            self.inserted = []
            return []
        clauses, copied = _row_clauses(self.written, self.new_messages, index_later=self.index_later)
        # The caller's own rows that go with these messages (a chat turn's), in the same statement.
        if self.also:
            clauses.extend(self.also([results for _, results, _ in self.outcomes]))
        # An API call's few rows, of a shape that comes again: prepared.
        self.prepared = not copied and len(self.written) == 1
        return clauses

    # 4.
    def counters(self) -> list[Clause | None]:
        return _counter_clauses(self.written) if self.written else []

    def usage(self) -> list[tuple[Session, dict]]:
        return [(append.session, append.rollup_deltas()) for append in self.written]

    # 6.
    def after_write(self) -> None:
        written = self.written
        if written:
            mark_saved([conversation for append in written for conversation in append.new_conversations])
            mark_saved([request for append in written for request in append.new_requests])
            mark_saved(self.new_messages)
            index_after_commit([m.id for m in self.new_messages if self.index_later or needs_index(m.content)])
            index_after_commit(
                [pk for append in written for pk in append.restated if needs_index(append.amended[pk].content)]
            )
        appended, amended = [], []
        for append, results, new in self.outcomes:
            created = [message for message, is_new in zip(results, new, strict=True) if is_new]
            session = append.session
            if created or append.amended:
                append.update_session()
            if created:
                appended.append(Appended(session.id, session.tenant_id, [message.id for message in created]))
            if append.restated:
                amended.append(Appended(session.id, session.tenant_id, append.restated))
            self.results.append(
                AppendResult(
                    messages=results,
                    created=len(created),
                    counters=append.counters(),
                    new=new,
                    amended=len(append.amended),
                )
            )
        if appended and self.announce:
            transaction.on_commit(lambda: messages_appended.send(sender=Session, appended=appended))
        if amended:
            transaction.on_commit(lambda: messages_amended.send(sender=Session, amended=amended))


class OneSession(MessagesAppend):
    """`MessagesAppend` to one session named by id: its row locked here, with whether a hard-limit budget of the
    tenant is used up (one statement)."""

    def __init__(self, *, tenant: Tenant, session_id, **kwargs):
        super().__init__(appends=[(None, kwargs.pop("items"))], **kwargs)
        self.tenant, self.session_id = tenant, session_id

    def lock(self) -> Locked | None:
        return lock_session(tenant=self.tenant, session_id=self.session_id)


def messages_append(
    *, tenant: Tenant, session_id: uuid.UUID, items: list[dict], index_later: bool = False, api_key_id=None
) -> AppendResult:
    """Store validated message dicts in order (the messages API's way in). Repeated `external_id`s store nothing
    and return the stored row.

    Short messages get their search vector as they are written, long ones from a task after the commit;
    `index_later` (bulk imports) leaves every message to that task, so the write does no text analysis.
    Raises Session.DoesNotExist when the session is not the tenant's, and BudgetUsedUp when a used-up
    hard-limit budget covers the write (by `api_key_id` into the session).
    """
    # No savepoint of its own: a failure here fails the caller's transaction too, which every caller wants.
    change = OneSession(
        way=Way.MESSAGES,
        tenant=tenant,
        session_id=session_id,
        items=items,
        index_later=index_later,
        api_key_id=api_key_id,
    )
    return write(change).results[0]


def messages_append_to_sessions(
    *,
    appends: list[tuple[Session, list[dict]]],
    way: Way = Way.IMPORT,
    index_later: bool = False,
    amend: bool = False,
    also: Callable[[list[list[Message]]], list[Clause]] | None = None,
    announce: bool = True,
) -> list[AppendResult]:
    """`messages_append` for several sessions at once (an import's files, an OTLP batch: `way`), with one
    statement per table for all of them. Each session must appear once, as the caller's transaction has just
    locked (or created) its row: the sequence numbers and counters go on from the row's values.

    `amend` (imports only): an item repeating a stored `external_id` is a later version of that message, and
    completes it in place (`_Append.amend`): a streamed response whose last lines arrived since, a record its
    tool rewrote. Its changed content is indexed and embedded again (`messages_amended`, after the commit).

    `also(messages)` (the messages per session, in input order) gives the caller's own writes that go with
    these messages: they are made in the same statement. `announce=False` sends no `messages_appended`."""
    change = MessagesAppend(
        way=way, appends=appends, index_later=index_later, amend=amend, also=also, announce=announce
    )
    return write(change).results
