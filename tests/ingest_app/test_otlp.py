"""The OTLP/HTTP receiver: Claude Code's exported events and metrics become sessions, requests and usage."""

import copy
import gzip
import json

import pytest
from django.test import Client
from django.urls import reverse
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

from ingest_app.models import TelemetryRecord
from sessions_app.models import Message, Session
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from tests.ingest_app.otlp_payloads import (
    MODEL,
    SESSION_ID,
    TOKENS,
    as_protobuf,
    logs_payload,
    metrics_payload,
    only,
    post,
    records,
    set_attribute,
)
from tests.support.api import make_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme():
    return make_client("acme")


@pytest.fixture
def exporter():
    return Client()


def stats_of(api, session_id) -> dict:
    response = api.get(f"/api/v1/sessions/{session_id}/stats/")
    assert response.status_code == 200
    return response.json()


def the_session(tenant) -> Session:
    return Session.objects.get(tenant=tenant, tool="claude-code", agent_session_id=SESSION_ID)


@pytest.mark.parametrize(("encoding", "gzipped"), [("json", False), ("protobuf", False), ("protobuf", True)])
def test_a_live_session_becomes_a_session_with_its_requests_and_tokens(acme, exporter, encoding, gzipped):
    response = post(exporter, "/v1/logs", logs_payload(), encoding=encoding, gzipped=gzipped, key=acme.key)
    assert response.status_code == 200
    if encoding == "protobuf":
        assert response["Content-Type"] == "application/x-protobuf"
        answer = logs_service_pb2.ExportLogsServiceResponse.FromString(response.content)
        assert not answer.HasField("partial_success")
    else:
        assert response.json() == {}

    session = the_session(acme.tenant)
    assert session.user_id == "dev@example.com"
    stats = stats_of(acme, session.pk)
    assert stats["requests"] == 4  # three calls, and the one that failed with a 529 (docs/accounting.md)
    assert stats["conversations"] == 2
    assert (stats["message_user"], stats["message_assistant"], stats["message_error"]) == (2, 3, 1)
    for name, value in TOKENS.items():
        assert stats[name] == value, name
    assert stats["total_tokens"] == TOKENS["input_tokens"] + TOKENS["output_tokens"]

    usage = acme.get("/api/v1/stats/", {"group_by": "model", "tool": "claude-code"}).json()
    assert usage["totals"]["requests"] == 4 and usage["totals"]["cache_read_tokens"] == TOKENS["cache_read_tokens"]
    by_model = {row["key"]: row for row in usage["results"]}
    assert by_model[MODEL]["requests"] == 4 and by_model[MODEL]["output_tokens"] == TOKENS["output_tokens"]

    messages = acme.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant", "user", "error", "assistant"]
    failed = messages[4]
    assert (failed["content"], failed["model"], failed["input_tokens"]) == ("Overloaded", MODEL, None)
    assert failed["metadata"]["status"] == 529 and failed["metadata"]["attempt"] == "1"
    assert failed["conversation"] == messages[3]["conversation"]  # the round of its prompt.id
    first_call = messages[1]
    assert first_call["model"] == MODEL and first_call["input_tokens"] == 12 and first_call["output_tokens"] == 180
    assert first_call["created_at"].startswith("2026-03-02T10:00:06.18")
    assert first_call["metadata"]["source"] == "otel"
    assert first_call["metadata"]["cost_usd"] == pytest.approx(0.01002)
    assert first_call["metadata"]["duration_ms"] == 6102
    assert first_call["metadata"]["query_source"] == "repl_main_thread"
    assert messages[0]["content"] == "Add a --verbose flag to cli.py"
    assert messages[0]["metadata"]["prompt_length"] == 30
    assert messages[0]["conversation"] == messages[1]["conversation"] != messages[3]["conversation"]

    # Nothing sent is lost: the other events are raw telemetry of the session, not counted.
    raw = TelemetryRecord.objects.filter(tenant=acme.tenant).order_by("time")
    assert [r.name for r in raw] == ["claude_code.tool_decision", "claude_code.tool_result"]
    assert all(r.session_id == session.pk for r in raw)
    assert session_count_drift(session=session) == {}
    assert rollup_drift(tenant=acme.tenant) == {"hourly": [], "daily": [], "session_model": []}


def test_a_retried_batch_stores_nothing_new(acme, exporter):
    assert post(exporter, "/v1/logs", logs_payload(), key=acme.key).status_code == 200
    before = (Message.objects.count(), TelemetryRecord.objects.count(), stats_of(acme, the_session(acme.tenant).pk))
    for encoding in ("json", "protobuf"):
        assert post(exporter, "/v1/logs", logs_payload(), encoding=encoding, key=acme.key).status_code == 200
    after = (Message.objects.count(), TelemetryRecord.objects.count(), stats_of(acme, the_session(acme.tenant).pk))
    assert after == before
    assert Session.objects.filter(agent_session_id=SESSION_ID).count() == 1


def test_events_in_several_batches_count_like_one(acme, exporter):
    payload = logs_payload()
    for name in ("user_prompt", "api_request", "tool_result"):
        assert post(exporter, "/v1/logs", only(payload, name), encoding="protobuf", key=acme.key).status_code == 200
    stats = stats_of(acme, the_session(acme.tenant).pk)
    assert stats["requests"] == 3 and stats["conversations"] == 2 and stats["output_tokens"] == 485
    assert session_count_drift(session=the_session(acme.tenant)) == {}


def test_numbers_sent_as_ints_doubles_or_strings_are_read_alike(acme, exporter):
    payload = only(logs_payload(), "api_request")
    first, second, third = records(payload)
    set_attribute(first, "input_tokens", {"intValue": "12"})
    set_attribute(second, "output_tokens", {"doubleValue": 95.0})
    set_attribute(third, "cost_usd", {"doubleValue": 0.0087})
    assert post(exporter, "/v1/logs", payload, key=acme.key).status_code == 200
    stats = stats_of(acme, the_session(acme.tenant).pk)
    assert stats["input_tokens"] == 30 and stats["output_tokens"] == 485 and stats["requests"] == 3


def test_prompts_not_exported_are_empty_with_their_length(acme, exporter):
    payload = only(logs_payload(), "user_prompt")
    for record in records(payload):
        set_attribute(record, "prompt", {"stringValue": "<REDACTED>"})
    assert post(exporter, "/v1/logs", payload, key=acme.key).status_code == 200
    messages = acme.get(f"/api/v1/sessions/{the_session(acme.tenant).pk}/messages/").json()["results"]
    assert [(m["role"], m["content"], m["metadata"]["prompt_length"]) for m in messages] == [
        ("user", "", 30),
        ("user", "", 21),
    ]


def test_tenants_never_share_a_session(acme, exporter):
    globex = make_client("globex")
    assert post(exporter, "/v1/logs", logs_payload(), key=acme.key).status_code == 200
    assert post(exporter, "/v1/logs", only(logs_payload(), "api_request"), key=globex.key).status_code == 200
    ours, theirs = the_session(acme.tenant), the_session(globex.tenant)
    assert ours.pk != theirs.pk
    assert stats_of(acme, ours.pk)["messages"] == 6
    assert stats_of(globex, theirs.pk)["messages"] == 3
    assert globex.get(f"/api/v1/sessions/{ours.pk}/").status_code == 404
    assert TelemetryRecord.objects.filter(tenant=globex.tenant).count() == 0
    assert globex.get("/api/v1/stats/").json()["totals"]["requests"] == 3


def test_refused_records_are_reported_and_the_others_stored(acme, exporter):
    payload = only(logs_payload(), "api_request")
    set_attribute(records(payload)[1], "input_tokens", {"stringValue": "lots"})
    response = post(exporter, "/v1/logs", payload, key=acme.key)
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "1"
    assert "token counts" in partial["errorMessage"]
    assert stats_of(acme, the_session(acme.tenant).pk)["requests"] == 2


def test_events_of_a_session_deleted_through_the_api_are_refused(acme, exporter):
    assert post(exporter, "/v1/logs", only(logs_payload(), "user_prompt"), key=acme.key).status_code == 200
    session = the_session(acme.tenant)
    assert acme.delete(f"/api/v1/sessions/{session.pk}/").status_code == 204
    response = post(exporter, "/v1/logs", only(logs_payload(), "api_request"), encoding="protobuf", key=acme.key)
    answer = logs_service_pb2.ExportLogsServiceResponse.FromString(response.content)
    assert response.status_code == 200 and answer.partial_success.rejected_log_records == 3
    assert Message.objects.filter(session=session).count() == 2


# -- refusals --------------------------------------------------------------------------------------------------
def test_without_a_valid_key_it_is_401_and_nothing_is_stored(acme, exporter):
    for key in (None, "ace_nope_nope", "not-a-key"):
        response = post(exporter, "/v1/logs", logs_payload(), key=key)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert "Authorization=Bearer%20" in response.json()["detail"]
    response = post(exporter, "/v1/metrics", metrics_payload(), encoding="protobuf")
    assert response.status_code == 401
    assert status_pb2.Status.FromString(response.content).code == 16  # UNAUTHENTICATED
    assert not Session.objects.exists() and not TelemetryRecord.objects.exists()


def test_the_key_is_read_with_the_space_encoded_as_claude_code_sends_it(acme, exporter):
    # OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20<key>": Claude Code 2.1 sends the value undecoded.
    body = json.dumps(logs_payload())
    response = exporter.post(
        "/v1/logs", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer%20{acme.key}"
    )
    assert response.status_code == 200
    assert stats_of(acme, the_session(acme.tenant).pk)["requests"] == 4
    wrong = exporter.post("/v1/logs", data=body, content_type="application/json", HTTP_AUTHORIZATION="Bearer%20ace_x")
    assert wrong.status_code == 401


def test_bodies_that_cannot_be_read_are_400_with_what_is_wrong(acme, exporter):
    cases = [
        ("json", b"{not json", "not valid JSON"),
        ("json", b"[1, 2]", "JSON object"),
        ("json", json.dumps({"resourceLogs": [{"scopeLogs": "x"}]}).encode(), "OTLP/JSON"),
        ("protobuf", b"\xff\xff\xff\xff", "protobuf"),
    ]
    for encoding, body, hint in cases:
        response = post(exporter, "/v1/logs", body, encoding=encoding, key=acme.key)
        assert response.status_code == 400, body
        message = (
            response.json()["detail"] if encoding == "json" else status_pb2.Status.FromString(response.content).message
        )
        assert hint in message, (message, hint)
    broken_gzip = exporter.generic(
        "POST", "/v1/logs", b"\x1f\x8b garbage", content_type="application/json",
        HTTP_CONTENT_ENCODING="gzip", HTTP_AUTHORIZATION=f"Bearer {acme.key}",
    )  # fmt: skip
    assert broken_gzip.status_code == 400 and "gzip" in broken_gzip.json()["detail"]
    assert not Message.objects.exists() and not TelemetryRecord.objects.exists()


def test_other_content_types_are_415_and_other_methods_405(acme, exporter):
    response = exporter.post("/v1/logs", "a=b", content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {acme.key}")
    assert response.status_code == 415
    assert "http/protobuf" in response.json()["detail"]
    assert exporter.get("/v1/logs", HTTP_AUTHORIZATION=f"Bearer {acme.key}").status_code == 405


def test_bodies_too_large_are_413(acme, exporter, settings):
    settings.ACE_MAX_REQUEST_BYTES = 4096
    big = logs_payload()
    big["padding"] = "x" * 5000
    assert post(exporter, "/v1/logs", big, key=acme.key).status_code == 413
    # a small gzip body that inflates beyond the limit (a zip bomb) is refused too
    bomb = json.dumps({"resourceLogs": [], "padding": "0" * 100_000}).encode()
    assert len(gzip.compress(bomb)) < 4096
    response = post(exporter, "/v1/logs", bomb, gzipped=True, key=acme.key)
    assert response.status_code == 413
    assert not Message.objects.exists()


def test_otlp_json_quirks_are_read(acme, exporter):
    """Hex trace ids, enums as integers, 64-bit integers as strings, snake_case keys."""
    payload = only(logs_payload(), "api_request")
    for record in records(payload):
        record["traceId"] = "5b8efff798038103d269b633813fc60c"
        record["spanId"] = "eee19b7ec3c1b174"
        record["severityNumber"] = 9
    payload["resourceLogs"][0]["scope_logs"] = payload["resourceLogs"][0].pop("scopeLogs")
    assert post(exporter, "/v1/logs", payload, key=acme.key).status_code == 200
    assert stats_of(acme, the_session(acme.tenant).pk)["requests"] == 3


# -- metrics -------------------------------------------------------------------------------------------------
def metered(session) -> dict:
    from ingest_app.selectors.telemetry import session_metered

    return session_metered(session=session)


def test_metrics_are_kept_as_metered_usage_and_never_counted(acme, exporter):
    assert post(exporter, "/v1/metrics", metrics_payload(), encoding="protobuf", key=acme.key).status_code == 200
    session = the_session(acme.tenant)  # session.count made the session
    assert stats_of(acme, session.pk)["requests"] == 0 and stats_of(acme, session.pk)["input_tokens"] == 0
    assert metered(session) == {
        "tokens": {"input": 20, "output": 275, "cacheRead": 32100, "cacheCreation": 2450},
        "cost_usd": pytest.approx(0.01803),
    }
    assert TelemetryRecord.objects.filter(session=session, kind="metric").count() == 8
    # a retry stores nothing new
    assert post(exporter, "/v1/metrics", metrics_payload(), key=acme.key).status_code == 200
    assert TelemetryRecord.objects.filter(session=session, kind="metric").count() == 8


def test_cumulative_metrics_become_deltas_per_series(acme, exporter):
    def export(end: str, input_tokens: float, start: str = "1772445598000000000") -> dict:
        payload = copy.deepcopy(metrics_payload())
        metrics = payload["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        usage = next(m for m in metrics if m["name"] == "claude_code.token.usage")
        usage["sum"]["aggregationTemporality"] = 2  # CUMULATIVE
        point = usage["sum"]["dataPoints"][0]
        point.update(asDouble=input_tokens, timeUnixNano=end, startTimeUnixNano=start)
        usage["sum"]["dataPoints"] = [point]
        payload["resourceMetrics"][0]["scopeMetrics"][0]["metrics"] = [usage]
        return payload

    for end, total in (("1772445658000000000", 20), ("1772445718000000000", 50), ("1772445778000000000", 50)):
        assert post(exporter, "/v1/metrics", export(end, total), key=acme.key).status_code == 200
    # the process restarted: a new start time, the series starts again
    restart = export("1772445838000000000", 7, start="1772445800000000000")
    assert post(exporter, "/v1/metrics", restart, encoding="protobuf", key=acme.key).status_code == 200
    points = TelemetryRecord.objects.filter(name="claude_code.token.usage").order_by("time")
    assert [p.value for p in points] == [20, 30, 0, 7]
    assert [p.sent_value for p in points] == [20, 50, 50, 7]
    assert metered(the_session(acme.tenant))["tokens"] == {"input": 57}


def test_the_schema_leaves_the_otlp_endpoints_out(acme):
    schema = acme.get("/api/schema/?format=json").json()
    assert not any(path.startswith("/v1/") for path in schema["paths"])


def test_protobuf_and_json_bodies_give_the_same_records(acme, exporter):
    globex = make_client("globex")
    post(exporter, "/v1/logs", logs_payload(), encoding="json", key=acme.key)
    post(exporter, "/v1/logs", as_protobuf(logs_payload()), encoding="protobuf", key=globex.key)

    def shape(tenant):
        rows = Message.objects.filter(tenant=tenant).order_by("seq")
        return [(m.role, m.content, m.model, m.input_tokens, m.created_at, m.external_id) for m in rows]

    assert shape(acme.tenant) == shape(globex.tenant) and len(shape(acme.tenant)) == 6


def test_the_admin_shows_raw_telemetry_and_metered_usage_read_only(acme, exporter, client, django_user_model):
    post(exporter, "/v1/logs", logs_payload(), key=acme.key)
    post(exporter, "/v1/metrics", metrics_payload(), key=acme.key)
    client.force_login(django_user_model.objects.create_superuser("auditor", "auditor@example.com", "not-used"))
    changelist = reverse("admin:ingest_app_telemetryrecord_changelist")
    page = client.get(changelist, {"name": "claude_code.tool_result"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "tool_name=Edit" in text and "status_code=529" not in text
    metric_page = client.get(changelist, {"kind": "metric", "paired": "no"}).content.decode()
    assert "claude_code.token.usage" in metric_page
    record = TelemetryRecord.objects.get(name="claude_code.tool_result")
    detail = client.get(reverse("admin:ingest_app_telemetryrecord_change", args=[record.pk]))
    assert detail.status_code == 200 and "Edit" in detail.content.decode()
    assert not TelemetryRecord.objects.filter(name="claude_code.api_error").exists()  # an answered one: a message
    assert client.post(reverse("admin:ingest_app_telemetryrecord_delete", args=[record.pk])).status_code == 403
    session_page = client.get(reverse("admin:sessions_app_session_change", args=[the_session(acme.tenant).pk]))
    assert "Metered by Claude Code" in session_page.content.decode()
    assert "cacheRead 32,100" in session_page.content.decode()


def test_an_exporters_key_owns_its_sessions_and_their_usage_counts_in_its_budget(acme, exporter):
    from django.db.models import Sum

    from sessions_app.models import BudgetUsage
    from sessions_app.services.apikeys import apikey_authenticate

    key = apikey_authenticate(plain_key=acme.key)
    budget = acme.post(
        "/api/v1/budgets/",
        {"name": "claude code", "scope": "api_key", "api_key": str(key.pk), "limit": 10**9, "period": "month"},
        format="json",
    )
    assert budget.status_code == 201, budget.json()

    assert post(exporter, "/v1/logs", logs_payload(), key=acme.key).status_code == 200

    session = the_session(acme.tenant)
    assert session.api_key_id == key.pk
    used = BudgetUsage.objects.filter(budget_id=budget.json()["id"]).aggregate(total=Sum("used"))["total"]
    assert used == TOKENS["input_tokens"] + TOKENS["output_tokens"]  # total tokens, as the stats count them


def test_a_session_made_from_telemetry_is_named_from_what_it_carries(acme, exporter):
    post(exporter, "/v1/logs", logs_payload(), key=acme.key)
    session = the_session(acme.tenant)
    assert session.name == f"Claude Code (vscode) {SESSION_ID[:8]}, 2026-03-02 10:00 UTC"
    found = acme.get("/api/v1/sessions/", {"search": SESSION_ID[:8]}).json()["results"]
    assert [s["id"] for s in found] == [str(session.pk)]


def test_an_empty_telemetry_page_says_what_lands_there_and_where_the_calls_went(
    acme, exporter, client, django_user_model
):
    client.force_login(django_user_model.objects.create_superuser("auditor", "auditor@example.com", "not-used"))
    changelist = reverse("admin:ingest_app_telemetryrecord_changelist")
    empty = client.get(changelist).content.decode()
    assert "No telemetry records yet." in empty
    assert "claude_code.api_request" in empty and "become the <strong>messages</strong>" in empty
    messages_link = reverse("admin:sessions_app_message_changelist") + "?tool=claude-code"
    assert f'href="{messages_link}"' in empty and 'href="/docs/otel/"' in empty
    post(exporter, "/v1/logs", only(logs_payload(), "user_prompt", "api_request"), key=acme.key)
    assert TelemetryRecord.objects.count() == 0 and Message.objects.count() > 0  # the calls became messages
    listed = client.get(messages_link)
    assert listed.status_code == 200 and "claude-sonnet" in listed.content.decode()
    post(exporter, "/v1/logs", logs_payload(), key=acme.key)
    page = client.get(changelist).content.decode()
    assert "No telemetry records yet." not in page and "claude_code.tool_result" in page
    assert "No telemetry record matches these filters." in client.get(changelist, {"kind": "metric"}).content.decode()
