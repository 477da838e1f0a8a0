"""Many real rows for recall's size tests, quickly: messages through `messages_append` (a thousand a statement,
the sessions' counters kept as the API keeps them) with their vectors copied in by COPY, and records by
bulk_create with their vectors set; vectors from the suite's hash embedder, computed once per text."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from django.db import connection

from memory_app.embedders import get_embedder
from memory_app.embeddings import _indexed, ensure_vector_index
from memory_app.models import MessageEmbedding, Record
from sessions_app.services.messages import messages_append
from tests.support.factories import SessionFactory

PLACES = ["Hangzhou", "Lisbon", "Kyoto", "Chengdu", "Berlin", "Austin", "Lyon", "Xiamen", "Oslo", "Hanoi", "Quito"]
THINGS = ["museum", "tea house", "night market", "bookshop", "temple", "harbour", "garden", "jazz bar", "bakery"]
DOINGS = ["visited", "photographed", "recommended", "skipped", "booked", "found", "missed", "loved", "reviewed"]
WITH = ["my sister", "the kids", "Max the dog", "a colleague", "alone", "old friends", "my parents"]
START = datetime(2026, 1, 1, tzinfo=UTC)


def sentence(n: int) -> str:
    """A short message or memory, different for every n (its words combine differently, and it has a number)."""
    return (
        f"{DOINGS[n % 9].capitalize()} the {THINGS[(n // 9) % 9]} in {PLACES[(n // 81) % 11]} "
        f"with {WITH[(n // 7) % 7]}, note {n}"
    )


_known: dict[str, list[float]] = {}  # text -> its vector, for the suite's run


def vectors(texts: list[str]) -> list[list[float]]:
    """The texts' vectors (the hash embedder's), each text embedded once per run."""
    missing = [text for text in dict.fromkeys(texts) if text not in _known]
    if missing:
        _known.update(zip(missing, get_embedder().embed(missing), strict=True))
    return [_known[text] for text in texts]


def literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(x) for x in vector) + "]"


def chat_messages(
    tenant, user_id: str, texts: list[str], *, per_session: int = 2500, fresh_statistics: bool = True
) -> list[tuple]:
    """The texts as alternating user and assistant messages of `user_id`, `per_session` to a session, each
    with its vector. Returns (message id, session id, seq, text) in order. `fresh_statistics=False`: the tables
    are left as a bulk import leaves them, before autovacuum analyses them."""
    stored = []
    for first in range(0, len(texts), per_session):
        session = SessionFactory(tenant=tenant, user_id=user_id)
        part = texts[first : first + per_session]
        for start in range(0, len(part), 1000):
            items = [
                {
                    "role": ("user", "assistant")[(start + i) % 2],
                    "content": text,
                    "created_at": START + timedelta(seconds=first + start + i),
                }
                for i, text in enumerate(part[start : start + 1000])
            ]
            appended = messages_append(tenant=tenant, session_id=session.pk, items=items).messages
            stored += [(m.pk, session.pk, m.seq, m.content, m.created_at) for m in appended]
    key = get_embedder().key
    columns = "message_id, tenant_id, session_id, user_id, created_at, embedding, embedding_key"
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {MessageEmbedding._meta.db_table} ({columns}) FROM STDIN") as copy,
    ):
        for (pk, session_id, _, _, created_at), vector in zip(stored, vectors([row[3] for row in stored]), strict=True):
            copy.write_row((pk, tenant.pk, session_id, user_id, created_at, literal(vector), key))
    if fresh_statistics:
        analyze("sessions_app_session", "sessions_app_message", MessageEmbedding._meta.db_table)
    return [row[:4] for row in stored]


def records(tenant, user_id: str, texts: list[str]) -> list[str]:
    """The texts as valid records of `user_id` (type fact) with their vectors, in one INSERT (the ORM's
    bulk_create takes twenty times as long). Returns their ids in order."""
    ids = [str(uuid.uuid4()) for _ in texts]
    times = [START + timedelta(seconds=n) for n in range(len(texts))]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Record._meta.db_table} (id, tenant_id, user_id, namespace, type, content, fields, "
            "confidence, valid, strategy, revision, created_at, updated_at, invalidated_reason, embedding, "
            "embedding_key) SELECT id, %s, %s, '', 'fact', content, '{}', 1, true, '', 1, at, at, '', "
            "embedding::vector, %s FROM unnest(%s::uuid[], %s::text[], %s::timestamptz[], %s::text[]) "
            "AS row(id, content, at, embedding)",
            [tenant.pk, user_id, get_embedder().key, ids, texts, times, [literal(v) for v in vectors(texts)]],
        )
    analyze(Record._meta.db_table)
    return ids


def analyze(*tables: str) -> None:
    """Fresh planner statistics, as autovacuum would gather after a bulk import: a test's rows are not yet
    committed, so without this PostgreSQL plans for the tables as earlier (rolled back) tests left them, and may
    pick a plan fit for a few rows (seconds become minutes)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(tables)}")


def vector_index() -> None:
    """The embedder's HNSW indexes, present in this test's transaction (a rolled-back test may have made the
    process believe they exist)."""
    embedder = get_embedder()
    _indexed.discard((embedder.key, embedder.dimensions))
    ensure_vector_index(embedder)


def vector_index_skipped() -> None:
    """The rows written here (by COPY, not through the services) have no HNSW index, and no write through the
    services builds the embedder's in this process until `vector_index` (without them, PostgreSQL reads a user's
    rows through the btree indexes). Recall never builds one."""
    embedder = get_embedder()
    _indexed.add((embedder.key, embedder.dimensions))
