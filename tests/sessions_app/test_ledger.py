"""The ledger write, one unit of work for every way in (sessions_app.services.ledger): where each way meets the
hard limit, and what it costs in statements."""

import shutil
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Budget, Message, Session
from sessions_app.services.budgets import BudgetUsedUp
from sessions_app.services.ledger import REFUSED_WHEN_USED_UP, Way
from sessions_app.services.messages import messages_append

pytestmark = pytest.mark.django_db

BUDGETS = "/api/v1/budgets/"
SEED = Path(__file__).resolve().parent.parent / "data" / "agent_logs" / "seed" / "weather-openclaw.jsonl"
COMPLETION = {
    "content": "晴",
    "finish_reason": "stop",
    "model": "qwen-max",
    "input_tokens": 5,
    "output_tokens": 5,
    "elapsed_ms": 900,
}


def used_up(api, session) -> dict:
    """A hard-limit budget of the tenant, used up by one message."""
    budget = api.post(BUDGETS, {"name": "capped", "limit": 100, "hard_limit": True}, format="json").json()
    message = {"role": "assistant", "content": "ok", "model": "qwen-max", "total_tokens": 100}
    assert api.post(f"/api/v1/sessions/{session.pk}/messages/", message, format="json").status_code == 201
    assert Budget.objects.get(pk=budget["id"]).blocked_until is not None
    return budget


def test_the_ways_a_used_up_hard_limit_refuses_are_the_messages_and_a_turns_start():
    assert REFUSED_WHEN_USED_UP == {Way.MESSAGES, Way.TURN_START}
    # A gateway call's hard budgets are checked before it is forwarded (tests/gateway_app): once forwarded, its turn
    # is recorded, the money being spent.
    assert set(Way) - REFUSED_WHEN_USED_UP == {Way.TURN_COMPLETE, Way.IMPORT, Way.OTLP, Way.GATEWAY}


def test_every_way_in_meets_the_hard_limit_in_the_ledger_write(api, session, tmp_path):
    """Refused: the messages (through the API or the service itself) and a turn's start. Counted, never refused
    (records of work already done, docs/budgets.md): a turn's completion, an import, OTLP events."""
    from ingest_app.pipeline import import_path
    from tests.ingest_app.otlp_payloads import logs_payload, post

    started = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "明天呢？"}, format="json").json()
    used_up(api, session)
    stored = Message.objects.count()

    refused = api.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "x"}, format="json")
    assert refused.status_code == 429 and refused.json()["budget"]["name"] == "capped"
    with pytest.raises(BudgetUsedUp), transaction.atomic():  # no savepoint of its own: the caller's fails too
        messages_append(tenant=api.tenant, session_id=session.pk, items=[{"role": "user", "content": "x"}])
    assert api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "hi"}, format="json").status_code == 429
    assert Message.objects.count() == stored

    completed = api.post(f"/api/v1/turns/{started['turn']}/complete/", COMPLETION, format="json")
    assert completed.status_code == 200 and completed.json()["status"] == "completed"
    shutil.copy(SEED, tmp_path / SEED.name)
    assert import_path(tenant=api.tenant, path=tmp_path / SEED.name).messages == 6
    assert post(Client(), "/v1/logs", logs_payload(), key=api.key).status_code == 200
    assert Message.objects.filter(session__tool="claude-code", tenant=api.tenant).count() == 6  # a failed call too
    assert Session.objects.filter(tenant=api.tenant).count() == 3


def test_an_api_append_is_the_lock_and_one_write_the_hard_limit_read_with_the_lock(api, session):
    """BEGIN, the session's lock (with whether a hard-limit budget of the tenant is used up), one statement,
    COMMIT: no statement of its own for the hard limit."""
    api.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "先来一条"}, format="json")
    with CaptureQueriesContext(connection) as captured:
        response = api.post(
            f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "去西湖"}, format="json"
        )
    assert response.status_code == 201
    sql = [query["sql"] for query in captured.captured_queries if "sessions_app_apikey" not in query["sql"]]
    assert len(sql) == 4, sql
    assert "sessions_app_budget" in sql[1] and sql[1].endswith("FOR UPDATE") and sql[2].startswith("WITH"), sql
