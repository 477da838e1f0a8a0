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
