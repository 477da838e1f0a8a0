"""What each MCP tool and resource does, for one tenant: the REST API's serializers check the arguments (the same
bounds and messages), and the same services and selectors do the work. Synchronous ORM code: the server runs
it through asgiref (server.py). A bad argument or another tenant's id raises `InvalidArguments` or `NotFound`,
whose message says what to fix."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError as DjangoValidationError

from memory_app.models import Record
from memory_app.selectors.context import session_context
from memory_app.selectors.recall import recall_search
from memory_app.selectors.status import with_recall_backlog
from memory_app.serializers import (
    ContextQuerySerializer,
    ContextSerializer,
    RecallQuerySerializer,
    RecallResultSerializer,
    RecordSerializer,
    RecordWriteSerializer,
)
from memory_app.services import RecordClosed, record_create, record_invalidate
from platform_kit.api.errors import validation_detail
from sessions_app.api.serializers import (
    BlocksQuerySerializer,
    BlocksSerializer,
    GroupedStatsQuerySerializer,
    GroupedStatsSerializer,
    StateSerializer,
    StateVersionSerializer,
    WeeklyQuerySerializer,
    WeeklySerializer,
)
from sessions_app.models import Session, StateVersion, Tenant
from sessions_app.selectors.blocks import usage_blocks
from sessions_app.selectors.usage import usage_grouped
from sessions_app.selectors.weekly import usage_weekly
from sessions_app.services.state import state_get

ACTOR = "mcp"  # who changed a record, in its revisions
STATE_HISTORY_LIMIT = 100  # versions a history resource shows, newest first


class InvalidArguments(Exception):
    """An argument a tool cannot use; the message says which and why."""


class NotFound(Exception):
    """No such object for this tenant: another tenant's id reads exactly like one that never existed."""


def _valid(serializer_class, data: dict) -> dict:
    body = serializer_class(data={key: value for key, value in data.items() if value is not None})
    if not body.is_valid():
        raise InvalidArguments(validation_detail(body.errors))
    return body.validated_data


def _uuid(value, *, argument: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArguments(f"Invalid input. {argument}: Must be a valid UUID, not {str(value)[:64]!r}.") from None


def _session(tenant: Tenant, session_id, *, argument: str = "session") -> Session:
    pk = _uuid(session_id, argument=argument)
    session = Session.objects.select_related("tenant").filter(pk=pk, tenant=tenant, deleted_at__isnull=True).first()
    if session is None:
        raise NotFound(f"Session {pk} not found.")
    return session


def _record(tenant: Tenant, record_id) -> dict:
    record = Record.objects.prefetch_related("source_sessions", "source_messages").get(pk=record_id, tenant=tenant)
    return RecordSerializer(record).data


def remember(
    *,
    tenant: Tenant,
    content: str,
    user_id: str,
    type: str,
    session: str | None = None,
    source_message_ids: list[str] | None = None,
    fields: dict | None = None,
    confidence: float | None = None,
) -> dict:
    """POST /api/v1/records/ with the calling session as the record's source."""
    if session is not None:
        _session(tenant, session)
    params = _valid(
        RecordWriteSerializer,
        {
            "content": content,
            "user_id": user_id,
            "type": type,
            "fields": fields,
            "confidence": confidence,
            "source_session_ids": [session] if session is not None else None,
            "source_message_ids": source_message_ids,
        },
    )
    try:
        written = record_create(tenant=tenant, actor=ACTOR, **params)
    except DjangoValidationError as error:  # a source message that is not the tenant's
        raise InvalidArguments(validation_detail(error.message_dict)) from None
    return {"created": written.created, "record": _record(tenant, written.record.pk)}


def recall(
    *,
    tenant: Tenant,
    query: str,
    user_id: str,
    top_k: int | None = None,
    types: list[str] | None = None,
    session: str | None = None,
    since: str | None = None,
    until: str | None = None,
    include_messages: bool | None = None,
) -> dict:
    """POST /api/v1/recall/."""
    if session is not None:
        _session(tenant, session)
    params = _valid(
        RecallQuerySerializer,
        {
            "query": query,
            "user_id": user_id,
            "top_k": top_k,
            "types": types,
            "session": session,
            "since": since,
            "until": until,
            "include_messages": include_messages,
        },
    )
    answer = RecallResultSerializer(recall_search(tenant=tenant, **params)).data
    return with_recall_backlog(
        answer, tenant=tenant, user_id=params["user_id"], include_messages=params["include_messages"]
    )


def forget(*, tenant: Tenant, record_id: str, reason: str | None = None) -> dict:
    """DELETE /api/v1/records/{id}/: the record stops being recalled and stays, with its history, for audit."""
    pk = _uuid(record_id, argument="record_id")
    if not Record.objects.filter(pk=pk, tenant=tenant).exists():
        raise NotFound(f"Record {pk} not found.")
    reason = (reason or "").strip() or "deleted"
    try:
        record_invalidate(tenant=tenant, record_id=pk, actor=ACTOR, reason=reason)
    except RecordClosed as closed:
        raise InvalidArguments(str(closed)) from None
    return {"record": _record(tenant, pk)}


def context(*, tenant: Tenant, session: str, query: str | None = None, top_k: int | None = None) -> dict:
    """GET /api/v1/sessions/{id}/context/."""
    found = _session(tenant, session)
    params = _valid(ContextQuerySerializer, {"query": query, "top_k": top_k})
    return ContextSerializer(session_context(session=found, **params)).data


USAGE_WINDOWS = ("blocks", "weekly")


def usage(
    *,
    tenant: Tenant,
    group_by: str | None = None,
    since: str | None = None,
    until: str | None = None,
    tool: str | None = None,
    user_id: str | None = None,
    machine: str | None = None,
    model: str | None = None,
    limit: int | None = None,
    window: str | None = None,
) -> dict:
    """GET /api/v1/stats/; with `window`, GET /api/v1/usage/blocks/ or /api/v1/usage/weekly/."""
    if window == "blocks":
        if group_by is not None or model is not None or limit is not None:
            raise InvalidArguments("Invalid input. window blocks takes no group_by, model or limit.")
        params = _valid(
            BlocksQuerySerializer,
            {"user_id": user_id, "machine": machine, "tool": tool, "since": since, "until": until},
        )
        return BlocksSerializer(usage_blocks(tenant=tenant, **params)).data
    if window == "weekly":
        if model is not None or limit is not None:
            raise InvalidArguments("Invalid input. window weekly takes no model or limit.")
        params = _valid(
            WeeklyQuerySerializer,
            {
                "user_id": user_id,
                "machine": machine,
                "tool": tool,
                "group_by": group_by,
                "since": since,
                "until": until,
            },
        )
        return WeeklySerializer(usage_weekly(tenant=tenant, **params)).data
    if window is not None:
        raise InvalidArguments(f"Invalid input. window: use one of {', '.join(USAGE_WINDOWS)}, or leave it out.")
    params = _valid(
        GroupedStatsQuerySerializer,
        {
            "group_by": group_by,
            "since": since,
            "until": until,
            "tool": tool,
            "user_id": user_id,
            "machine": machine,
            "model": model,
            "limit": limit,
        },
    )
    return GroupedStatsSerializer(usage_grouped(tenant=tenant, **params)).data


def session_state(*, tenant: Tenant, session_id: str) -> dict:
    """GET /api/v1/sessions/{id}/state/."""
    snapshot = state_get(session=_session(tenant, session_id, argument="session_id"))
    return StateSerializer({"version": snapshot.version, "data": snapshot.data, "updated_at": snapshot.updated_at}).data


def session_state_history(*, tenant: Tenant, session_id: str) -> dict:
    """The first page of GET /api/v1/sessions/{id}/state/history/: the newest versions first."""
    found = _session(tenant, session_id, argument="session_id")
    versions = StateVersion.objects.filter(session=found).order_by("-version")[:STATE_HISTORY_LIMIT]
    return {"session": str(found.pk), "results": StateVersionSerializer(versions, many=True).data}
