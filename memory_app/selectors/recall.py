"""Recall: hybrid search over a user's records and messages — keywords (BM25) and vectors, on one scale.

Keyword search catches exact names, numbers and rare words that embeddings blur; vectors catch paraphrases
that share no word. Both sides score every candidate on a scale that means the same for a record as for a
message, so a record is ranked above a message only when it matches the question better:

- keywords: Okapi BM25 over the user's rows (term statistics from this user's matching rows, not a
  corpus-wide ts_rank), divided by the best score the query's terms could reach, so it lies in [0, 1];
- vectors: the cosine similarity above a floor, the weakest of the nearest rows (VECTOR_FLOOR).

A message is rarely the whole answer: a question is answered by a turn and the one before or after it ("What
did you do there?" — "We hiked to the lake."). So a message's score adds part of its neighbours' scores (the
turns before and after it in the same session), and a message hit brings those neighbours along as `context`.
The weights and rules were chosen by leave-one-data-set-out over five public benchmarks, two of them Chinese
(bench/memory_eval.py, bench/README.md).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db import connection, transaction
from django.db.models import BooleanField, Func, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from memory_app.embedders import EmbedderError, get_embedder
from memory_app.models import UNEXPIRED_SQL, MessageEmbedding, Record, UserSearchVector, unexpired, user_lexeme
from memory_app.query_vectors import query_vector, vector_literal
from platform_kit.db import within_time
from sessions_app.models import Message, Session, Tenant

logger = logging.getLogger(__name__)

CANDIDATES = 100  # nearest rows per vector list (records, messages) before scoring
MAX_TOP_K = 100  # the most hits a recall returns (RecallQuerySerializer.top_k)
KEYWORD_POOL = 2000  # keyword matches scored per list: the newest ones
KEYWORD_SCAN_UP_TO = 20_000  # messages a keyword search tests one by one before probing GIN; records counted exactly
KEYWORD_PROBE_MS = 40  # above that, matches through the GIN index, if it answers this fast
# A question of more words (lexemes) than PICK_ABOVE_LEXEMES has their positions in each matching row of more
# than PICK_ROWS_ABOVE_LEXEMES distinct words picked out by PostgreSQL, rather than found by searching the row's
# whole vector text once per word: that search costs the words times the row's length, the picking neither
# (RealMemBench: 25-word questions against hundreds of long turns, 54 -> 33 ms for the keyword side; LoCoMo's
# 5-6 words, and short rows, are quicker searched).
PICK_ABOVE_LEXEMES = 12
PICK_ROWS_ABOVE_LEXEMES = 64

# BM25's usual constants.
BM25_K1 = 1.2
BM25_B = 0.75
# The score: keyword score + VECTOR_WEIGHT × cosine above the floor. A message adds NEIGHBOUR_KEYWORD and
# NEIGHBOUR_VECTOR times the own scores of the turns before and after it, and SESSION_WEIGHT times the best
# own score in its session (session-first: a session that answers the question well lifts its other turns;
# 0 switches it off). A message hit brings CONTEXT turns along (how many before it, how many after);
# CONTEXT_HITS says whether a turn already shown as a better hit's context can still be a hit ("promote") or
# is passed over ("skip"), see _pick. Each chosen by leave-one-data-set-out over five public sets
# (bench/memory_eval.py): every fold chose "promote" and (2, 2); these are the best over all five (session-first
# is off: 0.5 is 0.0001 behind on the five sets' mean objective, ahead on LoCoMo, behind on the other four).
VECTOR_WEIGHT = 0.5
NEIGHBOUR_KEYWORD = 0.25
NEIGHBOUR_VECTOR = 0.0
SESSION_WEIGHT = 0.0
CONTEXT = (2, 2)
CONTEXT_HITS = "promote"
CONTEXT_PER_HIT = 2
# CJK query terms: "words" (the words jieba finds, in its search mode, each matched as a phrase of its
# characters) or "pairs" (each pair of adjacent characters). Chosen on MADial-Bench and MemDaily, each choosing
# for the other (bench/README.md).
CJK_TERMS = "words"
# The vectors' weight instead of VECTOR_WEIGHT for a question written mostly in Chinese, Japanese or Korean when
# the embedder's model was trained on English only (the bundled all-MiniLM-L6-v2: its vectors of such text are
# near noise, and the keyword side carries recall); None: VECTOR_WEIGHT for every question. Chosen on
# MADial-Bench and MemDaily, each choosing for the other (bench/README.md).
CJK_VECTOR_WEIGHT: float | None = 0.1
# Such a question's vector (weighed CJK_VECTOR_WEIGHT) is computed from its first CJK_VECTOR_CHARS characters: the
# English model reads each character as a token, and a question of 243 characters took 60 ms to embed on one
# thread, 31 ms at 128. Neither Chinese set's figures moved at 128 (MADial, MemDaily; 64 cost MemDaily 0.001,
# 32 0.003). None: the whole question.
CJK_VECTOR_CHARS: int | None = 128
# Where "not similar" begins, the floor each cosine is measured from: "full" — the weakest row of the nearest-row
# lists (records, messages) that came back full (CANDIDATES rows), or of every row when none did; "weakest" — the
# weakest row of both lists. A list that came back short holds every row the user has, the least similar among
# them: a user's handful of records put the floor far below the messages' hundredth nearest, and every cosine
# then counted more against the keywords (LoCoMo with the built-in strategies' records: with context 0.779,
# against 0.795 without records). Chosen by leave-one-data-set-out with those records (memory_eval --strategies).
VECTOR_FLOOR = "full"
# The weights above were chosen with the bundled English model. An embedder whose model the same protocol chose
# other weights for says so (Embedder.recall_weights: e5's vectors are worth more), and ACE_RECALL_WEIGHTS sets
# them for a model run elsewhere (ACE_EMBEDDER=openai); False: the module's for every embedder, whatever the
# setting (bench/memory_eval.py, which sets the constants itself).
EMBEDDER_WEIGHTS = True


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
    context: list[dict] = field(default_factory=list)  # a message's neighbours: the turns before and after it


@dataclass
class RecallResult:
    results: list[Hit]
    degraded: bool  # True: the embedder failed; these are keyword results only
    embedder: str
    detail: str = ""


def vector_sql(table: str, where: str, dims: int, *, shortlist: bool) -> str:
    """The nearest-rows query of `_vector_scores`: rows of (id, distance), the cosine distance, nearest first,
    whichever the table (a message's vector is keyed by `message_id`; callers select and join `id`).
    Parameters: (vector, key, *where params, vector), or with `shortlist` (key, *where params, vector, vector).

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
            f"SELECT {id_column} AS id, {distance} AS distance FROM {table} "
            f"WHERE {id_column} IN (SELECT id FROM shortlist) "
            f"ORDER BY distance LIMIT {CANDIDATES}"
        )
    return (
        f"SELECT id, distance FROM (SELECT {id_column} AS id, {distance} AS distance FROM {table} "
        f"WHERE embedding_key = %s AND {where} ORDER BY {distance} LIMIT {CANDIDATES}) AS nearest "
        "ORDER BY distance"  # relaxed_order may return near-ties slightly out of order
    )


def count_sql(table: str, where: str) -> str:
    """Whether the filter keeps more than ACE_RECALL_EXACT_UP_TO rows (parameters: key, *where params)."""
    limit = int(settings.ACE_RECALL_EXACT_UP_TO) + 1
    return f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE embedding_key = %s AND {where} LIMIT {limit}) n"


# Planner settings of a recall's transaction: pgvector's iterative HNSW scan (it keeps reading the graph until
# LIMIT rows pass the filter, so a selective filter does not silently return too few), and no sequential scans.
RECALL_SETTINGS = (
    "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = 100; SET LOCAL enable_seqscan = off"
)
# Then, before the messages' keyword search: the user's messages through their btree index, each tested (see
# _message_keyword_matches); the records' keyword search before it needs bitmap scans (its GIN index).
MESSAGE_KEYWORD_SETTINGS = "SET LOCAL enable_bitmapscan = off"


def _vector_scores(
    sql_table: str,
    where: str,
    params: list,
    literal: str,
    dims: int,
    key: str,
    *,
    at_most: int | None = None,
    rows: int | None = None,
    places: bool = False,
) -> list[tuple]:
    """Nearest rows of one embedder's space under `where` with their cosine similarity, best first:
    (id, similarity), and with `places` (messages) the message's session and seq too. Runs in the recall's
    transaction (RECALL_SETTINGS). Whether to shortlist needs the number of rows the filter keeps in the space:
    `rows`, that number when counted elsewhere (_record_counts), or `at_most`, a bound on it (the sessions'
    counters) that saves counting them when within ACE_RECALL_EXACT_UP_TO; else they are counted here.
    `literal`: the query vector in pgvector's text form."""
    with connection.cursor() as cursor:
        shortlist = rows is not None and rows > settings.ACE_RECALL_EXACT_UP_TO
        if rows is None and (at_most is None or at_most > settings.ACE_RECALL_EXACT_UP_TO):
            cursor.execute(count_sql(sql_table, where), [key, *params])
            shortlist = cursor.fetchone()[0] > settings.ACE_RECALL_EXACT_UP_TO
        if shortlist:
            sql, args = vector_sql(sql_table, where, dims, shortlist=True), [key, *params, literal, literal]
        else:
            sql, args = vector_sql(sql_table, where, dims, shortlist=False), [literal, key, *params, literal]
        if places:
            sql = (
                f"SELECT nearest.id::text, nearest.distance, m.session_id::text, m.seq FROM ({sql}) AS nearest "
                f"JOIN {Message._meta.db_table} m ON m.id = nearest.id ORDER BY nearest.distance"
            )
            cursor.execute(sql, args)
            return [(row[0], 1.0 - float(row[1]), (row[2], row[3])) for row in cursor.fetchall()]
        cursor.execute(sql, args)
        return [(str(pk), 1.0 - float(distance)) for pk, distance in cursor.fetchall()]


def _vector_ids(sql_table: str, where: str, params: list, vector: list[float], dims: int, key: str) -> list[str]:
    """The ids of `_vector_scores`, nearest first (in a transaction of its own)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(RECALL_SETTINGS)
        return [pk for pk, _ in _vector_scores(sql_table, where, params, vector_literal(vector), dims, key)]


# -- BM25 over stored tsvectors ---------------------------------------------------------------------------
_LEXEME = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")
_CJK_CHARACTERS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_ONE_CJK = re.compile(f"^[{_CJK_CHARACTERS}]$")
_CJK = re.compile(f"[{_CJK_CHARACTERS}]")
_CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})


def parse_tsvector(text: str | None) -> dict[str, list[int]]:
    """A tsvector's text form ('lexeme':1,5 'other':3) as {lexeme: positions}."""
    out: dict[str, list[int]] = {}
    for lexeme, positions in _LEXEME.findall(text or ""):
        out[lexeme.replace("''", "'")] = [int(p.rstrip("ABCD")) for p in positions.split(",")] if positions else [0]
    return out


def query_terms(query: str) -> list[tuple[str, ...]]:
    """The query's terms as the stored vectors index them: English lexemes (stemmed, stop words out) as
    1-tuples, and CJK text as runs of adjacent characters (CJK_TERMS). Computed by the same `ace_tsvector` as
    the stored rows, so the two always agree."""
    lexemes = parse_tsvector(_query_tsvector(query[:4000]))
    terms: list[tuple[str, ...]] = []
    cjk_at: dict[int, str] = {}
    for lexeme, positions in lexemes.items():
        if _ONE_CJK.match(lexeme):
            cjk_at.update({p: lexeme for p in positions})
        else:
            terms.append((lexeme,))
    terms += _cjk_words(cjk_at) if CJK_TERMS == "words" else _cjk_pairs(cjk_at)
    return list(dict.fromkeys(terms))[:96]


def _cjk_pairs(cjk_at: dict[int, str]) -> list[tuple[str, ...]]:
    """Each pair of adjacent CJK characters (a character alone when it has no neighbour)."""
    terms = []
    for position, char in sorted(cjk_at.items()):
        following, preceding = cjk_at.get(position + 1), cjk_at.get(position - 1)
        if following:
            terms.append((char, following))
        elif not preceding:
            terms.append((char,))
    return terms


def _cjk_runs(cjk_at: dict[int, str]) -> list[str]:
    """The runs of CJK characters at consecutive positions, as strings."""
    runs, previous = [], None
    for position, char in sorted(cjk_at.items()):
        if previous is not None and position == previous + 1:
            runs[-1] += char
        else:
            runs.append(char)
        previous = position
    return runs


def _cjk_words(cjk_at: dict[int, str]) -> list[tuple[str, ...]]:
    """The words of two characters or more that jieba finds in each CJK run, as their characters (matched as a
    phrase): in its search mode, a long word and the shorter words inside it ("绿洲家园", "绿洲", "家园"), so a
    row that names only part of it still matches. A run of one character is itself; the one-character words
    inside a longer run (的, 了, 在) are left out, as English stop words are."""
    terms = []
    for run in _cjk_runs(cjk_at):
        if len(run) == 1:
            terms.append((run,))
            continue
        terms += [tuple(word) for word in _segmenter().lcut_for_search(run) if len(word) > 1]
    return terms


@functools.cache
def _segmenter():
    """jieba's tokenizer, its dictionary loaded (about a second, once per process; memory_app.embedders.warmup
    loads it at start)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return tokenizer


@functools.lru_cache(maxsize=2048)
def _query_tsvector(query: str) -> str:
    """`ace_tsvector` of a query, as text: asked of PostgreSQL once per process and query (a function of the
    text alone), like the query's vector (memory_app.query_vectors)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT ace_tsvector(%s)::text", [query])
        return cursor.fetchone()[0]


def doc_terms(text: str | None, lexemes: list[str], picked: str | None = None) -> tuple[dict[str, list[int]], int]:
    """From a stored tsvector's text form ('lexeme':1,5 'other':3), the positions of the given lexemes only,
    and the row's length in positions: string searches rather than parsing every lexeme of every row.

    `picked`: the same row's tsvector cut down to those lexemes by PostgreSQL (_keyword_pool does it for a
    long row), parsed instead of searching the whole text once per lexeme."""
    text = text or ""
    if picked is not None:
        wanted = set(lexemes)
        found = {lexeme: positions for lexeme, positions in parse_tsvector(picked).items() if lexeme in wanted}
        return found, text.count(",") + text.count("':")
    found: dict[str, list[int]] = {}
    for lexeme in lexemes:
        needle = "'" + lexeme.replace("'", "''") + "':"
        at = text.find(needle)
        while at > 0 and text[at - 1] != " ":  # the end of another lexeme that ends the same way
            at = text.find(needle, at + 1)
        if at < 0:
            continue
        start = at + len(needle)
        end = text.find(" ", start)
        positions = text[start:] if end < 0 else text[start:end]
        found[lexeme] = [int(p.rstrip("ABCD")) for p in positions.split(",")]
    return found, text.count(",") + text.count("':")


def _term_frequency(doc: dict[str, list[int]], term: tuple[str, ...]) -> int:
    """How often the term occurs in the doc: a lexeme's positions, or a phrase's (its lexemes at consecutive
    positions)."""
    if len(term) == 1:
        return len(doc.get(term[0], ()))
    positions = [doc.get(lexeme) for lexeme in term]
    if not all(positions):
        return 0
    later = [set(p) for p in positions[1:]]
    return sum(1 for p in positions[0] if all(p + i in s for i, s in enumerate(later, start=1)))


def bm25_scores(
    docs: dict[str, tuple[dict[str, list[int]], int]], terms: list[tuple[str, ...]], rows: int
) -> dict[str, float]:
    """Okapi BM25 of each doc (its query lexemes' positions, its length) for the terms, divided by the best the
    terms could score (so 0–1).

    `docs` are all the matching rows (each containing at least one term) of a collection of `rows` rows:
    a term's document frequency is counted among them, exact when every match is there."""
    if not docs or not terms:
        return {}
    words = [(term[0] if len(term) == 1 else None, term) for term in terms]  # a word's frequency: its positions
    freqs = {
        key: [len(doc.get(word, ())) if word else _term_frequency(doc, term) for word, term in words]
        for key, (doc, _) in docs.items()
    }
    lengths = {key: length for key, (_, length) in docs.items()}
    average = sum(lengths.values()) / len(lengths) or 1.0
    total = max(rows, len(docs))
    idf = []
    for i in range(len(terms)):
        df = sum(1 for f in freqs.values() if f[i])
        idf.append(math.log(1 + (total - df + 0.5) / (df + 0.5)) if df else 0.0)
    best = sum(w * (BM25_K1 + 1) for w in idf) or 1.0
    scores = {}
    for key, f in freqs.items():
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[key] / average)
        score = sum(w * tf * (BM25_K1 + 1) / (tf + norm) for w, tf in zip(idf, f, strict=True) if tf)
        if score > 0:
            scores[key] = score / best
    return scores


def _quoted(lexeme: str) -> str:
    """A lexeme in tsquery syntax."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def terms_query(terms: list[tuple[str, ...]]) -> SearchQuery | None:
    """The rows containing any of the terms: a raw tsquery of the lexemes as the stored vectors hold them
    (`simple`, so nothing is stemmed twice), a CJK pair as a phrase."""
    if not terms:
        return None
    parts = [" <-> ".join(_quoted(lexeme) for lexeme in term) for term in terms]
    return SearchQuery(" | ".join(f"({part})" for part in parts), search_type="raw", config="simple")


def _of_user(tenant: Tenant, user_id: str) -> Func:
    """The records whose UserSearchVector holds the user's lexeme. The lexeme goes in verbatim (`::tsquery`):
    to_tsquery would parse "<tenant id>/<user id>" into several words."""
    lexeme = Value(_quoted(user_lexeme(tenant.pk, user_id)))
    return Func(
        UserSearchVector(),
        lexeme,
        template="(%(expressions)s::tsquery)",
        arg_joiner=" @@ ",
        output_field=BooleanField(),
    )


def _window_lookups(column: str, since, until) -> dict:
    lookups = {f"{column}__gte": since, f"{column}__lt": until}
    return {lookup: value for lookup, value in lookups.items() if value is not None}


def _window(where: list[str], params: list, column: str, since, until) -> None:
    """The same time window as _window_lookups, for the raw vector query."""
    for lookup, value in _window_lookups(column, since, until).items():
        where.append(f"{column} {'>=' if lookup.endswith('gte') else '<'} %s")
        params.append(value)


def _keyword_pool(matches, *, newest: str, lexemes: list[str], columns: tuple[str, ...] = ()):
    """(pk, *columns, search vector text, picked) of the newest KEYWORD_POOL rows of `matches`, ids as text (a
    recall keys hundreds of candidates by them; a UUID object's str() was a tenth of its time). `picked`: for
    a query of more than PICK_ABOVE_LEXEMES `lexemes`, each row's vector of more than PICK_ROWS_ABOVE_LEXEMES
    words cut down to them by PostgreSQL (marked with weight A by setweight, the rest dropped by ts_filter),
    else None (see doc_terms).

    Scoring reads every match's stored vector; for a user with tens of thousands of matching rows that would
    be most of the query's time, so only the newest pool is scored (exact for everyone with fewer matches)."""
    texts = {f"{name}_text": Cast(name, TextField()) for name in ("pk", *columns) if name != "seq"}
    vector = f'"{matches.model._meta.db_table}"."search_vector"'
    picked = (
        RawSQL(
            f"CASE WHEN length({vector}) > %s THEN ts_filter(setweight({vector}, 'A', %s::text[]), '{{a}}')::text END",
            [PICK_ROWS_ABOVE_LEXEMES, lexemes],
            output_field=TextField(),
        )
        if len(lexemes) > PICK_ABOVE_LEXEMES
        else Value(None, output_field=TextField())
    )
    return (
        matches.order_by(f"-{newest}")
        .annotate(lexemes=Cast("search_vector", TextField()), picked=picked, **texts)
        .values_list(*(name if name == "seq" else f"{name}_text" for name in ("pk", *columns)), "lexemes", "picked")[
            :KEYWORD_POOL
        ]
    )


def _record_counts(where: str, params: list, key: str) -> tuple[int, int]:
    """How many records the filter keeps, and how many of those have a vector of `key`, in one statement (an
    index-only scan of record_user_bits); both exact when the first is at most KEYWORD_SCAN_UP_TO."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), count(*) FILTER (WHERE embedding_key = %s) FROM (SELECT embedding_key FROM "
            f"{Record._meta.db_table} WHERE {where} LIMIT {KEYWORD_SCAN_UP_TO + 1}) AS kept",
            [key, *params],
        )
        return cursor.fetchone()


def _record_keyword_matches(records, terms: SearchQuery, *, lexemes: list[str], tenant: Tenant, user_id: str) -> list:
    """`_keyword_pool` of the user's records matching any term, through their GIN index of the words and the
    user (record_user_search), which intersects the two: a heavy user's matches without reading the user's
    other rows, or the word's rows of other users."""
    matches = records.filter(_of_user(tenant, user_id)).alias(user_search=UserSearchVector()).filter(user_search=terms)
    return list(_keyword_pool(matches, newest="updated_at", lexemes=lexemes))


def _message_keyword_matches(messages, terms: SearchQuery, *, lexemes: list[str], rows: int) -> list:
    """`_keyword_pool` of the messages matching any term, with their session and seq. Runs in the recall's
    transaction, after MESSAGE_KEYWORD_SETTINGS.

    Which rows match is found one of two ways, chosen by `rows` (about how many the filter keeps). Recall
    matches *any* query word, and a common word's GIN posting list spans every user: PostgreSQL's estimate
    of it is poor, and intersecting it with one user's rows can take hundreds of milliseconds. A user with
    at most KEYWORD_SCAN_UP_TO rows has them read through the user index and tested one by one (about a
    microsecond a row). For a bigger user the GIN index goes first, given KEYWORD_PROBE_MS: quick when the
    words are rare; abandoned for the per-row test when they are not.
    """
    pool = _keyword_pool(
        messages.filter(search_vector=terms), newest="created_at", lexemes=lexemes, columns=("session_id", "seq")
    )
    found = None
    if rows > KEYWORD_SCAN_UP_TO:
        found = within_time(
            lambda: list(pool),
            milliseconds=KEYWORD_PROBE_MS,
            using=messages.db,
            # matches from the GIN index (MESSAGE_KEYWORD_SETTINGS has bitmap scans off)
            planner={"enable_seqscan": "off", "enable_indexscan": "off", "enable_bitmapscan": "on"},
        )
    if found is None:
        found = list(pool)  # MESSAGE_KEYWORD_SETTINGS: the filter's rows through its btree index, tested one by one
    return found


@dataclass
class _Candidate:
    kind: str
    pk: str
    place: tuple[str, int] | None = None  # a message's (session, seq)
    keyword: float = 0.0
    cosine: float | None = None
    matched_by: set[str] = field(default_factory=set)
    score: float = 0.0
    around: list[tuple[str, int]] = field(default_factory=list)  # the neighbours a message hit shows


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
    vector, degraded, detail, embedder_key = None, False, "", ""
    try:
        embedder = get_embedder()
        # Embedded in a thread while the keyword side runs in the database.
        vector = QueryVector(embedder, vector_text(query, embedder))
        embedder_key = embedder.key
    except EmbedderError as error:
        logger.warning("recall without vectors: %s", error)
        embedder = None
        degraded, detail = True, _keyword_only(error)

    candidates, keyword = gather(
        tenant=tenant,
        query=query,
        user_id=user_id,
        vector=vector,
        embedder=embedder,
        types=types,
        session=session,
        since=since,
        until=until,
        include_messages=include_messages,
        include_records=include_records,
    )
    if vector is not None and vector.error is not None:
        degraded, detail = True, _keyword_only(vector.error)
    ranked = _score(candidates, keyword, weights(query, embedder))
    best = _pick(ranked, top_k)
    hits = _load_hits(best, tenant=tenant)
    results = []
    for c in best:
        hit = hits.get(f"{c.kind[0]}:{c.pk}")
        if hit is not None:
            hit.score, hit.matched_by = round(c.score, 6), sorted(c.matched_by)
            results.append(hit)
    return RecallResult(results=results, degraded=degraded, embedder=embedder_key, detail=detail)


def _keyword_only(error: EmbedderError) -> str:
    return f"Embedder unavailable, keyword results only: {error}"


class QueryVector:
    """The query's vector (query_vector: pgvector's text form), embedded in a thread of this process from the
    moment the recall starts: the keyword side's statements run in the database meanwhile, and `get()` waits
    for the vector only when the vector side needs it (a LoCoMo recall: ~7 ms of its ~35 no longer in line).

    `get()` is None when the embedder failed; `error` then says why (the recall is keyword-only, degraded)."""

    def __init__(self, embedder, query: str):
        self.error: EmbedderError | None = None
        self._future = _embedding_threads().submit(query_vector, embedder, query)

    def get(self) -> str | None:
        if self.error is not None:
            return None
        try:
            return self._future.result()
        except EmbedderError as error:
            logger.warning("recall without vectors: %s", error)
            self.error = error
            return None


_threads: tuple[int, ThreadPoolExecutor] | None = None
_threads_lock = threading.Lock()


def _embedding_threads() -> ThreadPoolExecutor:
    """The threads that embed queries, shared by the recalls of this process (a threaded server runs several).
    One pool per process id: a pool's threads do not survive a fork (gunicorn's and Celery's workers), and a
    forked copy of it would queue work that no thread ever runs."""
    global _threads
    with _threads_lock:
        if _threads is None or _threads[0] != os.getpid():
            _threads = (os.getpid(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-query-vector"))
        return _threads[1]


def _in_recall_transaction(fn):
    """Run `fn` in one transaction with RECALL_SETTINGS: one BEGIN and one SET for all of a recall's queries."""

    @functools.wraps(fn)
    def wrapper(**kwargs):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(RECALL_SETTINGS)
            return fn(**kwargs)

    return wrapper


@_in_recall_transaction
def gather(
    *,
    tenant: Tenant,
    query: str,
    user_id: str,
    vector: QueryVector | str | None,
    embedder,
    types: list[str] | None,
    session,
    since: datetime | None,
    until: datetime | None,
    include_messages: bool,
    include_records: bool,
) -> tuple[dict[str, _Candidate], dict[str, float]]:
    """The candidates of the four lists (keyed "r:<id>" / "m:<id>", with their cosine and, for messages, their
    place in the session) and the keyword matches' BM25 scores, 0–1, over one collection of both kinds.
    `vector`: the query's, in pgvector's text form (query_vector) or being embedded (QueryVector), or None for
    keywords only. The keyword side runs first, the vector side after it."""
    candidates: dict[str, _Candidate] = {}
    embedder_key = embedder.key if embedder is not None else ""
    docs: dict[str, tuple[dict[str, list[int]], int]] = {}  # keyword matches of both kinds: one collection
    rows = 0
    terms = query_terms(query)
    matcher = terms_query(terms)
    lexemes = sorted({lexeme for term in terms for lexeme in term})

    def candidate(kind: str, pk, place=None) -> _Candidate:
        key = f"{kind[0]}:{pk}"
        if key not in candidates:
            candidates[key] = _Candidate(kind=kind, pk=str(pk), place=place)
        elif place is not None:
            candidates[key].place = place
        return candidates[key]

    if include_records:
        records = Record.objects.filter(unexpired(), tenant=tenant, user_id=user_id, valid=True)
        if types:
            records = records.filter(type__in=types)
        if session is not None:
            records = records.filter(source_sessions=session)
        records = records.filter(**_window_lookups("updated_at", since, until))
        # The same filter as `records`, as SQL: for the count and the nearest rows.
        where, params = ["tenant_id = %s", "user_id = %s", "valid", UNEXPIRED_SQL], [tenant.pk, user_id]
        if types:
            where.append("type = ANY(%s)")
            params.append(list(types))
        if session is not None:
            where.append("id IN (SELECT record_id FROM memory_app_record_source_sessions WHERE session_id = %s)")
            params.append(session)
        _window(where, params, "updated_at", since, until)
        in_space = None
        if matcher is not None:
            count, counted_in_space = _record_counts(" AND ".join(where), params, embedder_key)
            rows += count
            in_space = counted_in_space if count <= KEYWORD_SCAN_UP_TO else None
            # No record kept by the filter (a user no strategy has read yet): nothing to match or rank.
            matched = (
                _record_keyword_matches(records, matcher, lexemes=lexemes, tenant=tenant, user_id=user_id)
                if count
                else ()
            )
            for pk, text, picked in matched:
                docs[f"r:{pk}"] = doc_terms(text, lexemes, picked)  # a candidate once scored: _best_keyword_records
        records_where, records_params, records_in_space = " AND ".join(where), params, in_space
    if include_messages:
        message_rows = None
        if matcher is not None:
            sessions = Session.objects.filter(tenant=tenant, user_id=user_id, deleted_at__isnull=True)
            if session is not None:
                sessions = sessions.filter(pk=session)
            # The user's live sessions with their own message counters, in one query; their messages are then
            # read through the (session, seq) index for exactly these sessions. Joined on the user instead,
            # PostgreSQL may scan the whole tenant's messages for a user of many short sessions (85 ms for
            # 83 sessions in a tenant of 32,000 messages, against 1.5 ms).
            kept = list(sessions.values_list("pk", "messages"))
            count = sum(held for _, held in kept)
            rows += count
            message_rows = count
            messages = Message.objects.filter(tenant=tenant, session_id__in=[pk for pk, _ in kept]).filter(
                **_window_lookups("created_at", since, until)
            )
            with connection.cursor() as cursor:
                cursor.execute(MESSAGE_KEYWORD_SETTINGS)
            matched = _message_keyword_matches(messages, matcher, lexemes=lexemes, rows=count) if kept else ()
            for pk, session_id, seq, text, picked in matched:
                candidate("message", pk, (session_id, seq))  # ids as text (_keyword_pool)
                docs[f"m:{pk}"] = doc_terms(text, lexemes, picked)
    keyword = bm25_scores(docs, terms, rows)
    # The vector side, once the keyword side's statements have run: the query's vector was being embedded
    # meanwhile (QueryVector).
    vector = vector.get() if isinstance(vector, QueryVector) else vector
    if include_records and vector is not None and records_in_space != 0:  # 0: no record has a vector to compare
        for pk, cosine in _vector_scores(
            Record._meta.db_table,
            records_where,
            records_params,
            vector,
            embedder.dimensions,
            embedder.key,
            rows=records_in_space,
        ):
            candidate("record", pk).cosine = cosine
    if include_messages:
        if vector is not None:
            where, params = ["tenant_id = %s", "user_id = %s"], [tenant.pk, user_id]
            if session is not None:
                where.append("session_id = %s")
                params.append(session)
            where.append(
                "session_id NOT IN (SELECT id FROM sessions_app_session WHERE tenant_id = %s AND user_id = %s "
                "AND deleted_at IS NOT NULL)"
            )
            params += [tenant.pk, user_id]
            _window(where, params, "created_at", since, until)
            nearest = _vector_scores(
                MessageEmbedding._meta.db_table,
                " AND ".join(where),
                params,
                vector,
                embedder.dimensions,
                embedder.key,
                at_most=message_rows,
                places=True,
            )
            for pk, cosine, place in nearest:
                candidate("message", pk, place).cosine = cosine
    for pk in _best_keyword_records(keyword, candidates):
        candidate("record", pk)
    return candidates, keyword


def _best_keyword_records(keyword: dict[str, float], candidates: dict[str, _Candidate]) -> list[str]:
    """The ids of the records matched by keyword alone (not among the vector candidates) that can still be
    picked: the best MAX_TOP_K of them. Such a record's score is its keyword score alone (no cosine, no
    neighbours), so the others rank below these whatever the weights; a heavy user's pool of KEYWORD_POOL
    matches is not carried through scoring and sorting."""
    alone = [key for key in keyword if key.startswith("r:") and key not in candidates]
    alone.sort(key=lambda key: (-keyword[key], key[2:]))
    return [key[2:] for key in alone[:MAX_TOP_K]]


@dataclass(frozen=True)
class Weights:
    vector: float
    neighbour_keyword: float
    neighbour_vector: float
    session: float


def weights(query: str, embedder) -> Weights:
    """The weights a recall of this question scores with: the module's, or those chosen with the embedder's own
    model (Embedder.recall_weights), or those set (ACE_RECALL_WEIGHTS, over both); and CJK_VECTOR_WEIGHT for
    the vectors when the question is written mostly in Chinese, Japanese or Korean (at least half of its letters)
    and the embedder's model reads none of them."""
    chosen = (
        {**(getattr(embedder, "recall_weights", None) or {}), **settings.ACE_RECALL_WEIGHTS} if EMBEDDER_WEIGHTS else {}
    )
    vector = CJK_VECTOR_WEIGHT if _unread(query, embedder) else chosen.get("VECTOR_WEIGHT", VECTOR_WEIGHT)
    return Weights(
        vector=vector,
        neighbour_keyword=chosen.get("NEIGHBOUR_KEYWORD", NEIGHBOUR_KEYWORD),
        neighbour_vector=chosen.get("NEIGHBOUR_VECTOR", NEIGHBOUR_VECTOR),
        session=chosen.get("SESSION_WEIGHT", SESSION_WEIGHT),
    )


def _unread(query: str, embedder) -> bool:
    """Whether the question's vector weighs CJK_VECTOR_WEIGHT: it is written mostly in Chinese, Japanese or Korean
    (at least half of its letters) and the embedder's model reads none of them."""
    languages = getattr(embedder, "languages", None)
    if CJK_VECTOR_WEIGHT is None or languages is None or _CJK_LANGUAGES.intersection(languages):
        return False
    letters = sum(character.isalpha() for character in query)
    return bool(letters) and 2 * len(_CJK.findall(query)) >= letters


def vector_text(query: str, embedder) -> str:
    """What the question's vector is computed from: the question, or its first CJK_VECTOR_CHARS characters when
    the embedder's model cannot read it (its vector weighs CJK_VECTOR_WEIGHT)."""
    if CJK_VECTOR_CHARS is not None and len(query) > CJK_VECTOR_CHARS and _unread(query, embedder):
        return query[:CJK_VECTOR_CHARS]
    return query


def _score(
    candidates: dict[str, _Candidate], keyword: dict[str, float], weighed: Weights | None = None
) -> list[_Candidate]:
    """Every candidate's score on the one scale (see the module's docstring), best first, with `weighed`
    (weights(): the module's when not given)."""
    weighed = weighed or weights("", None)
    floor = _floor(candidates)
    for key, c in candidates.items():
        c.keyword = keyword.get(key, 0.0)
        if c.keyword > 0:
            c.matched_by.add("keyword")
        if c.cosine is not None:
            c.matched_by.add("vector")
    by_place = {c.place: c for c in candidates.values() if c.place is not None}

    def own(c: _Candidate, vector_weight: float, keyword_weight: float = 1.0) -> float:
        similarity = max((c.cosine if c.cosine is not None else floor) - floor, 0.0)
        return keyword_weight * c.keyword + vector_weight * similarity

    best_in_session: dict[str, float] = {}
    for c in candidates.values():
        c.score = own(c, weighed.vector)
        if c.place is not None:
            session_id = c.place[0]
            best_in_session[session_id] = max(best_in_session.get(session_id, 0.0), c.score)
    for c in candidates.values():
        if c.place is not None:
            session_id, seq = c.place
            for neighbour in (by_place.get((session_id, seq - 1)), by_place.get((session_id, seq + 1))):
                if neighbour is not None:
                    c.score += own(neighbour, weighed.vector * weighed.neighbour_vector, weighed.neighbour_keyword)
            c.score += weighed.session * best_in_session[session_id]
    return sorted(
        (c for c in candidates.values() if c.score > 0 or c.cosine is not None),
        key=lambda c: (-c.score, -(c.cosine or 0.0), c.pk),
    )


def _floor(candidates: dict[str, _Candidate]) -> float:
    """The cosine that means "not similar" (VECTOR_FLOOR): the weakest of the nearest rows, of the lists that
    came back full when VECTOR_FLOOR is "full" and one did; 0 with no vectors."""
    cosines: dict[str, list[float]] = {}
    for c in candidates.values():
        if c.cosine is not None:
            cosines.setdefault(c.kind, []).append(c.cosine)
    full = [min(found) for found in cosines.values() if len(found) >= CANDIDATES]
    if VECTOR_FLOOR == "full" and full:
        return min(full)
    return min((min(found) for found in cosines.values()), default=0.0)


def _pick(ranked: list[_Candidate], top_k: int) -> list[_Candidate]:
    """The best `top_k`, each message hit with the turns around it (CONTEXT: before, after) that are not
    shown yet: a turn is on screen once, as a hit or as a hit's context. The first n hits show at most
    CONTEXT_PER_HIT × n context turns between them, nearest first, so a wider window goes to the best hits and
    the screen never grows past (1 + CONTEXT_PER_HIT) turns a hit.

    CONTEXT_HITS "promote": the hits are the best `top_k` turns and records, whether or not a better hit's
    context would hold them (a turn that is a hit is not listed again as context). "skip": a turn already
    shown as context is passed over for the next best, so the hits spread over more of the conversation."""
    if CONTEXT_HITS == "promote":
        picked = ranked[:top_k]
        shown = {c.place for c in picked if c.place is not None}
        context = 0
        for n, c in enumerate(picked, start=1):
            c.around = _around(c, shown, CONTEXT_PER_HIT * n - context)
            context += len(c.around)
        return picked
    picked, shown, context = [], set(), 0
    for c in ranked:
        if c.place is not None:
            if c.place in shown:
                continue
            shown.add(c.place)
            c.around = _around(c, shown, CONTEXT_PER_HIT * (len(picked) + 1) - context)
            context += len(c.around)
        picked.append(c)
        if len(picked) == top_k:
            break
    return picked


def _around(c: _Candidate, shown: set, at_most: int) -> list[tuple[str, int]]:
    """At most `at_most` places around a message hit that are not shown yet, nearest first (the one before
    ahead of the one after), in order, marked shown."""
    if c.place is None or at_most <= 0:
        return []
    session_id, seq = c.place
    before, after = CONTEXT
    offsets = sorted(
        (offset for offset in range(-before, after + 1) if offset),
        key=lambda offset: (abs(offset), offset),
    )
    around = [(session_id, seq + offset) for offset in offsets if (session_id, seq + offset) not in shown]
    around = sorted(around[:at_most], key=lambda place: place[1])
    shown.update(around)
    return around


def _load_hits(best: list[_Candidate], *, tenant: Tenant) -> dict[str, Hit]:
    record_ids = [c.pk for c in best if c.kind == "record"]
    messages = [c for c in best if c.kind == "message"]
    hits: dict[str, Hit] = {}
    if record_ids:
        for record_id, content, created_at, sessions, sources in _records_with_sources(record_ids, tenant=tenant):
            sessions = sorted(str(session_id) for session_id in sessions)
            sources = sorted(sources, key=lambda m: (str(m[1]), m[2]))  # (id, session, seq, external id)
            hits["r:" + str(record_id)] = Hit(
                kind="record",
                id=str(record_id),
                text=content,
                session=sessions[0] if len(sessions) == 1 else None,
                source_message_ids=[str(m[0]) for m in sources],
                source_external_ids=[m[3] for m in sources if m[3]],
                created_at=created_at,
            )
    if messages:
        wanted = {place for c in messages for place in (c.place, *c.around)}
        # The wanted places exactly, as two arrays joined on the (session, seq) key: no superset of rows to read
        # and drop, no OR per place.
        sessions, seqs = zip(*sorted(wanted), strict=True)
        rows = Message.objects.raw(
            f"SELECT m.id, m.session_id, m.seq, m.role, m.content, m.external_id, m.created_at "
            f"FROM {Message._meta.db_table} m JOIN unnest(%s::uuid[], %s::int[]) AS w(session_id, seq) "
            "ON m.session_id = w.session_id AND m.seq = w.seq WHERE m.tenant_id = %s",
            [list(sessions), list(seqs), tenant.pk],
        )
        by_place = {(str(m.session_id), m.seq): m for m in rows}
        for c in messages:
            message = by_place.get(c.place)
            if message is None:
                continue
            context = [
                _context_entry(by_place[place], "before" if place[1] < c.place[1] else "after")
                for place in c.around
                if place in by_place
            ]
            hits["m:" + c.pk] = Hit(
                kind="message",
                id=str(message.pk),
                text=message.content,
                session=str(message.session_id),
                source_message_ids=[str(message.pk)],
                source_external_ids=[message.external_id] if message.external_id else [],
                created_at=message.created_at,
                context=context,
            )
    return hits


def _records_with_sources(record_ids: list[str], *, tenant: Tenant) -> list[tuple]:
    """(id, content, created_at, [source session ids], [(message id, session id, seq, external id)]) of each
    record, in one statement (the ORM's prefetches take three)."""
    sessions = Record.source_sessions.through._meta.db_table
    messages = Record.source_messages.through._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.id, r.content, r.created_at, "
            f"ARRAY(SELECT s.session_id FROM {sessions} s WHERE s.record_id = r.id AND s.tenant_id = r.tenant_id), "
            f"(SELECT coalesce(json_agg(json_build_array(m.id, m.session_id, m.seq, m.external_id)), '[]') "
            f"FROM {messages} rm JOIN {Message._meta.db_table} m ON m.id = rm.message_id AND m.tenant_id = rm.tenant_id"
            f" WHERE rm.record_id = r.id AND rm.tenant_id = r.tenant_id) "
            f"FROM {Record._meta.db_table} r WHERE r.tenant_id = %s AND r.id = ANY(%s::uuid[])",
            [tenant.pk, record_ids],
        )
        return cursor.fetchall()


def _context_entry(message: Message, position: str) -> dict:
    return {
        "position": position,
        "id": str(message.pk),
        "role": message.role,
        "text": message.content,
        "external_id": message.external_id or "",
        "created_at": message.created_at,
    }
