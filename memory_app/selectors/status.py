"""The memory backlog: what of a tenant's (or one user's) data recall cannot find fully yet.

- pending message vectors: messages of the embedded roles (ACE_EMBED_MESSAGE_ROLES) with text, in live
  sessions, without a vector of the configured embedder's key (what `tasks.embed_messages` will write);
- pending record vectors: valid records without a vector of that key (`tasks.embed_records`);
- pending search index: messages still without their keyword search vector. Short messages get it from the
  database as they are written (migration 0008 of sessions_app); longer ones are indexed after the commit
  by the `indexing` queue (`sessions_app.tasks.index_messages`), and until then the keyword side of recall
  and `?q=` searches miss them. Records' search vectors are generated columns: never pending.
- the oldest pending age: since the oldest of those rows was written (a message's receipt, a record's last
  change).

Counting must stay fast on tables of millions of rows:
- messages: each session keeps a watermark (SessionEmbeddingProgress: every embeddable message up to that
  `seq` has its vector in this embedder space), so only each live session's tail after it is read, through
  the (session, seq) index, and each tail message is tested against the vectors' primary key. The count
  moves the watermark up to the first message still waiting. A session whose watermark is its `last_seq`
  costs one row of the sessions index; one that never had a watermark is read once in full.
- records: two short ranges of a partial index (keys below and above the current key), so only the pending
  records are read;
- search index: a partial index holds exactly the messages without a search vector.

Those plans need statistics that know the tables' sizes: after a bulk write (a first `ace_import` of a month of
logs), before autovacuum has analysed the tables, PostgreSQL may plan for empty tables, and the message count
becomes a nested loop reading a whole index per message (10,000 messages: minutes). So each count first analyses
the tables it reads that hold more than twice the rows their statistics make the planner expect
(`platform_kit.db.statistics_refreshed`: a look at pg_class and the statistics collector's counts each time, an
ANALYZE of some tens of milliseconds once per such growth).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memory_app.embedders import Embedder, EmbedderError, get_embedder
from memory_app.models import MessageEmbedding, Record, SessionEmbeddingProgress
from platform_kit.db import statistics_refreshed
from sessions_app.models import Message, Session, Tenant


@dataclass
class MemoryStatus:
    embedder: dict
    pending_message_vectors: int
    pending_record_vectors: int
    pending_search_index: int
    oldest_pending_seconds: float  # 0 when nothing is pending
    oldest_pending_at: datetime | None = None
    user_id: str | None = None
    measured_at: datetime = field(default_factory=timezone.now)

    @property
    def complete(self) -> bool:
        return not (self.pending_message_vectors or self.pending_record_vectors or self.pending_search_index)

    def detail(self, *, messages: bool = True, records: bool = True) -> str:
        """One line for a person: what recall is missing for now, or that it is missing nothing."""
        parts = []
        if records and self.pending_record_vectors:
            parts.append(_plural(self.pending_record_vectors, "record") + " without a vector yet")
        if messages and self.pending_message_vectors:
            parts.append(_plural(self.pending_message_vectors, "message") + " without a vector yet")
        if messages and self.pending_search_index:
            parts.append(_plural(self.pending_search_index, "long message") + " not yet searchable by keyword")
        if not parts:
            return ""
        waited = self.oldest_pending_seconds
        age = f" (the oldest waiting for {_duration(waited)})" if waited else ""
        return f"Not everything is indexed yet: {'; '.join(parts)}{age}; results may miss them until it is."


def with_recall_backlog(answer: dict, *, tenant: Tenant, user_id: str, include_messages: bool = True) -> dict:
    """A recall answer (its `results`, `detail`, ...) with what of `user_id`'s data it could not search yet:
    `pending` counts per kind, `complete`, and the backlog's sentence added to `detail`. Messages count only
    when the recall searched them."""
    backlog = memory_status(tenant=tenant, user_id=user_id)
    pending = {
        "message_vectors": backlog.pending_message_vectors if include_messages else 0,
        "record_vectors": backlog.pending_record_vectors,
        "search_index": backlog.pending_search_index if include_messages else 0,
    }
    line = backlog.detail(messages=include_messages)
    return {
        **answer,
        "detail": " ".join(part for part in (answer.get("detail", ""), line) if part),
        "pending": pending,
        "complete": not any(pending.values()),
    }


def memory_status(*, tenant: Tenant, user_id: str | None = None) -> MemoryStatus:
    """The backlog of the tenant's memory, or of one user's (see the module docstring)."""
    embedder, described = embedder_status()
    key = embedder.key if embedder is not None else None
    statistics_refreshed(*_COUNTED_TABLES)
    now = timezone.now()
    messages, oldest_message = (0, None)
    if settings.ACE_EMBED_MESSAGES:
        messages, oldest_message = pending_message_vectors(tenant=tenant, user_id=user_id, key=key)
    records, oldest_record = pending_record_vectors(tenant=tenant, user_id=user_id, key=key)
    unindexed, oldest_unindexed = pending_search_index(tenant=tenant, user_id=user_id)
    oldest = min((t for t in (oldest_message, oldest_record, oldest_unindexed) if t is not None), default=None)
    return MemoryStatus(
        embedder=described,
        pending_message_vectors=messages,
        pending_record_vectors=records,
        pending_search_index=unindexed,
        oldest_pending_seconds=round(max((now - oldest).total_seconds(), 0.0), 3) if oldest else 0.0,
        oldest_pending_at=oldest,
        user_id=user_id,
        measured_at=now,
    )


def embedder_status() -> tuple[Embedder | None, dict]:
    """The configured embedder and what a person needs to know of it, without loading a model or calling a
    service just to answer (`loaded`: None when that cannot be known cheaply)."""
    provider = str(settings.ACE_EMBEDDER)
    described = {
        "provider": provider,
        "key": None,
        "label": None,
        "dimensions": None,
        "loaded": None,
        "messages_embedded": bool(settings.ACE_EMBED_MESSAGES),
        "embedded_roles": list(settings.ACE_EMBED_MESSAGE_ROLES) if settings.ACE_EMBED_MESSAGES else [],
        "error": "",
    }
    try:
        embedder = get_embedder()
        described.update(key=embedder.key, label=embedder.label, dimensions=embedder.dimensions)
    except EmbedderError as error:
        described["error"] = str(error)
        return None, described
    if provider == "hash":
        described["loaded"] = True  # nothing to load
    elif provider in ("local", "e5"):
        described["loaded"] = getattr(embedder, "_model", None) is not None  # in this (web) process
    return embedder, described


def embedding_space(key: str | None) -> str:
    """What a message watermark is valid for: the vectors' key and the roles that get one."""
    return f"{key or ''}|{','.join(sorted(settings.ACE_EMBED_MESSAGE_ROLES))}"


# -- messages -------------------------------------------------------------------------------------------
_SESSION = Session._meta.db_table
_MESSAGE = Message._meta.db_table
_VECTOR = MessageEmbedding._meta.db_table
_PROGRESS = SessionEmbeddingProgress._meta.db_table
_COUNTED_TABLES = (_SESSION, _MESSAGE, _VECTOR, _PROGRESS)


_WAITING = f"""
    m.role = ANY(%(roles)s) AND m.content ~ '[^[:space:]]'
    AND NOT EXISTS (
        SELECT 1 FROM {_VECTOR} e
        WHERE e.message_id = m.id AND (%(key)s::text IS NULL OR e.embedding_key = %(key)s)
    )
"""


def _tails_sql(*, one_user: bool) -> str:
    """Per live session with a watermark in this space and messages after it: its last_seq, the watermark, how
    many of the tail still wait for a vector, the first of those, and when the oldest was received. Each tail is
    read through the (session, seq) index."""
    return f"""
        SELECT s.id, s.last_seq, p.embedded_through_seq, t.waiting, t.first_seq, t.oldest, statement_timestamp()
        FROM {_SESSION} s
        JOIN {_PROGRESS} p ON p.session_id = s.id AND p.space = %(space)s
        CROSS JOIN LATERAL (
            SELECT count(*) AS waiting, min(m.seq) AS first_seq, min(m.received_at) AS oldest
            FROM {_MESSAGE} m
            WHERE m.session_id = s.id AND m.seq > p.embedded_through_seq AND m.seq <= s.last_seq AND {_WAITING}
        ) t
        WHERE s.tenant_id = %(tenant)s {"AND s.user_id = %(user)s" if one_user else ""} AND s.deleted_at IS NULL
          AND s.last_seq > p.embedded_through_seq
    """


def _unmarked_sql(*, one_user: bool) -> str:
    """The same for the live sessions with no watermark in this space yet (new sessions; every session after a
    deploy or an embedder change): their messages are read at once, in one join (hash joins when they are many),
    rather than session by session."""
    return f"""
        WITH unmarked AS (
            SELECT s.id, s.last_seq FROM {_SESSION} s
            LEFT JOIN {_PROGRESS} p ON p.session_id = s.id AND p.space = %(space)s
            WHERE s.tenant_id = %(tenant)s {"AND s.user_id = %(user)s" if one_user else ""}
              AND s.deleted_at IS NULL AND s.last_seq > 0 AND p.session_id IS NULL
        )
        SELECT u.id, u.last_seq, 0, COALESCE(w.waiting, 0), w.first_seq, w.oldest, statement_timestamp()
        FROM unmarked u LEFT JOIN (
            SELECT m.session_id, count(*) AS waiting, min(m.seq) AS first_seq, min(m.received_at) AS oldest
            FROM {_MESSAGE} m JOIN unmarked u2 ON u2.id = m.session_id AND m.seq <= u2.last_seq
            WHERE m.tenant_id = %(tenant)s AND {_WAITING}
            GROUP BY m.session_id
        ) w ON w.session_id = u.id
    """


_ADVANCE_SQL = f"""
    INSERT INTO {_PROGRESS} (session_id, tenant_id, space, embedded_through_seq, updated_at)
    SELECT session_id, %s, space, through, updated_at
    FROM unnest(%s::uuid[], %s::text[], %s::bigint[], %s::timestamptz[]) AS t(session_id, space, through, updated_at)
    ON CONFLICT (session_id, tenant_id) DO UPDATE
        SET space = EXCLUDED.space, embedded_through_seq = EXCLUDED.embedded_through_seq,
            updated_at = EXCLUDED.updated_at
        -- A watermark lowered (a message's content changed) after this count began is newer: it stays.
        WHERE {_PROGRESS}.updated_at < EXCLUDED.updated_at
"""


def pending_message_vectors(*, tenant: Tenant, user_id: str | None, key: str | None) -> tuple[int, datetime | None]:
    """How many of the tenant's (user's) messages wait for a vector of `key` (None: for any vector), and when the
    oldest of them was received. Moves each session's watermark up to its first waiting message."""
    space = embedding_space(key)
    params = {
        "space": space,
        "roles": list(settings.ACE_EMBED_MESSAGE_ROLES),
        "key": key,
        "tenant": tenant.pk,
        "user": user_id,
    }
    one_user = user_id is not None
    with connection.cursor() as cursor:
        # One statement, so one snapshot: a session marked meanwhile is counted once, by one of the two.
        cursor.execute(f"({_tails_sql(one_user=one_user)}) UNION ALL ({_unmarked_sql(one_user=one_user)})", params)
        rows = cursor.fetchall()
    waiting, oldest, advance = 0, None, []
    for session_id, last_seq, done, count, first_seq, first_received, counted_at in rows:
        waiting += count
        if first_received is not None and (oldest is None or first_received < oldest):
            oldest = first_received
        through = first_seq - 1 if count else last_seq
        if through > done:
            advance.append((session_id, through, counted_at))
    if advance and key is not None:
        advance.sort()  # rows locked in one order by every count: two at once never deadlock
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                _ADVANCE_SQL,
                [
                    tenant.pk,
                    [row[0] for row in advance],
                    [space] * len(advance),
                    [row[1] for row in advance],
                    [row[2] for row in advance],
                ],
            )
    return waiting, oldest


def embedding_progress_refresh() -> int:
    """Count every tenant's waiting messages once, which moves every session's watermark up (the periodic sweep
    calls it): a session's first count reads its whole history, so it is done here, in a worker, rather than by
    the first recall or status request after a deploy, an embedder change or a big import."""
    if not settings.ACE_EMBED_MESSAGES:
        return 0
    embedder, _ = embedder_status()
    if embedder is None:
        return 0
    statistics_refreshed(*_COUNTED_TABLES)
    waiting = 0
    for tenant in Tenant.objects.order_by("name"):
        waiting += pending_message_vectors(tenant=tenant, user_id=None, key=embedder.key)[0]
    return waiting


# -- records and the search index ---------------------------------------------------------------------------
def pending_record_vectors(*, tenant: Tenant, user_id: str | None, key: str | None) -> tuple[int, datetime | None]:
    """Valid records without a vector of `key` (None: without any vector), and the oldest one's last change."""
    where, params = ["tenant_id = %s", "valid"], [tenant.pk]
    if user_id is not None:
        where.append("user_id = %s")
        params.append(user_id)
    if key is None:
        where.append("embedding_key = ''")
    else:  # `<>` written as two ranges, so the btree index reads only the pending entries
        where.append("(embedding_key < %s OR embedding_key > %s)")
        params += [key, key]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), min(updated_at) FROM {Record._meta.db_table} WHERE {' AND '.join(where)}", params
        )
        count, oldest = cursor.fetchone()
    return count, oldest


def pending_search_index(*, tenant: Tenant, user_id: str | None) -> tuple[int, datetime | None]:
    """Messages of live sessions still waiting for their keyword search vector (long ones, indexed after their
    write by the `indexing` queue), and when the oldest was received."""
    user_filter = "AND s.user_id = %s" if user_id is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), min(m.received_at) FROM {_MESSAGE} m JOIN {_SESSION} s ON s.id = m.session_id "
            f"WHERE m.search_vector IS NULL AND m.tenant_id = %s {user_filter} AND s.deleted_at IS NULL",
            [tenant.pk, *([user_id] if user_id is not None else [])],
        )
        count, oldest = cursor.fetchone()
    return count, oldest


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
