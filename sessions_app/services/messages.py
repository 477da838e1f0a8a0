"""Appending messages: seq, conversations, requests and every counter, in one transaction.

The session row is locked (`SELECT … FOR UPDATE`) for the whole append, which makes seq assignment,
conversation boundaries, request de-duplication and the counters exact under concurrent writers to the
same session. Writers to different sessions only meet on the hourly roll-up rows, which are upserted in
a fixed order so they cannot deadlock.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, models, transaction
from django.db.models import F
from django.db.models.base import ModelState
from django.db.models.functions import Greatest
from django.utils import timezone
from psycopg.types.json import Jsonb

from sessions_app.models import (
    ROLE_COUNTER,
    TOKEN_FIELDS,
    Conversation,
    LlmRequest,
    Message,
    Role,
    Session,
    Tenant,
)
from sessions_app.search import index_after_commit, needs_index
from sessions_app.services.counters import hour_of, rollup_add
from sessions_app.signals import messages_appended

# Message fields a client may set (see serializers.MessageInSerializer).
MESSAGE_INPUT_FIELDS = (
    "role",
    "content",
    "thinking",
    "tool_calls",
    "tool_name",
    "auth_type",
    "request_id",
    "model",
    "finish_reason",
    *TOKEN_FIELDS,
    "elapsed_ms",
    "external_id",
    "feishu_conversation_id",
    "metadata",
    "attachments",
    "thinking_mode",
)


@dataclass(frozen=True)
class AppendResult:
    messages: list[Message]  # one per input item, in input order; a repeated external_id gives the stored row
    created: int


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _message_tokens(item: dict) -> dict[str, int | None]:
    tokens = {field: item.get(field) for field in TOKEN_FIELDS}
    if tokens["total_tokens"] is None and (tokens["input_tokens"] is not None or tokens["output_tokens"] is not None):
        # Cache reads and writes are reported on their own; total means input + output unless the client says.
        tokens["total_tokens"] = (tokens["input_tokens"] or 0) + (tokens["output_tokens"] or 0)
    return tokens


class _Append:
    """The bookkeeping of one append call; see messages_append."""

    def __init__(self, session: Session, now: datetime):
        self.session = session
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
        self.session_delta: Counter = Counter()
        self.conversation_delta: dict[uuid.UUID, Counter] = defaultdict(Counter)
        self.conversation_last: dict[uuid.UUID, datetime] = {}
        self.conversation_feishu: dict[uuid.UUID, str] = {}
        self.rollup: dict[tuple[datetime, str], Counter] = defaultdict(Counter)
        self.last_message_at: datetime | None = None

    # -- loading what the batch refers to, one query each --------------------------------------------
    def load_conversation_refs(self, items: list[dict]) -> None:
        refs = {item["conversation"] for item in items if item.get("conversation")}
        if not refs:
            return
        by_external = Conversation.objects.filter(session=self.session, conversation_id__in=refs)
        for conversation in by_external:
            self.conversations_by_ref.setdefault(conversation.conversation_id, conversation)
        ids = [ref for ref in refs if _is_uuid(ref)]
        for conversation in Conversation.objects.filter(session=self.session, pk__in=ids):
            self.conversations_by_ref[str(conversation.pk)] = conversation  # our id wins over a client id

    def load_requests(self, items: list[dict]) -> None:
        request_ids = {item["request_id"] for item in items if item.get("request_id")}
        if request_ids:
            for request in LlmRequest.objects.filter(session=self.session, request_id__in=request_ids):
                self.requests_by_id[request.request_id] = request

    def current_conversation(self) -> Conversation | None:
        if not self.current_loaded:
            self.current = Conversation.objects.filter(pk=self.session.current_conversation_id).first()
            self.current_loaded = True
        return self.current

    # -- per message ---------------------------------------------------------------------------------
    def _new_conversation(self, *, external_id: str, item: dict, created_at: datetime) -> Conversation:
        self.conversation_count += 1
        conversation = _new(
            Conversation,
            tenant_id=self.session.tenant_id,
            session_id=self.session.pk,
            ordinal=self.conversation_count,
            conversation_id=external_id,
            feishu_conversation_id=item.get("feishu_conversation_id") or "",
            started_at=created_at,
        )
        self.new_conversations.append(conversation)
        self.session_delta["conversations"] += 1
        self.rollup[(hour_of(created_at), item.get("model") or "")]["conversations"] += 1
        return conversation

    def conversation_for(self, item: dict, created_at: datetime) -> Conversation | None:
        ref = item.get("conversation")
        if ref:
            conversation = self.conversations_by_ref.get(ref)
            if conversation is None:
                conversation = self._new_conversation(external_id=ref, item=item, created_at=created_at)
                self.conversations_by_ref[ref] = conversation
        elif item["role"] == Role.USER:
            # A real user message starts a round; a tool result, an error or a system line never does.
            conversation = self._new_conversation(external_id="", item=item, created_at=created_at)
        else:
            conversation = self.current_conversation()
        if conversation is not None:
            self.current, self.current_loaded = conversation, True
            feishu = item.get("feishu_conversation_id")
            if feishu and not conversation.feishu_conversation_id:
                conversation.feishu_conversation_id = feishu
                self.conversation_feishu[conversation.pk] = feishu
        return conversation

    def request_for(self, item: dict, tokens: dict, conversation, created_at) -> tuple[LlmRequest | None, Counter]:
        """The request the message belongs to, and what it adds to the counters (new request, token growth)."""
        delta: Counter = Counter()
        request_id = item.get("request_id") or ""
        request = self.requests_by_id.get(request_id) if request_id else None
        if request is None and (request_id or item.get("auth_type")):
            request = _new(
                LlmRequest,
                tenant_id=self.session.tenant_id,
                session_id=self.session.pk,
                conversation_id=conversation.pk if conversation else None,
                request_id=request_id,
                auth_type=item.get("auth_type") or "",
                model=item.get("model") or "",
                created_at=created_at,
            )
            self.new_requests.append(request)
            self.new_request_ids.add(request.pk)
            if request_id:
                self.requests_by_id[request_id] = request
            delta["requests"] = 1
        elif request is not None and request.pk not in self.new_request_ids:
            self.changed_requests[request.pk] = request
        if request is None:
            for field in TOKEN_FIELDS:
                delta[field] = tokens[field] or 0
            return None, delta
        # Repeated lines of one response report growing usage: the request keeps the largest value
        # of each kind, and only the growth is added to the counters (never a sum of the lines).
        for field in TOKEN_FIELDS:
            before = getattr(request, field)
            after = max(before, tokens[field] or 0)
            delta[field] = after - before
            setattr(request, field, after)
        if not request.model and item.get("model"):
            request.model = item["model"]
        if not request.auth_type and item.get("auth_type"):
            request.auth_type = item["auth_type"]
        return request, delta

    def add(self, item: dict) -> Message:
        created_at = item.get("created_at") or self.now
        conversation = self.conversation_for(item, created_at)
        tokens = _message_tokens(item)
        request, delta = self.request_for(item, tokens, conversation, created_at)
        delta["messages"] = 1
        delta[ROLE_COUNTER[item["role"]]] = 1

        self.session_delta.update(delta)
        rollup_key = (hour_of(created_at), item.get("model") or (request.model if request else ""))
        self.rollup[rollup_key].update(delta)
        if self.seq == 0:
            # The session's first message: the session counts once, in this message's hour and model.
            self.rollup[rollup_key]["sessions"] += 1
        if conversation is not None:
            self.conversation_delta[conversation.pk].update(delta)
            previous = self.conversation_last.get(conversation.pk)
            self.conversation_last[conversation.pk] = max(previous, created_at) if previous else created_at
        self.last_message_at = max(self.last_message_at, created_at) if self.last_message_at else created_at

        self.seq += 1
        fields = {name: item[name] for name in MESSAGE_INPUT_FIELDS if item.get(name) is not None}
        fields.update({name: value for name, value in tokens.items() if value is not None})
        message = _new(
            Message,
            tenant_id=self.session.tenant_id,
            session_id=self.session.pk,
            conversation_id=conversation.pk if conversation else None,
            llm_request_id=request.pk if request else None,
            seq=self.seq,
            created_at=created_at,
            received_at=self.now,
            **fields,
        )
        cache = message._state.fields_cache
        cache["session"], cache["conversation"], cache["llm_request"] = self.session, conversation, request
        return message

    # -- writing -------------------------------------------------------------------------------------
    def write(self, messages: list[Message]) -> None:
        new_conversation_ids = set()
        for conversation in self.new_conversations:
            new_conversation_ids.add(conversation.pk)
            for field, value in self.conversation_delta[conversation.pk].items():
                setattr(conversation, field, value)
            conversation.last_message_at = self.conversation_last.get(conversation.pk)
        _copy_insert(Conversation, self.new_conversations)
        _copy_insert(LlmRequest, self.new_requests)
        if self.changed_requests:
            LlmRequest.objects.bulk_update(list(self.changed_requests.values()), [*TOKEN_FIELDS, "model", "auth_type"])
        _copy_insert(Message, messages)

        for conversation_id, delta in self.conversation_delta.items():
            if conversation_id in new_conversation_ids:
                continue
            update = {field: F(field) + value for field, value in delta.items() if value}
            update["last_message_at"] = Greatest(F("last_message_at"), self.conversation_last[conversation_id])
            if conversation_id in self.conversation_feishu:
                update["feishu_conversation_id"] = self.conversation_feishu[conversation_id]
            Conversation.objects.filter(pk=conversation_id).update(**update)

        session_update = {field: F(field) + value for field, value in self.session_delta.items() if value}
        Session.objects.filter(pk=self.session.pk).update(
            **session_update,
            last_seq=self.seq,
            current_conversation=self.current,
            last_message_at=Greatest(F("last_message_at"), self.last_message_at),
        )
        rollup_add(session=self.session, deltas=self.rollup)


def _defaults(model) -> tuple[dict, list]:
    """The model's field defaults: (constant values by attname, [(attname, callable)])."""
    cached = _DEFAULTS.get(model)
    if cached is None:
        constants, calls = {}, []
        for field in model._meta.concrete_fields:
            if field.has_default() and callable(field.default):
                calls.append((field.attname, field.default))
            else:
                constants[field.attname] = field.get_default()
        cached = _DEFAULTS[model] = (constants, calls)
    return cached


_DEFAULTS: dict = {}


def _new(model_class, /, **values):
    """A new, unsaved instance with every field set, without Model.__init__: a bulk append makes one per
    message, and __init__ (signals, descriptors, per-field checks) cost more than the rest of the append."""
    constants, calls = _defaults(model_class)
    instance = model_class.__new__(model_class)
    instance._state = ModelState()
    attributes = instance.__dict__
    attributes.update(constants)
    for attname, default in calls:
        if attname not in values:
            attributes[attname] = default()
    attributes.update(values)
    return instance


def _copy_insert(model, objects: list) -> None:
    """Insert with COPY, several times faster than INSERT for batches. The ids are made in Python and
    nothing has to come back (bulk_create would also return each message's generated search vector)."""
    if not objects:
        return
    skip = getattr(model, "db_computed_fields", ())
    fields = [f for f in model._meta.concrete_fields if not f.generated and f.attname not in skip]
    json_fields = {f.attname for f in fields if isinstance(f, models.JSONField)}
    attnames = [f.attname for f in fields]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {model._meta.db_table} ({columns}) FROM STDIN") as copy:
            for obj in objects:
                values = obj.__dict__
                copy.write_row(
                    [
                        Jsonb(values[name]) if name in json_fields and values[name] is not None else values[name]
                        for name in attnames
                    ]
                )
    for obj in objects:
        obj._state.adding = False
        obj._state.db = connection.alias


def _defer_search(on: bool) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('ace.defer_search', %s, true)", ["on" if on else "off"])


def messages_append(
    *, tenant: Tenant, session_id: uuid.UUID, items: list[dict], index_later: bool = False
) -> AppendResult:
    """Store validated message dicts in order. Repeated `external_id`s store nothing and return the stored row.

    Short messages get their search vector as they are written, long ones from a task after the commit;
    `index_later` (bulk imports) leaves every message to that task, so the write does no text analysis.
    Raises Session.DoesNotExist when the session is not the tenant's.
    """
    now = timezone.now()
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id, tenant=tenant, deleted_at__isnull=True)
        external_ids = [item["external_id"] for item in items if item.get("external_id")]
        stored = (
            {m.external_id: m for m in Message.objects.filter(session=session, external_id__in=external_ids)}
            if external_ids
            else {}
        )
        append = _Append(session, now)
        append.load_conversation_refs(items)
        append.load_requests(items)

        results: list[Message] = []
        new_messages: list[Message] = []
        for item in items:
            external_id = item.get("external_id")
            if external_id and external_id in stored:
                results.append(stored[external_id])
                continue
            message = append.add(item)
            if external_id:
                stored[external_id] = message
            new_messages.append(message)
            results.append(message)
        if new_messages:
            if index_later:
                _defer_search(True)  # read by the insert trigger of migration 0008, for this write only
            append.write(new_messages)
            if index_later:
                _defer_search(False)
            message_ids = [m.pk for m in new_messages]
            index_after_commit([m.pk for m in new_messages if index_later or needs_index(m.content)])
            transaction.on_commit(
                lambda: messages_appended.send(
                    sender=Session, session_id=session.pk, tenant_id=session.tenant_id, message_ids=message_ids
                )
            )
    return AppendResult(messages=results, created=len(new_messages))
