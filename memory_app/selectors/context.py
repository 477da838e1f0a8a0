"""The block a chat app injects into a new or resumed session: its state and the user's relevant memories."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from memory_app.models import Record, unexpired
from memory_app.selectors.recall import Hit, recall_search
from platform_kit.redaction import redact, redact_text
from sessions_app.models import Message, Role, Session
from sessions_app.services.state import state_get


@dataclass(frozen=True)
class SessionContext:
    state: dict
    state_version: int
    query: str
    records: list[Hit]
    prompt: str
    degraded: bool


def _latest_question(session: Session) -> str:
    message = Message.objects.filter(session=session, role=Role.USER).order_by("-seq").only("content").first()
    return message.content if message else ""


def _recent_records(session: Session, top_k: int) -> list[Hit]:
    records = Record.objects.filter(unexpired(), tenant_id=session.tenant_id, user_id=session.user_id, valid=True)
    records = records.order_by("-updated_at")[:top_k]
    return [
        Hit(
            kind="record",
            id=str(r.pk),
            text=r.content,
            session=None,
            source_message_ids=[],
            source_external_ids=[],
            created_at=r.created_at,
        )
        for r in records
    ]


def session_context(*, session: Session, query: str | None = None, top_k: int = 8) -> SessionContext:
    """State plus the records most relevant to `query` (default: the session's latest user message; with
    neither, the user's most recent records). Every memory line names its record id.

    State and records are redacted when written; the prompt is redacted again here, in case a row predates a
    rule (the rules grow, and a configured pattern may be new)."""
    snapshot = state_get(session=session)
    state = redact(snapshot.data)
    query = (query or "").strip() or _latest_question(session)
    degraded = False
    if query:
        result = recall_search(
            tenant=session.tenant, query=query, user_id=session.user_id, top_k=top_k, include_messages=False
        )
        records, degraded = result.results, result.degraded
    else:
        records = _recent_records(session, top_k)
    records = [replace(hit, text=redact_text(hit.text)) for hit in records]
    types = {
        str(pk): kind for pk, kind in Record.objects.filter(pk__in=[h.id for h in records]).values_list("pk", "type")
    }
    lines = []
    if records:
        lines.append("## What we remember about this user")
        lines += [f"- [record:{hit.id}] ({types.get(hit.id, 'record')}) {hit.text}" for hit in records]
    if state:
        if lines:
            lines.append("")
        lines.append(f"## Where this session stands (state v{snapshot.version})")
        lines += [f"- {key}: {json.dumps(value, ensure_ascii=False)}" for key, value in state.items()]
    return SessionContext(
        state=state,
        state_version=snapshot.version,
        query=query,
        records=records,
        prompt="\n".join(lines),
        degraded=degraded,
    )
