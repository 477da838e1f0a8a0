"""Writing records: create (or merge a restatement), update, invalidate. Every change is a revision."""

from __future__ import annotations

import logging
import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import UTC

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory_app.embeddings import ensure_vector_index
from memory_app.models import MessageEmbedding, Record, RecordRevision, RecordTtl
from memory_app.selectors.records import expired_records
from memory_app.signals import record_changed
from platform_kit.redaction import redact, redact_text
from sessions_app.models import Message, Session, Tenant

logger = logging.getLogger(__name__)

EDITABLE = ("type", "content", "fields", "confidence", "valid_from", "valid_until")


class RecordClosed(Exception):
    """The record was deleted or invalidated: it is kept for audit and takes no more changes."""


@dataclass(frozen=True)
class RecordWrite:
    record: Record
    created: bool  # False: an existing record was merged with a restatement of it


def normalized_text(text: str) -> str:
    """Case, width, punctuation and spacing removed: "Prefers museums." == "prefers  museums"."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in text)
    return re.sub(r"\s+", " ", text).strip()


def _sources(*, tenant: Tenant, session_ids, message_ids) -> tuple[list[Session], list[Message]]:
    """The tenant's sessions and messages named; a message's session is a source too. Unknown ids: 400."""
    session_ids, message_ids = {str(i) for i in session_ids or ()}, {str(i) for i in message_ids or ()}
    # A deleted session's messages are out of reach through the API: a record cannot cite them either.
    messages = list(
        Message.objects.filter(tenant=tenant, pk__in=message_ids, session__deleted_at__isnull=True).only(
            "id", "session_id"
        )
    )
    missing = message_ids - {str(m.pk) for m in messages}
    if missing:
        raise ValidationError({"source_message_ids": [f"Not messages of yours: {', '.join(sorted(missing))}."]})
    session_ids |= {str(m.session_id) for m in messages}
    sessions = list(Session.objects.filter(tenant=tenant, pk__in=session_ids, deleted_at__isnull=True).only("id"))
    missing = session_ids - {str(s.pk) for s in sessions}
    if missing:
        raise ValidationError({"source_session_ids": [f"Not sessions of yours: {', '.join(sorted(missing))}."]})
    return sessions, messages


# What each kind of revision is to the layers that listen (memory_app.signals.record_changed).
EVENT_OF_CHANGE = {
    RecordRevision.Change.CREATE: "created",
    RecordRevision.Change.UPDATE: "updated",
    RecordRevision.Change.MERGE: "updated",
    RecordRevision.Change.INVALIDATE: "invalidated",
    RecordRevision.Change.DELETE: "invalidated",
}


def _snapshot(record: Record, *, change: str, actor: str, reason: str = "") -> RecordRevision:
    """Store the revision the write made, and announce it once the write commits. Every write of a record
    ends here, so every change is both kept and announced."""
    revision = _revision_create(record, change=change, actor=actor, reason=reason)
    payload = record_event_data(record, revision)
    transaction.on_commit(
        lambda: record_changed.send(
            sender=Record,
            tenant_id=record.tenant_id,
            record_id=record.pk,
            change=EVENT_OF_CHANGE[change],
            revision=record.revision,
            actor=actor,
            reason=reason,
            record=payload,
        )
    )
    return revision


def api_timestamp(value) -> str | None:
    """A timestamp as the API writes it: ISO 8601 in UTC with microseconds, `Z` for UTC."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def record_event_data(record: Record, revision: RecordRevision) -> dict:
    """The record as the API shows it (GET /api/v1/records/{id}/), JSON-ready, its provenance read from the
    revision just stored (no extra query)."""

    return {
        "id": str(record.pk),
        "user_id": record.user_id,
        "namespace": record.namespace,
        "type": record.type,
        "content": record.content,
        "fields": record.fields,
        "confidence": record.confidence,
        "strategy": record.strategy,
        "strategy_version": record.strategy_version,
        "source_session_ids": revision.source_session_ids,
        "source_message_ids": revision.source_message_ids,
        "valid": record.valid,
        "valid_from": api_timestamp(record.valid_from),
        "valid_until": api_timestamp(record.valid_until),
        "revision": record.revision,
        "created_at": api_timestamp(record.created_at),
        "updated_at": api_timestamp(record.updated_at),
        "invalidated_at": api_timestamp(record.invalidated_at),
        "invalidated_reason": record.invalidated_reason,
    }


def _revision_create(record: Record, *, change: str, actor: str, reason: str) -> RecordRevision:
    return RecordRevision.objects.create(
        record=record,
        tenant_id=record.tenant_id,
        revision=record.revision,
        change=change,
        actor=actor,
        reason=reason,
        type=record.type,
        content=record.content,
        fields=record.fields,
        confidence=record.confidence,
        valid=record.valid,
        valid_from=record.valid_from,
        valid_until=record.valid_until,
        source_session_ids=sorted(str(i) for i in record.source_sessions.values_list("id", flat=True)),
        source_message_ids=sorted(str(i) for i in record.source_messages.values_list("id", flat=True)),
    )


def _restated(*, tenant: Tenant, user_id: str, namespace: str, type: str, content: str) -> Record | None:
    """A valid record of the same user, scope and type saying the same thing (normalised text)."""
    wanted = normalized_text(content)
    candidates = Record.objects.select_for_update().filter(
        tenant=tenant, user_id=user_id, namespace=namespace, type=type, valid=True
    )
    # The normalised comparison runs in Python over the user's records of one type: a handful to a few
    # thousand rows, found through the (tenant, user_id, type) index.
    for record in candidates.only("id", "content"):
        if normalized_text(record.content) == wanted:
            return Record.objects.get(pk=record.pk)
    return None


def record_create(
    *,
    tenant: Tenant,
    user_id: str,
    type: str,
    content: str,
    fields: dict | None = None,
    confidence: float = 1.0,
    namespace: str = "",
    valid_from=None,
    valid_until=None,
    strategy: str = "",
    strategy_version: int | None = None,
    source_session_ids=(),
    source_message_ids=(),
    actor: str = "api",
    merge_restatements: bool = True,
) -> RecordWrite:
    """Store a record, or merge it into the valid record that already says the same thing: the same text
    once normalised, or a vector at least ACE_DEDUP_SIMILARITY (cosine) from the new one. Secrets in the text
    and fields are redacted first, whoever writes (the API, a strategy, the sample data).
    `merge_restatements=False` always stores a new record (an import restoring an invalidated one)."""
    content, fields = redact_text(content), redact(fields)
    embedder, vector = _embed_inline(content)
    with transaction.atomic():
        if vector is not None:
            ensure_vector_index(embedder)  # a vector is stored (and searched for restatements): its space's index
        sessions, messages = _sources(tenant=tenant, session_ids=source_session_ids, message_ids=source_message_ids)
        scope = {"tenant": tenant, "user_id": user_id, "namespace": namespace, "type": type}
        existing, reason = (_restated(content=content, **scope) if merge_restatements else None), "restated"
        if existing is None and vector is not None and merge_restatements:
            existing, similarity = _nearest(content=content, vector=vector, embedder=embedder, **scope)
            if existing is not None:
                reason = f"near-identical (cosine similarity {similarity:.3f})"
        if existing is not None:
            # The newest wording is kept (the earlier ones are in the revisions), with its vector.
            if existing.content != content:
                existing.content = content
                existing.embedding = vector
                existing.embedding_key = embedder.key if vector is not None else ""
            existing.fields = {**existing.fields, **(fields or {})}
            existing.confidence = max(existing.confidence, confidence)
            _save_revision(
                existing,
                change=RecordRevision.Change.MERGE,
                actor=actor,
                reason=reason,
                strategy=strategy,
                strategy_version=strategy_version,
                sessions=sessions,
                messages=messages,
            )
            return RecordWrite(record=existing, created=False)
        record = Record.objects.create(
            tenant=tenant,
            user_id=user_id,
            namespace=namespace,
            type=type,
            content=content,
            fields=fields or {},
            confidence=confidence,
            valid_from=valid_from,
            valid_until=valid_until,
            strategy=strategy,
            strategy_version=strategy_version,
            embedding=vector,
            embedding_key=embedder.key if vector is not None else "",
        )
        record.source_sessions.add(*sessions, through_defaults={"tenant_id": record.tenant_id})
        record.source_messages.add(*messages, through_defaults={"tenant_id": record.tenant_id})
        _snapshot(record, change=RecordRevision.Change.CREATE, actor=actor)
        if vector is None:
            _embed_after_commit(record)
    return RecordWrite(record=record, created=True)


def record_history_restore(*, record: Record, line: dict) -> None:
    """A record just created from a memory export (`selectors.export` wrote it, another instance or tenant reads
    it back): the exported revisions replace the one `record_create` wrote, and the record takes the exported
    state. `line` is the record's line of the export, validated."""
    revisions = line["revisions"]
    if revisions:
        RecordRevision.objects.filter(record=record).delete()
        RecordRevision.objects.bulk_create(
            RecordRevision(
                record=record,
                tenant_id=record.tenant_id,
                revision=revision["revision"],
                change=revision["change"],
                actor=revision["actor"],
                reason=revision["reason"],
                type=revision["type"],
                content=redact_text(revision["content"]),
                fields=redact(revision["fields"]),
                confidence=revision["confidence"],
                valid=revision["valid"],
                valid_from=revision.get("valid_from"),
                valid_until=revision.get("valid_until"),
                # The source instance's ids, as that revision named them.
                source_session_ids=revision["source_session_ids"],
                source_message_ids=revision["source_message_ids"],
                created_at=revision["created_at"],
            )
            for revision in revisions
        )
    now = timezone.now()
    Record.objects.filter(pk=record.pk).update(
        valid=line["valid"],
        invalidated_at=line["invalidated_at"] or (None if line["valid"] else now),
        invalidated_reason=line["invalidated_reason"] or ("" if line["valid"] else "imported invalid"),
        revision=max((revision["revision"] for revision in revisions), default=1),
        created_at=line.get("created_at") or now,
        updated_at=line.get("updated_at") or now,
    )


def _embed_inline(content: str):
    """(embedder, vector) of the new content, or (None, None) if the embedder fails: the record is then
    stored anyway, compared by text only, and embedded later by Celery."""
    from memory_app.embedders import EmbedderError, get_embedder

    try:
        embedder = get_embedder()
        return embedder, embedder.embed([content])[0]
    except EmbedderError:
        logger.warning("embedding a new record failed; it will be embedded later", exc_info=True)
        return None, None


def _nearest(*, tenant: Tenant, user_id: str, namespace: str, type: str, content: str, vector, embedder) -> tuple:
    """The valid record of this scope nearest to `vector`, locked, if it is at least ACE_DEDUP_SIMILARITY."""
    dims = int(embedder.dimensions)
    literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, 1 - ((embedding::vector({dims})) <=> %s::vector({dims})) FROM {Record._meta.db_table} "
            "WHERE tenant_id = %s AND user_id = %s AND namespace = %s AND type = %s AND valid AND embedding_key = %s "
            f"ORDER BY (embedding::vector({dims})) <=> %s::vector({dims}) LIMIT 1",
            [literal, tenant.pk, user_id, namespace, type, embedder.key, literal],
        )
        row = cursor.fetchone()
    if row is None or row[1] < settings.ACE_DEDUP_SIMILARITY:
        return None, None
    nearest = Record.objects.select_for_update().get(pk=row[0])
    if _numbers(nearest.content) != _numbers(content):
        return None, None  # "budget 5000" and "budget 3000" are close in meaning, and different facts
    return nearest, row[1]


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:[.,]\d+)*", unicodedata.normalize("NFKC", text)))


def _embed_after_commit(record: Record) -> None:
    from memory_app.tasks import embed_records, enqueue

    transaction.on_commit(lambda: enqueue(embed_records, [record.pk]))


def _open_record(*, tenant: Tenant, record_id: uuid.UUID) -> Record:
    record = Record.objects.select_for_update().get(pk=record_id, tenant=tenant)
    if not record.valid:
        raise RecordClosed(
            f"The record was {'deleted' if record.invalidated_reason == 'deleted' else 'invalidated'}"
            f" at {record.invalidated_at:%Y-%m-%dT%H:%M:%SZ}; it is kept for audit only."
        )
    return record


def record_update(
    *,
    tenant: Tenant,
    record_id,
    actor: str = "api",
    reason: str = "",
    strategy: str = "",
    strategy_version: int | None = None,
    source_session_ids=(),
    source_message_ids=(),
    **changes,
) -> Record:
    """Change a valid record; new sources are added to its provenance. A new revision either way.
    A strategy that changes a record becomes the record's `strategy` (at its version)."""
    if isinstance(changes.get("content"), str):
        changes["content"] = redact_text(changes["content"])
    if "fields" in changes:
        changes["fields"] = redact(changes["fields"])
    with transaction.atomic():
        record = _open_record(tenant=tenant, record_id=record_id)
        sessions, messages = _sources(tenant=tenant, session_ids=source_session_ids, message_ids=source_message_ids)
        content_changed = "content" in changes and changes["content"] != record.content
        for field, value in changes.items():
            if field in EDITABLE:
                setattr(record, field, value)
        if content_changed:  # the old vector no longer describes it
            record.embedding, record.embedding_key = None, ""
            _embed_after_commit(record)
        _save_revision(
            record,
            change=RecordRevision.Change.UPDATE,
            actor=actor,
            reason=reason[:255],
            strategy=strategy,
            strategy_version=strategy_version,
            sessions=sessions,
            messages=messages,
        )
    return record


def _save_revision(
    record: Record, *, change: str, actor: str, reason: str, strategy: str, strategy_version, sessions, messages
) -> None:
    """Save a changed record as its next revision: the strategy that changed it (if one did) becomes its
    `strategy`, the new sources join its provenance, and the revision is snapshotted in full."""
    if strategy:
        record.strategy, record.strategy_version = strategy, strategy_version
    record.revision += 1
    record.updated_at = timezone.now()
    record.save()
    record.source_sessions.add(*sessions, through_defaults={"tenant_id": record.tenant_id})
    record.source_messages.add(*messages, through_defaults={"tenant_id": record.tenant_id})
    _snapshot(record, change=change, actor=actor, reason=reason)


def record_invalidate(*, tenant: Tenant, record_id, actor: str = "api", reason: str = "deleted") -> Record:
    """Stop recalling the record at once; it and its revisions stay for audit."""
    with transaction.atomic():
        record = _open_record(tenant=tenant, record_id=record_id)
        record.valid = False
        record.invalidated_at = record.updated_at = timezone.now()
        record.invalidated_reason = reason[:255]
        record.revision += 1
        record.save()
        change = RecordRevision.Change.DELETE if reason == "deleted" else RecordRevision.Change.INVALIDATE
        _snapshot(record, change=change, actor=actor, reason=reason[:255])
    return record


SOURCES_DELETED = "its source session was deleted"


@dataclass(frozen=True)
class SessionForgotten:
    message_vectors: int  # vectors of the session's messages removed
    records_invalidated: int  # records that came only from the session
    records_unlinked: int  # records that keep other sources and no longer cite the session


def session_memory_forget(*, tenant_id, session_id, actor: str = "session-delete") -> SessionForgotten:
    """What memory derived from a session that was just deleted goes with it, so recall never returns it:

    - the vectors of its messages (the keyword side already skips a deleted session's messages);
    - a valid record that came only from deleted sessions is invalidated (a new revision says why; it stays
      for audit, like every invalidated record);
    - a valid record that also came from a live session stays, and stops citing the deleted session and its
      messages (the revision before the change still names them, for audit).

    Called inside the deleting transaction (signal session_deleted). Records already invalid are left as
    they are: audit only, never recalled.
    """
    with transaction.atomic():
        vectors, _ = MessageEmbedding.objects.filter(message__session_id=session_id).delete()
        record_ids = list(
            Record.objects.filter(tenant_id=tenant_id, valid=True)
            .filter(Q(source_sessions=session_id) | Q(source_messages__session_id=session_id))
            .values_list("pk", flat=True)
            .distinct()
            .order_by("pk")
        )
        invalidated = unlinked = 0
        for record_id in record_ids:
            record = _open_record(tenant=tenant_id, record_id=record_id)
            if not record.source_sessions.filter(deleted_at__isnull=True).exclude(pk=session_id).exists():
                record_invalidate(tenant=tenant_id, record_id=record_id, actor=actor, reason=SOURCES_DELETED)
                invalidated += 1
                continue
            record.source_sessions.remove(session_id)
            record.source_messages.remove(*record.source_messages.filter(session_id=session_id))
            record.revision += 1
            record.updated_at = timezone.now()
            record.save(update_fields=["revision", "updated_at"])
            _snapshot(record, change=RecordRevision.Change.UPDATE, actor=actor, reason=SOURCES_DELETED)
            unlinked += 1
    return SessionForgotten(message_vectors=vectors, records_invalidated=invalidated, records_unlinked=unlinked)


def session_deleted_handler(sender, session_id, tenant_id, **kwargs):
    # Inside the deleting transaction: the session's vectors and the memories only it supports go with it.
    session_memory_forget(tenant_id=tenant_id, session_id=session_id)


def user_memory_forget(*, tenant_id, user_id: str) -> dict[str, int]:
    """Delete every record of the user (revisions, vectors, keyword vectors, provenance links and imports go
    with them) and the vectors of their messages. Rows deleted per model."""
    from platform_kit.db import cascade_delete

    params = [tenant_id, user_id]
    deleted = cascade_delete(Record, "tenant_id = %s AND user_id = %s", params)
    for label, count in cascade_delete(MessageEmbedding, "tenant_id = %s AND user_id = %s", params).items():
        deleted[label] = deleted.get(label, 0) + count
    return deleted


def user_forgetting_handler(sender, tenant_id, user_id, **kwargs):
    # Inside the forgetting transaction (sessions_app.services.forget): the counts go into its audit.
    return user_memory_forget(tenant_id=tenant_id, user_id=user_id)


def messages_purged_handler(sender, tenant_id, message_ids, **kwargs):
    # Inside the purging transaction: the vectors of the purged text go in the same commit as the text.
    MessageEmbedding.objects.filter(message_id__in=message_ids).delete()


# -- expiry (docs/retention.md): the records' side of retention, which retention_app's TTLs and runs call ----------
def records_expiry_refresh(*, tenant_id, targets) -> int:
    """Recompute `expires_at` of the tenant's records of these (record_type, strategy) targets: a TTL changed."""
    types = sorted({record_type for record_type, _ in targets if record_type})
    strategies = sorted({strategy for _, strategy in targets if strategy})
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Record._meta.db_table} "
            "SET expires_at = ace_record_expires_at(tenant_id, type, strategy, updated_at) "
            "WHERE tenant_id = %s AND (type = ANY(%s) OR strategy = ANY(%s)) "
            "AND expires_at IS DISTINCT FROM ace_record_expires_at(tenant_id, type, strategy, updated_at)",
            [tenant_id, types, strategies],
        )
        return cursor.rowcount


def _expired_record_entry(record: Record, sessions: dict, messages: dict) -> dict:
    """What the retention trail keeps of a deleted record: who, what kind, from where, when — not its text."""
    return {
        "user_id": record.user_id,
        "namespace": record.namespace,
        "type": record.type,
        "strategy": record.strategy,
        "strategy_version": record.strategy_version,
        "revision": record.revision,
        "valid": record.valid,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "expires_at": record.expires_at.isoformat(),
        "source_session_ids": sorted(sessions.get(record.pk, [])),
        "source_message_ids": sorted(messages.get(record.pk, [])),
    }


def expired_records_delete(*, tenant_id, batch: int) -> list[tuple[uuid.UUID, dict]]:
    """Delete up to `batch` of the tenant's expired records under "purge" TTLs, soonest expired first, with their
    revisions; a record being written meanwhile is left for later. Returns each deleted record's id and what the
    retention trail keeps of it. Inside the caller's transaction, so the trail's entries go in the same commit."""
    records = list(
        expired_records(tenant_id=tenant_id, on_expiry=RecordTtl.OnExpiry.PURGE)
        .select_for_update(skip_locked=True)
        .order_by("expires_at")[:batch]
    )
    if not records:
        return []
    ids = [record.pk for record in records]
    sessions, messages = {}, {}
    for record_id, session_id in Record.source_sessions.through.objects.filter(record_id__in=ids).values_list(
        "record_id", "session_id"
    ):
        sessions.setdefault(record_id, []).append(str(session_id))
    for record_id, message_id in Record.source_messages.through.objects.filter(record_id__in=ids).values_list(
        "record_id", "message_id"
    ):
        messages.setdefault(record_id, []).append(str(message_id))
    entries = [(record.pk, _expired_record_entry(record, sessions, messages)) for record in records]
    Record.objects.filter(pk__in=ids).delete()
    return entries
