"""Computing and storing vectors of records and messages, in the space of the configured embedder; the HNSW index
of each embedder's space, made by the writes that store its vectors (recall only reads it); and lowering the memory
status's watermarks when messages change (what `selectors.status` counts from)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from django.conf import settings
from django.db import connection, transaction

from memory_app.embedders import Embedder, EmbedderMisconfigured, get_embedder
from memory_app.models import MessageEmbedding, Record, SessionEmbeddingProgress
from sessions_app.models import Message, Session

_KEY = re.compile(r"^[A-Za-z0-9:._/@+-]{1,160}$")
_indexed: set[tuple[str, int]] = set()


def _check_key(embedder: Embedder) -> None:
    if not _KEY.match(embedder.key):
        raise EmbedderMisconfigured(f"Embedder key {embedder.key!r} has characters other than letters, digits, :._/@+-")


def ensure_vector_index(embedder: Embedder) -> None:
    """One HNSW (cosine) index per embedder key on records and on messages, over that key's rows only.

    Vectors of different models have different dimensions (or meanings), so the column has no fixed
    dimension; each partial index casts to the key's dimension. Every write that stores a vector makes sure of
    its key's index first (`records_embed`, `messages_embed`, `services.record_create`), as does
    `manage.py ace_embeddings index`; recall, a read, never builds one: a key with vectors has its index.
    """
    if (embedder.key, embedder.dimensions) in _indexed:
        return
    _check_key(embedder)
    slug = hashlib.sha1(embedder.key.encode()).hexdigest()[:12]
    dims = int(embedder.dimensions)
    literal = embedder.key.replace("'", "''")  # _check_key allows no quote; doubled anyway
    with connection.cursor() as cursor:
        # Django's foreign keys are deferred; PostgreSQL refuses CREATE INDEX on a table with pending
        # deferred checks in the same transaction, so run them now (they would run at commit anyway).
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for table, name in ((Record._meta.db_table, "record"), (MessageEmbedding._meta.db_table, "message")):
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {name}_hnsw_{slug} ON {table} "
                f"USING hnsw ((embedding::vector({dims})) vector_cosine_ops) WHERE embedding_key = '{literal}'"
            )
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    _indexed.add((embedder.key, embedder.dimensions))


def _vectors(embedder: Embedder, texts: list[str]) -> list[list[float]]:
    vectors = embedder.embed(texts)
    if len(vectors) != len(texts) or any(len(v) != embedder.dimensions for v in vectors):
        raise EmbedderMisconfigured(
            f"{embedder.label} returned vectors of {sorted({len(v) for v in vectors})} dimensions for "
            f"{len(texts)} texts; expected {embedder.dimensions} each. Check ACE_EMBEDDER_DIMENSIONS."
        )
    return vectors


def records_embed(*, record_ids: Iterable, embedder: Embedder | None = None) -> int:
    """Embed the given valid records (those already in the embedder's space are skipped). Returns how many."""
    embedder = embedder or get_embedder()
    records = list(
        Record.objects.filter(pk__in=list(record_ids), valid=True)
        .exclude(embedding_key=embedder.key)
        .only("id", "content")
    )
    if not records:
        return 0
    vectors = _vectors(embedder, [r.content for r in records])
    ensure_vector_index(embedder)
    with transaction.atomic():
        for record, vector in zip(records, vectors, strict=True):
            # Only if the content is still what was embedded: an edit meanwhile queues its own embedding.
            Record.objects.filter(pk=record.pk, content=record.content).update(
                embedding=vector, embedding_key=embedder.key
            )
    return len(records)


def record_embedding_reset(*, record_id) -> None:
    """The content changed: its old vector no longer describes it."""
    Record.objects.filter(pk=record_id).update(embedding=None, embedding_key="")


def message_embeddings_reset(*, message_ids: Iterable) -> None:
    """The messages' content changed (an import completed them in place): their old vectors no longer describe
    them. Without one, the periodic sweep (`tasks.embed_pending`) finds them, if the queued task is lost."""
    message_ids = list(message_ids)
    MessageEmbedding.objects.filter(message_id__in=message_ids).delete()
    embedding_progress_lower(message_ids=message_ids)  # the memory status counts them as waiting again


_PROGRESS = SessionEmbeddingProgress._meta.db_table
_MESSAGE = Message._meta.db_table


def embedding_progress_lower(*, message_ids) -> None:
    """These messages' content changed (an import completed them, a turn completed): their sessions'
    watermarks go back to before them, so the next count (`selectors.status`) reads them again."""
    ids = [str(pk) for pk in message_ids]
    if not ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {_PROGRESS} p SET embedded_through_seq = LEAST(p.embedded_through_seq, m.first_seq - 1),
                                     updated_at = clock_timestamp()
            FROM (SELECT session_id, min(seq) AS first_seq FROM {_MESSAGE} WHERE id = ANY(%s::uuid[])
                  GROUP BY session_id) m
            WHERE p.session_id = m.session_id
            """,
            [ids],
        )


def embedding_progress_lower_sql(*, session_id, first_seq: int) -> tuple[str, list]:
    """`embedding_progress_lower` for messages of one session from `first_seq` on, as a clause of the writer's
    own statement (a completed chat turn's)."""
    return (
        f"UPDATE {_PROGRESS} SET embedded_through_seq = LEAST(embedded_through_seq, %s), "
        "updated_at = clock_timestamp() WHERE session_id = %s AND embedded_through_seq >= %s",
        [first_seq - 1, session_id, first_seq],
    )


def messages_embed(*, message_ids: Iterable, embedder: Embedder | None = None) -> int:
    """Embed the messages with text of the roles in ACE_EMBED_MESSAGE_ROLES (user and assistant by default), so
    recall can search raw conversation; the others are skipped. Returns how many were embedded."""
    embedder = embedder or get_embedder()
    messages = [
        m
        for m in Message.objects.filter(
            pk__in=list(message_ids), role__in=settings.ACE_EMBED_MESSAGE_ROLES, session__deleted_at__isnull=True
        )
        .select_related("session")
        .only("id", "tenant_id", "session_id", "session__user_id", "content", "created_at")
        if m.content.strip()
    ]
    if not messages:
        return 0
    vectors = _vectors(embedder, [m.content for m in messages])
    ensure_vector_index(embedder)
    with transaction.atomic():
        # A session deleted while its messages were being embedded gets no vector: its live sessions are
        # share-locked until the vectors commit, so a deletion (which removes the session's vectors in its own
        # transaction) comes either before this read, or after the vectors are written.
        live = _live_sessions_locked({m.session_id for m in messages})
        embedded = [(m, vector) for m, vector in zip(messages, vectors, strict=True) if m.session_id in live]
        MessageEmbedding.objects.bulk_create(
            [
                MessageEmbedding(
                    message_id=m.pk,
                    tenant_id=m.tenant_id,
                    session_id=m.session_id,
                    user_id=m.session.user_id,
                    created_at=m.created_at,
                    embedding=vector,
                    embedding_key=embedder.key,
                )
                for m, vector in embedded
            ],
            update_conflicts=True,
            unique_fields=["message", "tenant"],  # the primary key: (message_id, tenant_id)
            update_fields=["embedding", "embedding_key", "user_id"],
        )
    return len(embedded)


def _live_sessions_locked(session_ids: set) -> set:
    """The sessions among these that are not deleted, share-locked (in id order) until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Session._meta.db_table} WHERE id = ANY(%s) AND deleted_at IS NULL ORDER BY id FOR SHARE",
            [sorted(session_ids)],
        )
        return {row[0] for row in cursor.fetchall()}
