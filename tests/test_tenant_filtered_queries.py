"""Every statement the hot paths send about a distributed table names the tenant (docs/scaling.md): a chat turn
(start, checkpoint, completion), a batch of messages appended, the message list, the session's and the tenant's
statistics, and recall. On Citus, a statement with `tenant_id = …` goes to the one node that holds the tenant;
one without it would go to every node. Captured from the API's real statements, so a new query without the tenant
fails here."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from platform_kit.distribution import COORDINATOR_TABLES, REFERENCE_TABLES
from tests.support.api import post_messages

pytestmark = pytest.mark.django_db

_TABLE = re.compile(r'\b(?:FROM|JOIN|UPDATE|INTO)\s+"?([a-z_][a-z0-9_]*)"?', re.IGNORECASE)
# A tenant predicate (tenant_id = …, IN …, ANY …) or, in an INSERT, the tenant_id column given.
_TENANT = re.compile(r'tenant_id"?\s*(?:=|IN\b|= ANY\b)|INSERT INTO\s+"?\w+"?\s*\([^)]*tenant_id', re.IGNORECASE)


def _distributed_tables() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
        )
        return {row[0] for row in cursor.fetchall()} - REFERENCE_TABLES - COORDINATOR_TABLES


def _without_tenant(queries: list[dict], distributed: set[str]) -> list[str]:
    return [
        query["sql"]
        for query in queries
        if distributed & {name.lower() for name in _TABLE.findall(query["sql"])} and not _TENANT.search(query["sql"])
    ]


@pytest.fixture
def distributed():
    return _distributed_tables()


def _captured(call) -> list[dict]:
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code < 300, response.content
    return captured.captured_queries


def test_a_chat_turn_and_a_batch_of_messages_name_the_tenant_in_every_statement(api, session, distributed):
    base = f"/api/v1/sessions/{session.pk}"
    with CaptureQueriesContext(connection) as captured:
        started = api.post(f"{base}/turns/", {"content": "明天呢？"}, format="json")
        assert started.status_code in (200, 201), started.content
        turn = started.json()["turn"]
    queries = captured.captured_queries
    queries += _captured(lambda: api.patch(f"/api/v1/turns/{turn}/", {"content": "明天多云"}, format="json"))
    queries += _captured(
        lambda: api.post(
            f"/api/v1/turns/{turn}/complete/",
            {
                "content": "明天多云转小雨。",
                "model": "qwen-max",
                "input_tokens": 1200,
                "output_tokens": 80,
                "finish_reason": "stop",
                "elapsed_ms": 3400,
            },
            format="json",
        )
    )
    queries += _captured(
        lambda: api.post(
            f"{base}/messages/",
            [{"role": "user", "content": "I prefer window seats."}, {"role": "assistant", "content": "Noted."}],
            format="json",
        )
    )
    assert not _without_tenant(queries, distributed), "\n\n".join(_without_tenant(queries, distributed))


def test_reading_messages_statistics_and_recall_name_the_tenant_in_every_statement(api, session, distributed):
    base = f"/api/v1/sessions/{session.pk}"
    post_messages(api, session, [{"role": "user", "content": "I prefer window seats."}])
    queries = _captured(lambda: api.get(f"{base}/messages/"))
    queries += _captured(lambda: api.get("/api/v1/messages/", {"q": "window"}))
    queries += _captured(lambda: api.get(f"{base}/stats/"))
    queries += _captured(lambda: api.get("/api/v1/stats/", {"group_by": "day"}))
    queries += _captured(
        lambda: api.post("/api/v1/recall/", {"query": "window seats", "user_id": session.user_id}, format="json")
    )
    assert not _without_tenant(queries, distributed), "\n\n".join(_without_tenant(queries, distributed))
