"""A repeated recall query is not embedded again: its vector comes from the per-process cache."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_app.embedders import get_embedder
from memory_app.embeddings import records_embed
from memory_app.query_vectors import query_vectors
from memory_app.services import record_create


@pytest.fixture
def embed_calls(monkeypatch):
    """The texts the configured (real) embedder is asked to embed, in order; it still embeds them."""
    query_vectors.clear()
    embedder = get_embedder()
    calls = []
    real_embed = embedder.embed

    def counted(texts):
        calls.append(list(texts))
        return real_embed(texts)

    monkeypatch.setattr(embedder, "embed", counted)
    yield calls
    query_vectors.clear()


def recall(api, query, **body):
    response = api.post(
        "/api/v1/recall/", {"query": query, "user_id": "xiaoming", "include_messages": False, **body}, format="json"
    )
    assert response.status_code == 200, response.content
    return [(hit["text"], hit["score"]) for hit in response.json()["results"]]


def test_a_repeated_query_is_embedded_once(api, embed_calls):
    for content in ("Allergic to peanuts", "Prefers window seats on long flights", "Lives in Lisbon"):
        record = record_create(tenant=api.tenant, user_id="xiaoming", type="fact", content=content).record
        records_embed(record_ids=[record.pk])
    embed_calls.clear()  # the records' own embeddings

    first = recall(api, "which seat does she like on a plane")
    assert embed_calls == [["which seat does she like on a plane"]]
    assert first[0][0] == "Prefers window seats on long flights"

    again = recall(api, "  which seat does she like\ton a plane ")  # only whitespace differs: the same question
    assert embed_calls == [["which seat does she like on a plane"]]
    assert again == first  # the cached vector ranks exactly as the fresh one did

    recall(api, "is she allergic to anything")
    assert len(embed_calls) == 2  # a new question is embedded
    with CaptureQueriesContext(connection) as repeated:
        assert recall(api, "is she allergic to anything")[0][0] == "Allergic to peanuts"
    assert len(embed_calls) == 2
    assert not [q for q in repeated.captured_queries if "ace_tsvector" in q["sql"]]  # nor its words looked up again


def test_the_cache_is_per_vector_space_and_bounded(api, embed_calls, settings, monkeypatch):
    recall(api, "museum tickets")
    first_key = get_embedder().key
    settings.ACE_EMBEDDER_DIMENSIONS = 64  # another space, with a key of its own: not the first space's vector
    other = get_embedder()
    assert other.key != first_key
    other_calls = []
    real_embed = other.embed
    monkeypatch.setattr(other, "embed", lambda texts: other_calls.append(list(texts)) or real_embed(texts))
    recall(api, "museum tickets")
    recall(api, "museum tickets")
    assert (len(embed_calls), other_calls) == (1, [["museum tickets"]])

    monkeypatch.setattr(query_vectors, "size", 2)
    for query in ("first", "second", "third"):  # the oldest goes
        recall(api, query)
    assert len(query_vectors) == 2
    recall(api, "third")
    recall(api, "museum tickets")
    assert other_calls == [["museum tickets"], ["first"], ["second"], ["third"], ["museum tickets"]]
