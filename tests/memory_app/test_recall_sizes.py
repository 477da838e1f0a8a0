"""Recall on both sides of every size boundary, with real rows through POST /api/v1/recall/.

A user's vectors are ranked exactly (every distance computed) while the filter keeps at most
ACE_RECALL_EXACT_UP_TO of them, and through the sign-bit shortlist above that; on the exact side PostgreSQL may
read the user's rows through their btree index or walk the HNSW index. Whichever the path, a recall answers,
finds the same best hits as the exact scan (the shortlist re-ranks exactly what it keeps, so its top hits are
the exact ones; bench/README.md measures its recall@10 at 0.997–1.0), and never shows another user's or
another tenant's rows. Most tests move the boundary low to stay fast; one runs at real size (10,000 messages
and 10,000 records of one user beside light users and other tenants).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.services.messages import messages_append
from tests.memory_app import bulk_rows
from tests.support.api import make_client

QUERY = "Which tea house in Kyoto did I visit with my sister?"
QUERIES = [
    QUERY,
    "the bakery in Lisbon with old friends",
    "Max the dog at the harbour in Oslo",
    "a jazz bar in Berlin with a colleague",
]


@pytest.fixture(autouse=True)
def _no_vector_index_unless_asked():
    """No HNSW index is built by a record written through the API (seconds over thousands of rows); the tests about
    HNSW build it (bulk_rows.vector_index)."""
    bulk_rows.vector_index_skipped()


def recalled(client, query: str, *, user_id: str = "xiaoming", **body) -> tuple[list[dict], dict[str, str]]:
    """The results of POST /api/v1/recall/ (asserting a 200, as a user would see it) and how each kind's
    vectors were ranked: {"message"|"record": "exact"|"shortlist"}."""
    client.raise_request_exception = False  # a server error shows as the 500 a client gets
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/v1/recall/", {"query": query, "user_id": user_id, **body}, format="json")
    assert response.status_code == 200, response.content[:500]
    paths = {}
    for statement in (q["sql"] for q in captured.captured_queries):
        if "<=>" not in statement:
            continue
        kind = "message" if "memory_app_messageembedding" in statement else "record"
        paths[kind] = "shortlist" if "WITH shortlist" in statement else "exact"
    return response.json()["results"], paths


def shown_ids(results: list[dict]) -> set[str]:
    """Every row a recall shows: its hits and the turns around message hits."""
    return {hit["id"] for hit in results} | {turn["id"] for hit in results for turn in hit["context"]}


def shown_texts(results: list[dict]) -> list[str]:
    return [text for hit in results for text in [hit["text"], *(turn["text"] for turn in hit["context"])]]


def ranking(results: list[dict]) -> list[tuple[str, float]]:
    return [(hit["text"], hit["score"]) for hit in results]


def assert_agree(shortlisted: list[dict], exact: list[dict]) -> None:
    """What the shortlist promises against the exact scan, seen through the API: its best hit is shown by the
    exact scan's first three (as a hit or as a turn around one). The shortlist keeps the nearest rows by Hamming
    distance of their sign bits and ranks those exactly, so its vector list holds nearly all of the exact top 10
    (`assert_vector_lists_agree`). Lower places may differ more: a score also counts a message's neighbours and
    the weakest candidate's cosine, which move when some of the 100 candidates differ, and these sentences
    tie by the dozen."""
    assert shortlisted[0]["text"] in shown_texts(exact[:3]), (ranking(shortlisted), ranking(exact))


def assert_vector_lists_agree(tenant, user_id: str, settings, queries: list[str]) -> None:
    """recall@10 of the shortlisted vector lists (messages and records) against exact scans, as bench/recall.py
    measures it (a row as near as the exact 10th counts): at least 0.95 over the queries, 0.9 for each."""
    from memory_app.embedders import get_embedder
    from memory_app.selectors.recall import _vector_ids

    embedder, default = get_embedder(), settings.ACE_RECALL_EXACT_UP_TO
    found = []
    for table, id_column, where in (
        ("memory_app_messageembedding", "message_id", "tenant_id = %s AND user_id = %s"),
        ("memory_app_record", "id", "tenant_id = %s AND user_id = %s AND valid"),
    ):
        for query in queries:
            vector = embedder.embed([query])[0]
            nearest = {}
            for limit in (10**6, 1):  # exact, then shortlisted
                settings.ACE_RECALL_EXACT_UP_TO = limit
                ids = _vector_ids(table, where, [tenant.pk, user_id], vector, embedder.dimensions, embedder.key)[:10]
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"SELECT round(((embedding::vector({embedder.dimensions})) <=> %s::vector)::numeric, 6) "
                        f"FROM {table} WHERE {id_column}::text = ANY(%s)",
                        [bulk_rows.literal(vector), ids],
                    )
                    nearest[limit] = sorted(row[0] for row in cursor.fetchall())
            exact, shortlisted = nearest[10**6], nearest[1]
            share = sum(1 for distance in shortlisted if distance <= exact[-1]) / len(exact)
            assert share >= 0.9, (table, query, share)
            found.append(share)
    settings.ACE_RECALL_EXACT_UP_TO = default
    assert sum(found) / len(found) >= 0.95


def test_a_user_with_3000_messages_is_recalled(api):
    """Past ACE_RECALL_EXACT_UP_TO (2,000) message vectors, at its default: the shortlist answers, with the
    right turn first (it answered 500 before: its query had no `id` column for the session join)."""
    texts = [bulk_rows.sentence(n) for n in range(3000)]
    stored = bulk_rows.chat_messages(api.tenant, "xiaoming", texts)
    results, paths = recalled(api, QUERY)
    assert paths == {"message": "shortlist"}  # the user has no records: none is searched
    assert "tea house in Kyoto with my sister" in results[0]["text"]
    assert results[0]["kind"] == "message" and results[0]["context"]
    assert shown_ids(results) <= {str(pk) for pk, *_ in stored}


@pytest.mark.parametrize("kind", ["message", "record"])
def test_both_sides_of_the_exact_limit_find_the_same_hits(api, settings, kind):
    """One user's 1,001 vectors: exact with the limit at 1,001, shortlisted with it at 1,000 (the shortlist
    keeps its default 400). Same best hits either way; only the user's rows."""
    texts = [bulk_rows.sentence(n * 7) for n in range(1001)]
    if kind == "message":
        own = {str(row[0]) for row in bulk_rows.chat_messages(api.tenant, "xiaoming", texts)}
    else:
        own = set(bulk_rows.records(api.tenant, "xiaoming", texts))
    bulk_rows.records(api.tenant, "xiaohong", texts)  # the same words, another user
    bulk_rows.chat_messages(make_client("globex").tenant, "xiaoming", texts)  # and another tenant

    for query in QUERIES:
        settings.ACE_RECALL_EXACT_UP_TO = 1001
        exact, paths = recalled(api, query, top_k=10)
        assert paths[kind] == "exact"
        settings.ACE_RECALL_EXACT_UP_TO = 1000
        shortlisted, paths = recalled(api, query, top_k=10)
        assert paths[kind] == "shortlist"
        assert len(shortlisted) == len(exact) == 10
        assert_agree(shortlisted, exact)
        common = set(shown_texts(shortlisted)) & set(shown_texts(exact))
        assert len(common) >= 0.8 * len(set(shown_texts(exact)))  # 1,001 rows, 400 kept: nearly the same
        assert shown_ids(exact) <= own and shown_ids(shortlisted) <= own


def test_messages_are_counted_when_the_sessions_counters_pass_the_limit(api, settings):
    """The sessions' message counters bound a user's message vectors and save counting them while within the
    limit; past it (tool results have no vectors) the vectors themselves are counted and decide."""
    texts = [bulk_rows.sentence(n) for n in range(150)]
    stored = bulk_rows.chat_messages(api.tenant, "xiaoming", texts)
    session_id = stored[0][1]
    tool_results = [{"role": "toolResult", "content": f"tool output {n}", "tool_name": "search"} for n in range(100)]
    messages_append(tenant=api.tenant, session_id=session_id, items=tool_results)

    def counted_and_path(limit: int) -> tuple[bool, str, list]:
        settings.ACE_RECALL_EXACT_UP_TO = limit
        with CaptureQueriesContext(connection) as captured:
            results, paths = recalled(api, QUERY)
        counted = any("SELECT count(*) FROM (SELECT 1 FROM memory_app_messageembedding" in q["sql"] for q in captured)
        return counted, paths["message"], ranking(results)

    within_counters = counted_and_path(250)  # 250 messages counted by the sessions: no count needed
    within_vectors = counted_and_path(150)  # 250 > 150, but 150 vectors: counted, exact
    over = counted_and_path(149)  # counted, shortlisted
    assert within_counters[:2] == (False, "exact")
    assert within_vectors[:2] == (True, "exact")
    assert over[:2] == (True, "shortlist")
    assert within_counters[2] == within_vectors[2]
    assert [text for text, _ in over[2][:3]] == [text for text, _ in within_vectors[2][:3]]


@pytest.mark.parametrize("kind", ["message", "record"])
def test_the_hnsw_walk_and_the_users_own_rows_give_the_same_hits(api, other_api, settings, kind):
    """A light user among many others' vectors: PostgreSQL may read the user's rows through the btree index or
    walk HNSW (its iterative scan keeps going until the filter is satisfied). Both sides, forced: the same hits,
    all the user's own."""
    texts = [bulk_rows.sentence(n) for n in range(1500)]
    for user in ("other-1", "other-2"):
        (bulk_rows.chat_messages if kind == "message" else bulk_rows.records)(api.tenant, user, texts)
    (bulk_rows.chat_messages if kind == "message" else bulk_rows.records)(other_api.tenant, "xiaoming", texts[:300])
    mine = texts[::50]  # 30 rows
    if kind == "message":
        own = {str(row[0]) for row in bulk_rows.chat_messages(api.tenant, "xiaoming", mine)}
    else:
        own = set(bulk_rows.records(api.tenant, "xiaoming", mine))

    table = "memory_app_messageembedding" if kind == "message" else "memory_app_record"
    by_btree = {query: recalled(api, query, top_k=10)[0] for query in QUERIES}

    bulk_rows.vector_index()
    with connection.cursor() as cursor:  # only HNSW can serve the user's nearest rows now (rolled back after)
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass "
            "AND NOT i.indisprimary AND c.relname NOT LIKE '%%hnsw%%' AND c.relname <> 'record_user_search'",
            [table],
        )
        for (index,) in cursor.fetchall():
            cursor.execute(f"DROP INDEX {index}")
    for query in QUERIES:
        walked = _hnsw_scans(table)
        by_hnsw = recalled(api, query, top_k=10)[0]
        assert _hnsw_scans(table) > walked  # the recall did walk the graph
        assert ranking(by_hnsw) == ranking(by_btree[query]), query
        assert shown_ids(by_hnsw) <= own
        assert len(by_hnsw) == 10


def _hnsw_scans(table: str) -> int:
    """Scans of the table's HNSW indexes in this transaction (the test's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_stat_get_xact_numscans(indexrelid)), 0) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass AND c.relname LIKE '%%hnsw%%'",
            [table],
        )
        return cursor.fetchone()[0]


def test_at_real_size_each_user_sees_only_their_own_rows_in_several_tenants(api, other_api, settings):
    """10,000 messages and 10,000 records of one user, beside light users (10 of each) in the same tenant and in
    two others, holding the very sentences the heavy user's best hits hold. Each recall shows its user's rows
    only; the heavy user's go through the shortlist for both kinds (the light users' exactly), and agree with
    an exact scan of all 10,000."""
    texts = [bulk_rows.sentence(n) for n in range(10_000)]
    heavy = {str(row[0]) for row in bulk_rows.chat_messages(api.tenant, "xiaoming", texts)}
    heavy |= set(bulk_rows.records(api.tenant, "xiaoming", texts))
    phrases = ["tea house in Kyoto", "bakery in Lisbon", "harbour in Oslo", "jazz bar in Berlin"]
    shared = [text for phrase in phrases for text in [t for t in texts if phrase in t][:3]][:10]
    light = {}
    for client, user in ((api, "xiaohong"), (other_api, "xiaoming"), (make_client("initech"), "xiaoming")):
        own = {str(row[0]) for row in bulk_rows.chat_messages(client.tenant, user, shared)}
        light[(client.tenant.name, user)] = (client, own | set(bulk_rows.records(client.tenant, user, shared)))

    default = settings.ACE_RECALL_EXACT_UP_TO
    for query in QUERIES:
        shortlisted, paths = recalled(api, query)
        assert paths == {"message": "shortlist", "record": "shortlist"}
        assert shown_ids(shortlisted) <= heavy
        for (tenant, user), (client, own) in light.items():
            results, paths = recalled(client, query, user_id=user)
            assert paths == {"message": "exact", "record": "exact"}, (tenant, user)
            assert results and shown_ids(results) <= own, (tenant, user)

        settings.ACE_RECALL_EXACT_UP_TO = 20_000
        exact, paths = recalled(api, query)
        assert paths == {"message": "exact", "record": "exact"}
        assert_agree(shortlisted, exact)
        settings.ACE_RECALL_EXACT_UP_TO = default

    assert_vector_lists_agree(api.tenant, "xiaoming", settings, QUERIES)

    records, paths = recalled(api, QUERY, include_messages=False)  # messages outrank their twin records above
    assert paths == {"record": "shortlist"} and len(records) == 10
    assert shown_ids(records) <= heavy and "tea house in Kyoto" in records[0]["text"]
