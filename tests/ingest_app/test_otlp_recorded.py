"""What Claude Code 2.1.197 really sent and wrote (tests/data/otlp/claude_code_2.1.197: its OTLP bodies in both
encodings and its own logs of the same two runs): the events alone give the sessions, requests and tokens the
log gives, and the events with the log, in either order, count each prompt and call once."""

from pathlib import Path

import pytest
from django.test import Client
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

from ingest_app.models import TelemetryRecord
from ingest_app.pipeline import import_path
from ingest_app.selectors.telemetry import session_metered
from sessions_app.models import Message, Session
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from tests.support.api import make_client

pytestmark = pytest.mark.django_db

RECORDED = Path(__file__).resolve().parent.parent / "data" / "otlp" / "claude_code_2.1.197"
PROJECTS = RECORDED / "projects"
BODIES = [  # in the order Claude Code sent them
    ("logs.pb", "/v1/logs", "application/x-protobuf"),
    ("metrics.pb", "/v1/metrics", "application/x-protobuf"),
    ("logs.json", "/v1/logs", "application/json"),
    ("metrics.json", "/v1/metrics", "application/json"),
]
SESSIONS = {
    "e7937e75-cda1-4c1b-8b9f-fed9ceae685d": ("Rename the parser module to reader", "claude-sonnet-4-5"),
    "09bd4139-722d-4c50-af56-251f7d4b07b2": ("Which fruits are yellow?", "claude-haiku-4-5"),
}
NO_DRIFT = {"hourly": [], "daily": [], "session_model": []}


def send_recorded(key: str) -> None:
    exporter = Client()
    for name, path, media in BODIES:
        response = exporter.post(
            path, data=(RECORDED / name).read_bytes(), content_type=media, HTTP_AUTHORIZATION=f"Bearer {key}"
        )
        assert response.status_code == 200, (name, response.content)
        if name == "logs.pb":
            answer = logs_service_pb2.ExportLogsServiceResponse.FromString(response.content)
            assert not answer.HasField("partial_success")
        elif media == "application/json":
            assert response.json() == {}


RECONCILED = (
    "reported_cost_usd",
    "reported_cost_requests",
    "cost_difference_usd",
    "cost_difference_percent",
    "cost_flagged",
)


def figures(api) -> dict:
    """Per Claude Code session: its stats as the API shows them; and the tenant's totals."""
    sessions = Session.objects.filter(tenant=api.tenant, tool="claude-code")
    shown = {s.agent_session_id: api.get(f"/api/v1/sessions/{s.pk}/stats/").json() for s in sessions}
    shown["totals"] = api.get("/api/v1/stats/", {"group_by": "model"}).json()["totals"]
    # The tools' own cost is left out: the events bring Claude Code's cost_usd, the log none (counting is compared).
    return {key: {k: v for k, v in figures.items() if k not in RECONCILED} for key, figures in shown.items()}


@pytest.fixture
def log_only() -> dict:
    baseline = make_client("baseline")
    summary = import_path(tenant=baseline.tenant, path=PROJECTS)
    assert summary.messages == 4
    shown = figures(baseline)
    assert set(shown) == {*SESSIONS, "totals"}
    for agent_session_id in SESSIONS:
        stats = shown[agent_session_id]
        assert (stats["requests"], stats["conversations"], stats["message_user"], stats["message_assistant"]) == (
            1,
            1,
            1,
            1,
        )
        assert stats["input_tokens"] > 0 and stats["cache_read_tokens"] > 0
    return shown


def assert_counted_once(api, log_only) -> None:
    assert figures(api) == log_only
    for session in Session.objects.filter(tenant=api.tenant):
        assert session_count_drift(session=session) == {}
    assert rollup_drift(tenant=api.tenant) == NO_DRIFT


def test_the_recorded_export_alone_gives_what_the_log_gives(log_only):
    acme = make_client("acme")
    send_recorded(acme.key)
    shown = figures(acme)
    for agent_session_id, (prompt, model) in SESSIONS.items():
        expected = log_only[agent_session_id]
        stats = shown[agent_session_id]
        for name in ("requests", "conversations", "messages", "input_tokens", "output_tokens", "total_tokens"):
            assert stats[name] == expected[name], (agent_session_id, name)
        assert stats["cache_read_tokens"] == expected["cache_read_tokens"]
        assert stats["cache_creation_tokens"] == expected["cache_creation_tokens"]
        session = Session.objects.get(tenant=acme.tenant, agent_session_id=agent_session_id)
        user, assistant = Message.objects.filter(session=session).order_by("seq")
        assert user.content == prompt
        assert assistant.model == model and assistant.metadata["source"] == "otel"
        assert assistant.metadata["cost_usd"] > 0
        # Claude Code's own metrics of the run agree with its events (they are shown, not counted).
        metered = session_metered(session=session)["tokens"]
        assert metered == {
            "input": stats["input_tokens"],
            "output": stats["output_tokens"],
            "cacheRead": stats["cache_read_tokens"],
            "cacheCreation": stats["cache_creation_tokens"],
        }
    # Sent again (an exporter's retry), nothing changes.
    send_recorded(acme.key)
    assert figures(acme) == shown


def test_the_recorded_export_then_the_log_counts_once(log_only):
    acme = make_client("acme")
    send_recorded(acme.key)
    import_path(tenant=acme.tenant, path=PROJECTS)
    assert_counted_once(acme, log_only)
    for agent_session_id in SESSIONS:
        assistant = Message.objects.get(
            session__tenant=acme.tenant, session__agent_session_id=agent_session_id, role="assistant"
        )
        assert assistant.content.startswith("Answer number")  # the log's text completed the event's message
        assert assistant.metadata["completed_by"] == "log"
        # The event's cost_usd stays with the completed message: Claude Code's own cost of the call, kept as reported.
        assert assistant.reported_cost_nano_usd == round(assistant.metadata["cost_usd"] * 10**9)


def test_the_log_then_the_recorded_export_counts_once(log_only):
    acme = make_client("acme")
    import_path(tenant=acme.tenant, path=PROJECTS)
    send_recorded(acme.key)
    assert_counted_once(acme, log_only)
    paired = TelemetryRecord.objects.filter(tenant=acme.tenant, name="claude_code.api_request", message__isnull=False)
    assert paired.count() == 2
