"""The LoCoMo-layout evaluation harness (bench/locomo.py) end to end on the synthetic dataset, with the hash
embedder, in-process: loading through the API, inline embedding, and recall in the three modes."""

import json

import pytest
from django.test import Client

from sessions_app.models import Message, Session
from sessions_app.services.apikeys import apikey_create
from tests.support.bench import bench_module


@pytest.fixture(scope="module")
def locomo():
    with bench_module("locomo") as module:
        yield module


def test_harness_on_synthetic_data(db, locomo):
    dataset = json.loads(locomo.DEFAULT_DATASET.read_text())
    questions = sum(len(sample["qa"]) for sample in dataset)
    turns = sum(len(turns) for sample in dataset for _, turns, _ in locomo.sessions_of(sample["conversation"]))
    key = apikey_create(tenant_name="locomo-ci").plain_key

    report = locomo.run(locomo.DjangoApi(key, Client()), progress=lambda *args: None)

    assert report["embedder"].startswith("hash")
    assert report["qa_total"] == report["qa_evaluated"] == questions >= 40
    assert report["messages"] == turns
    assert report["evidence_ids_not_in_conversation"] == 0
    # Loaded through the API: one session per session_N, user_id = sample id, dia_id as external_id.
    assert Session.objects.filter(tenant__name="locomo-ci", user_id="maya-tom").count() == 5
    first = Message.objects.get(tenant__name="locomo-ci", session__user_id="maya-tom", external_id="D1:1")
    assert first.role == "user" and first.content.startswith("Maya: ") and first.metadata["speaker"] == "Maya"
    assert first.created_at.year == 2023 and first.created_at.month == 5

    assert set(report["modes"]) == {"hybrid", "vector", "keyword"}
    for mode in report["modes"].values():
        assert mode["overall"]["questions"] == questions
        assert mode["degraded_answers"] == 0
        for summary in [mode["overall"], *mode["by_category"].values()]:
            values = [summary[f"recall@{k}"] for k in (5, 10, 20)]
            assert all(0.0 <= v <= 1.0 for v in values)
            assert values == sorted(values)  # more hits never find less
    # A working pipeline finds most evidence among 20 hits of ~60 turns per user, even with lexical vectors;
    # a broken one (nothing embedded, wrong user, no keyword side) falls far below.
    assert report["modes"]["hybrid"]["overall"]["recall@20"] >= 0.7
    assert report["modes"]["vector"]["overall"]["recall@20"] > 0.3
    assert report["modes"]["keyword"]["overall"]["recall@20"] > 0.3


def test_a_long_turn_is_searchable_by_keyword_once_loaded(db, locomo):
    """A turn longer than the database indexes as it is written gets its keyword vector from the indexing
    queue; the harness has no worker, so it does that work itself. Without it, a data set's longest turns
    (RealMemBench: one in nine) were invisible to keyword search, and every answer said it was incomplete."""
    long_text = "We talked for hours about the harbour and the old ferries. " * 40 + "The island was Zanzibar."
    sample = {
        "sample_id": "long-turns",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": long_text},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Sounds like a lovely trip."},
            ],
        },
        "qa": [],
    }
    api = locomo.DjangoApi(apikey_create(tenant_name="locomo-long").plain_key, Client())
    locomo.load_samples(api, [sample], dataset_name="long.json", progress=lambda *args: None)

    asker = locomo.Asker(api)
    hits, degraded, _ = asker.ask("keyword", "Zanzibar", "long-turns", top_k=5)
    assert hits[0] == (["D1:1"], ["D1:2"]) and not degraded
    asker.ask("hybrid", "Which island?", "long-turns", top_k=5)
    assert asker.incomplete == 0
