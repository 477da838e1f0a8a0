"""The backlog a recall answer carries (and GET /api/v1/memory/status/) stays quick right after a bulk import,
before autovacuum has analysed the tables: PostgreSQL's statistics then describe the tables as they were. Here
they were emptied and analysed (a purge, an erased tenant; in the suite: earlier tests' rolled-back rows) and
hold pages but no rows, so the planner sees no rows whatever their size: without fresh statistics the count of a
user's 10,000 messages was planned as nested loops reading a whole index per message (over 60 s)."""

from __future__ import annotations

import pytest
from django.db import connection

from memory_app.models import MessageEmbedding
from memory_app.selectors.status import _COUNTED_TABLES
from platform_kit.db import planner_settings, statistics_refreshed
from sessions_app.models import Session
from tests.memory_app import bulk_rows

pytestmark = pytest.mark.django_db

# The failure this guards against takes minutes; a good plan takes tens of milliseconds on this machine, under
# the load of several test suites well under a second.
BOUND = {"statement_timeout": "5s"}


def emptied_and_analysed(tenant) -> None:
    """The tables' statistics as an emptied table leaves them: pages, and no rows on them."""
    bulk_rows.chat_messages(tenant, "someone", [bulk_rows.sentence(n) for n in range(3_000)], fresh_statistics=False)
    with connection.cursor() as cursor:
        for table in ("memory_app_messageembedding", "sessions_app_message"):
            cursor.execute(f"DELETE FROM {table} WHERE tenant_id = %s", [tenant.pk])
    Session.objects.filter(tenant=tenant).delete()
    bulk_rows.analyze(*_COUNTED_TABLES)


def test_recall_right_after_a_bulk_import_on_statistics_of_empty_tables_answers_at_once(api):
    bulk_rows.vector_index_skipped()
    emptied_and_analysed(api.tenant)
    texts = [bulk_rows.sentence(n) for n in range(10_000)]
    stored = bulk_rows.chat_messages(api.tenant, "xiaoming", texts, fresh_statistics=False)
    waiting = [row[0] for row in stored[-100:]]  # the import's last messages still wait for their vector
    MessageEmbedding.objects.filter(message_id__in=waiting).delete()

    api.raise_request_exception = False  # a cancelled statement shows as the 500 a client would get
    with planner_settings(BOUND):  # asserted inside: a cancelled statement leaves the transaction unusable
        recall = api.post("/api/v1/recall/", {"query": "tea house in Kyoto", "user_id": "xiaoming"}, format="json")
        assert recall.status_code == 200, recall.content[:300]
    assert recall.json()["pending"] == {"message_vectors": 100, "record_vectors": 0, "search_index": 0}
    assert recall.json()["complete"] is False and "tea house in Kyoto" in recall.json()["results"][0]["text"]
    with planner_settings(BOUND):
        status = api.get("/api/v1/memory/status/", {"user_id": "xiaoming"})
        assert status.status_code == 200, status.content[:300]
    assert status.json()["pending_message_vectors"] == 100

    # Analysed once for that growth: the next counts only look at the tables' sizes.
    assert statistics_refreshed(*_COUNTED_TABLES) == []


def test_tables_are_analysed_only_when_they_outgrew_their_statistics(api):
    bulk_rows.analyze(*_COUNTED_TABLES)
    assert statistics_refreshed(*_COUNTED_TABLES) == []
    bulk_rows.chat_messages(
        api.tenant, "xiaoming", [bulk_rows.sentence(n) for n in range(3_000)], fresh_statistics=False
    )
    assert statistics_refreshed(*_COUNTED_TABLES) == ["memory_app_messageembedding", "sessions_app_message"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'sessions_app_message'")
        assert cursor.fetchone()[0] >= 3_000
    assert statistics_refreshed(*_COUNTED_TABLES) == []
