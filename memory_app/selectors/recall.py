"""Recall: hybrid search over a user's records and messages — vectors and keywords, fused by rank.

Keyword search catches exact names, numbers and rare words that embeddings blur; vectors catch
paraphrases that share no word. Each side ranks its own candidates; reciprocal rank fusion
(score = Σ 1 / (RRF_K + rank)) merges them without comparing their incomparable raw scores.
"""

from __future__ import annotations

import functools
import logging
import operator
import re
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, transaction
from django.db.models import Sum

from memory_app.embedders import EmbedderError, get_embedder
from memory_app.embeddings import ensure_vector_index
from memory_app.models import MessageEmbedding, Record
from platform_kit.db import within_time
from sessions_app.models import Message, Session, Tenant
from sessions_app.search import CJK_RUN, SEARCH_CONFIG

logger = logging.getLogger(__name__)

RRF_K = 60
CANDIDATES = 50  # per list (vector/keyword × records/messages) before fusion
KEYWORD_POOL = 2000  # keyword matches ranked per list: the newest ones
KEYWORD_SCAN_UP_TO = 20_000  # rows a keyword search tests one by one rather than probing the GIN index first
KEYWORD_PROBE_MS = 40  # above that, matches through the GIN index, if it answers this fast


@dataclass
class Hit:
    kind: str  # "record" | "message"
    id: str
    text: str
    session: str | None
    source_message_ids: list[str]
    source_external_ids: list[str]
    created_at: datetime
    score: float = 0.0
    matched_by: list[str] = field(default_factory=list)


@dataclass
class RecallResult:
    results: list[Hit]
    degraded: bool  # True: the embedder failed; these are keyword results only
    embedder: str
    detail: str = ""


def vector_sql(table: str, where: str, dims: int, *, shortlist: bool) -> str:
    """The nearest-rows query of `_vector_ids`: parameters (vector, key, *where params, vector).

    `shortlist`: for a filter that keeps many rows (a heavy user), rank them first by the Hamming distance of
    their sign bits — read from a covering index, 48 bytes a row — and compute exact distances for the
    nearest ACE_RECALL_SHORTLIST only. Otherwise exact distances over the filtered rows, or HNSW with pgvector's
    iterative index scan when the planner prefers it (it keeps reading the graph until LIMIT rows pass the
    filter, so a selective filter does not silently return too few).
    """
    id_column = "message_id" if table == MessageEmbedding._meta.db_table else "id"
    distance = f"(embedding::vector({dims})) <=> %s::vector({dims})"
    if shortlist:
        size = max(int(settings.ACE_RECALL_SHORTLIST), CANDIDATES)
        return (
            f"WITH shortlist AS (SELECT {id_column} AS id FROM {table} WHERE embedding_key = %s AND {where} "
            f"ORDER BY embedding_bits <~> binary_quantize(%s::vector({dims})) LIMIT {size}) "
            f"SELECT {id_column} FROM {table} WHERE {id_column} IN (SELECT id FROM shortlist) "
            f"ORDER BY {distance} LIMIT {CANDIDATES}"
        )
    return (
        f"SELECT id FROM (SELECT {id_column} AS id, {distance} AS distance FROM {table} "
        f"WHERE embedding_key = %s AND {where} ORDER BY {distance} LIMIT {CANDIDATES}) AS nearest "
        "ORDER BY distance"  # relaxed_order may return near-ties slightly out of order
    )


def count_sql(table: str, where: str) -> str:
    """Whether the filter keeps more than ACE_RECALL_EXACT_UP_TO rows (parameters: key, *where params)."""
    limit = int(settings.ACE_RECALL_EXACT_UP_TO) + 1
    return f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE embedding_key = %s AND {where} LIMIT {limit}) n"


def _vector_ids(sql_table: str, where: str, params: list, vector: list[float], dims: int, key: str) -> list[str]:
    """Nearest rows of one embedder's space under `where`, best first (see vector_sql)."""
    literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(count_sql(sql_table, where), [key, *params])
        shortlist = cursor.fetchone()[0] > settings.ACE_RECALL_EXACT_UP_TO
        if shortlist:
            cursor.execute(vector_sql(sql_table, where, dims, shortlist=True), [key, *params, literal, literal])
        else:
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = 100")
            cursor.execute(vector_sql(sql_table, where, dims, shortlist=False), [literal, key, *params, literal])
        return [str(row[0]) for row in cursor.fetchall()]


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")


def recall_terms(text: str) -> SearchQuery | None:
    """Any of the query's words (English words stemmed, Chinese as character bigrams), for ranking.

    A question rarely shares all its words with the answer ("what does she like to visit?"), so recall's
    keyword side matches any term and lets ts_rank order by how many and how close.
    """
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text) if len(w) > 1))[:32]
    grams: list[str] = []
    for run in CJK_RUN.findall(text):
        grams += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    grams = list(dict.fromkeys(grams))[:64]
    parts = [SearchQuery(word, search_type="plain", config=SEARCH_CONFIG) for word in words]
    parts += [SearchQuery(" ".join(gram), search_type="phrase", config=SEARCH_CONFIG) for gram in grams]
    if not parts:
        return None
    return functools.reduce(operator.or_, parts)


def _window_lookups(column: str, since, until) -> dict:
    lookups = {f"{column}__gte": since, f"{column}__lt": until}
    return {lookup: value for lookup, value in lookups.items() if value is not None}


def _window(where: list[str], params: list, column: str, since, until) -> None:
    """The same time window as _window_lookups, for the raw vector query."""
    for lookup, value in _window_lookups(column, since, until).items():
        where.append(f"{column} {'>=' if lookup.endswith('gte') else '<'} %s")
        params.append(value)


def _keyword_ids(queryset, terms: SearchQuery, *, newest: str, rows: int) -> list[str]:
    """The best CANDIDATES keyword matches by ts_rank, ranked among the newest KEYWORD_POOL matches.

    Ranking reads every match's stored vector; for a user with tens of thousands of matching rows that is
    most of the query's time, so only the newest pool is ranked (exact for everyone with fewer matches).

    Which rows match is found one of two ways, chosen by `rows` (about how many the filter keeps). Recall
    matches *any* query word, and a common word's GIN posting list spans every user: PostgreSQL's estimate
    of it is poor, and intersecting it with one user's rows can take hundreds of milliseconds. A user with
    at most KEYWORD_SCAN_UP_TO rows has them read through the user index and tested one by one (about a
    microsecond a row). For a bigger user the GIN index goes first, given KEYWORD_PROBE_MS: quick when the
    words are rare; abandoned for the per-row test when they are not.
    """
    pool = queryset.filter(search_vector=terms).order_by(f"-{newest}").values_list("pk", flat=True)[:KEYWORD_POOL]
    ids = None
    if rows > KEYWORD_SCAN_UP_TO:
        ids = within_time(
            lambda: list(pool),
            milliseconds=KEYWORD_PROBE_MS,
            using=queryset.db,
            planner={"enable_seqscan": "off", "enable_indexscan": "off"},  # matches from the GIN index
        )
    if ids is None:
        ids = within_time(
            lambda: list(pool),
            milliseconds=60_000,  # no probe: the settings are only scoped to this query
            using=queryset.db,
            planner={"enable_bitmapscan": "off"},  # the filter's rows through its btree index, tested one by one
        )
    if not ids:
        return []
    ranked = (
        queryset.model.objects.filter(pk__in=ids)
        .annotate(rank=SearchRank("search_vector", terms))
        .order_by("-rank")
        .values_list("pk", flat=True)[:CANDIDATES]
    )
    return [str(pk) for pk in ranked]


def _fuse(*rankings: tuple[str, list[str]]) -> dict[str, tuple[float, list[str]]]:
    fused: dict[str, tuple[float, list[str]]] = {}
    for name, ids in rankings:
        for rank, item in enumerate(ids, start=1):
            score, names = fused.get(item, (0.0, []))
            fused[item] = (score + 1.0 / (RRF_K + rank), [*names, name])
    return fused


def recall_search(
    *,
    tenant: Tenant,
    query: str,
    user_id: str,
    top_k: int = 10,
    types: list[str] | None = None,
    session=None,
    since: datetime | None = None,
    until: datetime | None = None,
    include_messages: bool = True,
    include_records: bool = True,
) -> RecallResult:
    embedder, vector, degraded, detail, embedder_key = None, None, False, "", ""
    try:
        embedder = get_embedder()
        vector = embedder.embed([query])[0]
        embedder_key = embedder.key
        ensure_vector_index(embedder)
    except EmbedderError as error:
        logger.warning("recall without vectors: %s", error)
        embedder, vector = None, None
        degraded, detail = True, f"Embedder unavailable, keyword results only: {error}"

    rankings: list[tuple[str, list[str]]] = []
    terms = recall_terms(query)
    if include_records:
        records = Record.objects.filter(tenant=tenant, user_id=user_id, valid=True)
        if types:
            records = records.filter(type__in=types)
        if session is not None:
            records = records.filter(source_sessions=session)
        records = records.filter(**_window_lookups("updated_at", since, until))
        if terms is not None:
            rows = records.values("pk")[: KEYWORD_SCAN_UP_TO + 1].count()
            ids = _keyword_ids(records, terms, newest="updated_at", rows=rows)
            rankings.append(("keyword", ["r:" + i for i in ids]))
        if vector is not None:
            where, params = ["tenant_id = %s", "user_id = %s", "valid"], [tenant.pk, user_id]
            if types:
                where.append("type = ANY(%s)")
                params.append(list(types))
            if session is not None:
                where.append("id IN (SELECT record_id FROM memory_app_record_source_sessions WHERE session_id = %s)")
                params.append(session)
            _window(where, params, "updated_at", since, until)
            ids = _vector_ids(
                Record._meta.db_table, " AND ".join(where), params, vector, embedder.dimensions, embedder.key
            )
            rankings.append(("vector", ["r:" + i for i in ids]))
    if include_messages:
        messages = Message.objects.filter(tenant=tenant, session__user_id=user_id, session__deleted_at__isnull=True)
        if session is not None:
            messages = messages.filter(session=session)
        messages = messages.filter(**_window_lookups("created_at", since, until))
        if terms is not None:
            sessions = Session.objects.filter(tenant=tenant, user_id=user_id, deleted_at__isnull=True)
            if session is not None:
                sessions = sessions.filter(pk=session)
            rows = sessions.aggregate(rows=Sum("messages"))["rows"] or 0  # the sessions' own counters
            ids = _keyword_ids(messages, terms, newest="created_at", rows=rows)
            rankings.append(("keyword", ["m:" + i for i in ids]))
        if vector is not None:
            where, params = ["tenant_id = %s", "user_id = %s"], [tenant.pk, user_id]
            if session is not None:
                where.append("session_id = %s")
                params.append(session)
            _window(where, params, "created_at", since, until)
            ids = _vector_ids(
                MessageEmbedding._meta.db_table, " AND ".join(where), params, vector, embedder.dimensions, embedder.key
            )
            rankings.append(("vector", ["m:" + i for i in ids]))

    fused = _fuse(*rankings)
    best = sorted(fused.items(), key=lambda item: -item[1][0])[:top_k]
    hits = _load_hits([key for key, _ in best])
    results = []
    for key, (score, names) in best:
        hit = hits.get(key)
        if hit is not None:
            hit.score, hit.matched_by = round(score, 6), sorted(set(names))
            results.append(hit)
    return RecallResult(results=results, degraded=degraded, embedder=embedder_key, detail=detail)


def _load_hits(keys: list[str]) -> dict[str, Hit]:
    record_ids = [k[2:] for k in keys if k.startswith("r:")]
    message_ids = [k[2:] for k in keys if k.startswith("m:")]
    hits: dict[str, Hit] = {}
    if record_ids:
        records = Record.objects.filter(pk__in=record_ids).prefetch_related("source_sessions", "source_messages")
        for record in records:
            sources = sorted(record.source_messages.all(), key=lambda m: (str(m.session_id), m.seq))
            sessions = sorted(str(s.pk) for s in record.source_sessions.all())
            hits["r:" + str(record.pk)] = Hit(
                kind="record",
                id=str(record.pk),
                text=record.content,
                session=sessions[0] if len(sessions) == 1 else None,
                source_message_ids=[str(m.pk) for m in sources],
                source_external_ids=[m.external_id for m in sources if m.external_id],
                created_at=record.created_at,
            )
    if message_ids:
        for message in Message.objects.filter(pk__in=message_ids).only(
            "id", "session_id", "content", "external_id", "created_at"
        ):
            hits["m:" + str(message.pk)] = Hit(
                kind="message",
                id=str(message.pk),
                text=message.content,
                session=str(message.session_id),
                source_message_ids=[str(message.pk)],
                source_external_ids=[message.external_id] if message.external_id else [],
                created_at=message.created_at,
            )
    return hits
