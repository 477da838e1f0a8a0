"""A Claude Code session that arrives both as OpenTelemetry events and as its log is counted once, whichever
comes first: the stats equal those of the log imported alone, and the audits find no drift."""

import shutil

import pytest
from django.test import Client

from ingest_app.models import TelemetryRecord
from ingest_app.pipeline import import_path
from sessions_app.models import Message, Session
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from tests.ingest_app.otlp_payloads import LOG_FILE, SESSION_ID, TOKENS, logs_payload, only, post
from tests.support.api import make_client

pytestmark = pytest.mark.django_db

NO_DRIFT = {"hourly": [], "daily": [], "session_model": []}


def session_of(tenant) -> Session:
    return Session.objects.get(tenant=tenant, tool="claude-code", agent_session_id=SESSION_ID)


# The tools' own cost: the events bring Claude Code's cost_usd, the log none; where the events came first, the log
# line that completes them keeps it (tests/sessions_app/test_reported_cost.py). Counting is compared without it.
RECONCILED = (
    "reported_cost_usd",
    "reported_cost_requests",
    "cost_difference_usd",
    "cost_difference_percent",
    "cost_flagged",
)


def figures(api) -> tuple[dict, dict]:
    """The session's stats and the tenant's usage totals, as the API shows them (the tools' own cost left out)."""
    session = session_of(api.tenant)
    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    totals = api.get("/api/v1/stats/", {"group_by": "day"}).json()["totals"]
    return tuple({k: v for k, v in shown.items() if k not in RECONCILED} for shown in (stats, totals))


@pytest.fixture
def log_only():
    """The same session imported from its log alone, in a tenant of its own: what both orders must equal."""
    baseline = make_client("baseline")
    summary = import_path(tenant=baseline.tenant, path=LOG_FILE)
    assert summary.messages == 6
    stats, totals = figures(baseline)
    assert stats["requests"] == 3 and stats["conversations"] == 2
    assert {name: stats[name] for name in TOKENS} == TOKENS
    return stats, totals


def with_the_failed_call(log_only) -> tuple[dict, dict]:
    """What the log counts, and the call only the events report: a 529 at 10:05:01 (`api_error`, attempt 1, then
    another call of the round answered). Claude Code sends the event once it gives a query up; a background query
    is given up at the first 529 and leaves nothing in the transcript. A failed call is a request (docs/accounting.md
    "Failed calls"), without tokens: counted once, from the event, whichever side comes first."""
    stats, totals = (dict(counters) for counters in log_only)
    for counters in (stats, totals):
        for name in ("requests", "messages", "message_error"):
            counters[name] += 1
    return stats, totals


def assert_counted_once(api, expected) -> None:
    assert figures(api) == expected
    session = session_of(api.tenant)
    assert Session.objects.filter(tenant=api.tenant).count() == 1
    assert session_count_drift(session=session) == {}
    assert rollup_drift(tenant=api.tenant) == NO_DRIFT


def test_events_first_then_the_log_completes_them(log_only):
    acme = make_client("acme")
    assert post(Client(), "/v1/logs", logs_payload(), encoding="protobuf", key=acme.key).status_code == 200
    import_path(tenant=acme.tenant, path=LOG_FILE)
    assert_counted_once(acme, with_the_failed_call(log_only))

    session = session_of(acme.tenant)
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    roles = ["user", "assistant", "assistant", "user", "error", "assistant", "toolResult"]
    assert [m.role for m in messages] == roles
    first_call = messages[1]
    assert first_call.tool_calls[0]["name"] == "Edit"  # the log's content, on the event's message
    assert first_call.thinking.startswith("I should read cli.py")
    assert first_call.finish_reason == "tool_use"
    assert first_call.metadata["cost_usd"] == pytest.approx(0.01002)  # the event's, kept
    assert first_call.metadata["log_request_id"] == "msg_01VxA"
    assert first_call.metadata["log_external_id"] == "e0a1-a1"
    assert messages[0].metadata["log_external_id"] == "e0a1-u1"
    # the session's user stays the one the events named; the log described the rest
    assert session.user_id == "dev@example.com" and session.metadata["cwd"] == "/home/dev/cli-tool"

    # Re-importing changes nothing; a retried event batch neither.
    import_path(tenant=acme.tenant, path=LOG_FILE)
    post(Client(), "/v1/logs", logs_payload(), key=acme.key)
    assert_counted_once(acme, with_the_failed_call(log_only))
    assert Message.objects.filter(session=session).count() == 7


def test_log_first_then_the_events_add_nothing(log_only):
    acme = make_client("acme")
    import_path(tenant=acme.tenant, path=LOG_FILE)
    before = list(Message.objects.filter(tenant=acme.tenant).order_by("seq").values_list("id", "content"))
    response = post(Client(), "/v1/logs", logs_payload(), key=acme.key)
    assert response.status_code == 200 and response.json() == {}
    assert_counted_once(acme, with_the_failed_call(log_only))
    # The log's messages are untouched; the one call only the events report is added after them.
    after = list(Message.objects.filter(tenant=acme.tenant).order_by("seq").values_list("id", "content"))
    assert after[:-1] == before and after[-1][1] == "Overloaded"

    # The events are kept, each paired with the message the log stored for it.
    raw = {r.name: r for r in TelemetryRecord.objects.filter(tenant=acme.tenant, name__endswith="api_request")}
    paired = TelemetryRecord.objects.filter(tenant=acme.tenant, message__isnull=False)
    assert sorted(p.message.request_id for p in paired if p.message.role == "assistant") == [
        "msg_01VxA",
        "msg_02VxB",
        "msg_03VxC",
    ]
    assert sorted(p.message.external_id for p in paired if p.message.role == "user") == ["e0a1-u1", "e0a1-u3"]
    assert raw  # stored as raw telemetry
    # A retry pairs nothing twice and stores nothing new.
    count = TelemetryRecord.objects.count()
    post(Client(), "/v1/logs", logs_payload(), encoding="protobuf", key=acme.key)
    assert TelemetryRecord.objects.count() == count
    assert_counted_once(acme, with_the_failed_call(log_only))


def test_events_while_the_log_is_still_being_written(log_only, tmp_path):
    """The log's first lines (the first response still streaming), then the events, then the rest."""
    acme = make_client("acme")
    folder = tmp_path / "projects" / "-home-dev-cli-tool"
    folder.mkdir(parents=True)
    copy = folder / LOG_FILE.name
    lines = LOG_FILE.read_bytes().splitlines(keepends=True)
    copy.write_bytes(b"".join(lines[:2]))  # the prompt and the response's first line (40 output tokens)
    import_path(tenant=acme.tenant, path=copy)
    assert post(Client(), "/v1/logs", only(logs_payload(), "user_prompt"), key=acme.key).status_code == 200
    assert post(Client(), "/v1/logs", only(logs_payload(), "api_request"), key=acme.key).status_code == 200
    shutil.copyfile(LOG_FILE, copy)
    import_path(tenant=acme.tenant, path=copy)
    assert_counted_once(acme, log_only)


def test_events_then_half_the_log_then_the_rest(log_only, tmp_path):
    acme = make_client("acme")
    folder = tmp_path / "projects" / "-home-dev-cli-tool"
    folder.mkdir(parents=True)
    copy = folder / LOG_FILE.name
    lines = LOG_FILE.read_bytes().splitlines(keepends=True)
    assert post(Client(), "/v1/logs", logs_payload(), key=acme.key).status_code == 200
    copy.write_bytes(b"".join(lines[:4]))
    import_path(tenant=acme.tenant, path=copy)
    shutil.copyfile(LOG_FILE, copy)
    import_path(tenant=acme.tenant, path=copy)
    assert_counted_once(acme, with_the_failed_call(log_only))


def test_the_same_session_id_in_two_tenants_stays_two_sessions(log_only):
    acme, globex = make_client("acme"), make_client("globex")
    import_path(tenant=globex.tenant, path=LOG_FILE)
    assert post(Client(), "/v1/logs", logs_payload(), key=acme.key).status_code == 200
    assert session_of(acme.tenant).pk != session_of(globex.tenant).pk
    assert figures(globex) == log_only  # the events of acme paired nothing of globex
    assert figures(acme)[0]["messages"] == 6
    assert not TelemetryRecord.objects.filter(tenant=acme.tenant, message__isnull=False).exists()
