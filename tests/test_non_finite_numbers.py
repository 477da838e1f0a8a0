"""NaN, Infinity and -Infinity are refused on every way in, and the database holds none (issue 30).

A stored NaN passes every range check (no comparison with it is true) and cannot be written as JSON again, so
every later read of its row was a 500: MCP `remember` with `confidence: NaN` broke `GET /api/v1/records/` for
good. Here: the REST API (the constants Python's JSON parser reads, numbers too large for a double, strings
like "Infinity" for a float field) answers 400 naming the field; MCP answers a tool error naming the argument;
an agent log with NaN is still imported, the value read as null with a warning; an OTLP metric point whose
value is NaN is refused in `partialSuccess`; and a CHECK constraint refuses what got past all of them.
"""

import json
import math
import uuid
from decimal import Decimal

import httpx2
import pytest
from django.db import DataError, IntegrityError, connection, transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest_app.models import TelemetryRecord
from ingest_app.pipeline import import_path
from memory_app.models import Record, RecordRevision
from sessions_app.models import Budget, Message, ModelPrice
from strategies_app.models import Strategy
from tests.ingest_app.otlp_payloads import metrics_payload, post
from tests.ingest_app.test_imports import CLAUDE_STREAMING
from tests.support.agent_logs import copy_log
from tests.support.api import make_client
from tests.support.factories import SessionFactory

NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]
RECORD = '{"user_id": "u", "type": "fact", "content": "Prefers window seats", %s}'


def raw_post(api, path: str, body: str, method: str = "POST"):
    return api.generic(method, path, body.encode(), content_type="application/json")


def refused(response, field: str) -> dict:
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert field in body["errors"], body
    assert "finite number" in " ".join(body["errors"][field]) or "NaN" in " ".join(body["errors"][field]), body
    assert field in body["detail"]
    return body


# -- REST ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("written", NOT_FINITE)
def test_rest_refuses_a_non_finite_number_naming_the_field_and_stores_nothing(api, session, written):
    refused(raw_post(api, "/api/v1/records/", RECORD % f'"confidence": {written}'), "confidence")
    refused(raw_post(api, "/api/v1/records/", RECORD % f'"fields": {{"seats": [1, {written}]}}'), "fields.seats.1")
    messages = (
        f'[{{"role": "user", "content": "hi"}}, {{"role": "assistant", "content": "x", "temperature": {written}}}]'
    )
    refused(raw_post(api, f"/api/v1/sessions/{session.pk}/messages/", messages), "1.temperature")
    assert api.get("/api/v1/records/").json()["results"] == []
    assert not Message.objects.filter(session=session).exists()


def test_a_float_field_that_reads_strings_refuses_nan_and_infinity_strings(api):
    """A strategy's thresholds take "0.5" as well as 0.5; "NaN" and "Infinity" were read as numbers too, and a
    stored Infinity made the strategies list a 500."""
    base = {"name": "prefs", "type": "profile", "prompt": "Extract preferences.\n{messages}"}
    for field, value in (("accumulated_threshold", "Infinity"), ("message_threshold", "NaN")):
        response = api.post("/api/v1/strategies/", {**base, field: value}, format="json")
        refused(response, field)
    response = raw_post(api, "/api/v1/strategies/", json.dumps(base)[:-1] + ', "accumulated_threshold": 1e999}')
    refused(response, "accumulated_threshold")
    assert api.get("/api/v1/strategies/").status_code == 200
    assert not Strategy.objects.filter(name="prefs").exists()


def test_ordinary_numbers_are_still_read_as_before(api, session):
    response = raw_post(api, "/api/v1/records/", RECORD % '"confidence": 5e-1, "fields": {"weight": 1.5E2}')
    assert response.status_code == 201, response.content
    record = response.json()
    assert (record["confidence"], record["fields"]) == (0.5, {"weight": 150.0})
    big = f'[{{"role": "user", "content": "{"9" * 320}"}}]'  # digits in a string are no number
    assert raw_post(api, f"/api/v1/sessions/{session.pk}/messages/", big).status_code == 201


json_numbers = st.one_of(
    st.sampled_from(NOT_FINITE), st.integers(min_value=309, max_value=2000).map(lambda e: f"1e{e}")
)


def test_fuzz_every_number_field_refuses_non_finite_numbers_naming_it(api, session):
    """Hypothesis puts NaN, ±Infinity or an overflowing number in one number field of a valid body of each
    endpoint that takes numbers; the answer is a 400 naming that field, whatever the rest says."""
    bodies = [
        ("/api/v1/records/", {"user_id": "u", "type": "fact", "content": "x", "confidence": 0.5}, "confidence"),
        (f"/api/v1/sessions/{session.pk}/state/", {"city": "Hangzhou", "progress": 0.25}, "progress"),
        (
            f"/api/v1/sessions/{session.pk}/messages/",
            {"role": "assistant", "content": "x", "temperature": 0.7},
            "temperature",
        ),
        ("/api/v1/budgets/", {"name": "b", "limit": 1000.5, "unit": "usd"}, "limit"),
        (
            "/api/v1/strategies/",
            {"name": "s", "type": "fact", "prompt": "p {messages}", "message_threshold": 0.5},
            None,
        ),
    ]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.sampled_from(bodies), json_numbers, st.sampled_from(["", " ", "\n"]))
    def check(case, written, space):
        path, body, field = case
        field = field or "message_threshold"
        text = json.dumps(body).replace(json.dumps(body[field]), f"{space}{written}", 1)
        refused(raw_post(api, path, text, method="PUT" if path.endswith("/state/") else "POST"), field)

    check()
    assert api.get("/api/v1/records/").json()["results"] == []


# -- MCP ----------------------------------------------------------------------------------------------------
def mcp_call(url: str, key: str, tool: str, arguments_json: str) -> dict:
    params = f'{{"name": "{tool}", "arguments": {arguments_json}}}'
    body = f'{{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {params}}}'
    response = httpx2.post(
        f"{url}/mcp/",
        content=body.encode(),
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {key}",
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.django_db(transaction=True)
def test_mcp_remember_refuses_nan_and_the_records_list_stays_readable(live_server):
    acme = make_client("acme")
    for arguments in (
        '{"content": "Prefers tea", "user_id": "u", "confidence": NaN}',
        '{"content": "Prefers tea", "user_id": "u", "confidence": Infinity}',
        '{"content": "Prefers tea", "user_id": "u", "fields": {"cups": NaN}}',
    ):
        answer = mcp_call(live_server.url, acme.key, "remember", arguments)
        result = answer["result"]
        assert result["isError"], answer
        text = result["content"][0]["text"]
        assert text.startswith("remember failed:") and "finite number" in text, text
        assert ("confidence" in text) or ("fields.cups" in text), text
    records = acme.get("/api/v1/records/")
    assert records.status_code == 200 and records.json()["results"] == []
    ok = mcp_call(
        live_server.url, acme.key, "remember", '{"content": "Prefers tea", "user_id": "u", "confidence": 0.5}'
    )
    assert not ok["result"]["isError"], ok
    assert acme.get("/api/v1/records/").json()["results"][0]["confidence"] == 0.5


# -- imports ------------------------------------------------------------------------------------------------
def test_an_agent_log_with_nan_is_imported_the_value_read_as_null_with_a_warning(api, tmp_path):
    path = copy_log(CLAUDE_STREAMING, tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    assert '"cache_read_input_tokens":9000' in lines[1] and '"output_tokens":12' in lines[1]
    lines[1] = lines[1].replace('"cache_read_input_tokens":9000', '"cache_read_input_tokens":NaN')
    lines[1] = lines[1].replace('"output_tokens":12', '"output_tokens":1e999,"costUSD":-Infinity', 1)
    path.write_text("".join(lines))
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert summary.files_imported == 1 and summary.files_refused == 0
    warnings = [issue.message for issue in summary.issues if "not finite" in issue.message]
    assert len(warnings) == 1, [issue.message for issue in summary.issues]
    assert "message.usage.cache_read_input_tokens = NaN" in warnings[0]
    assert "message.usage.output_tokens = 1e999" in warnings[0] and "costUSD = -Infinity" in warnings[0]
    (session,) = api.get("/api/v1/sessions/").json()["results"]
    assert api.get(f"/api/v1/sessions/{session['id']}/messages/").status_code == 200
    assert Message.objects.filter(session_id=session["id"]).count() > 2


# -- OTLP ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_an_otlp_metric_point_of_nan_is_refused_in_partial_success(api, encoding):
    payload = metrics_payload()
    metrics = payload["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
    counted = next(metric for metric in metrics if "sum" in metric)
    points = counted["sum"]["dataPoints"]
    total = sum(len(m.get("sum", m.get("gauge", {})).get("dataPoints", [])) for m in metrics)
    for point in points:
        point.pop("asInt", None)
        point["asDouble"] = "NaN"  # OTLP/JSON writes non-finite doubles as strings; protobuf as the double
    response = post(Client(), "/v1/metrics", payload, encoding=encoding, key=api.key)
    assert response.status_code == 200
    if encoding == "json":
        partial = response.json()["partialSuccess"]
        assert int(partial["rejectedDataPoints"]) == len(points)
        assert counted["name"] in partial["errorMessage"] and "not a finite number" in partial["errorMessage"]
    assert not TelemetryRecord.objects.filter(name=counted["name"]).exists()
    assert TelemetryRecord.objects.filter(kind="metric").count() == total - len(points)


# -- the database -------------------------------------------------------------------------------------------
def refused_by_the_database(write) -> None:
    with pytest.raises(IntegrityError) as error, transaction.atomic():
        write()
    assert "finite" in str(error.value) or "within_bounds" in str(error.value), error.value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_the_database_refuses_a_non_finite_number_in_every_column_a_client_sets(api, session, value):
    record = Record.objects.create(tenant=api.tenant, user_id="u", type="fact", content="x")
    refused_by_the_database(lambda: Record.objects.filter(pk=record.pk).update(confidence=value))
    revision = RecordRevision.objects.filter(record=record).first() or None
    if revision is not None:
        refused_by_the_database(lambda: RecordRevision.objects.filter(pk=revision.pk).update(confidence=value))
    refused_by_the_database(
        lambda: Message.objects.create(tenant=api.tenant, session=session, seq=1, role="user", temperature=value)
    )
    refused_by_the_database(
        lambda: TelemetryRecord.objects.create(
            tenant=api.tenant, kind="metric", name="m", time="2026-03-01T00:00:00Z", key=uuid.uuid4().hex, value=value
        )
    )
    strategy = Strategy.objects.create(tenant=api.tenant, name="s", type="fact", prompt="p {messages}")
    refused_by_the_database(lambda: Strategy.objects.filter(pk=strategy.pk).update(accumulated_threshold=value))
    refused_by_the_database(lambda: Strategy.objects.filter(pk=strategy.pk).update(message_threshold=value))


def test_the_database_refuses_nan_in_numeric_columns(api):
    """PostgreSQL's numeric holds NaN (above every number, so `limit > 0` let it through). Django refuses to
    write a Decimal NaN itself, so the SQL says it."""
    budget = Budget.objects.create(tenant=api.tenant, name="b", limit=Decimal(1000))
    price = ModelPrice.objects.create(
        model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, cache_read_usd_per_mtok=0, cache_write_usd_per_mtok=0
    )
    for table, column, pk in (
        (Budget._meta.db_table, '"limit"', budget.pk),
        (ModelPrice._meta.db_table, "output_usd_per_mtok", price.pk),
    ):

        def write(table=table, column=column, pk=pk):
            with connection.cursor() as cursor:
                cursor.execute(f"UPDATE {table} SET {column} = 'NaN'::numeric WHERE id = %s", [pk])

        refused_by_the_database(write)


def test_jsonb_refuses_nan_so_json_fields_refuse_it_before_the_write(api):
    """What a JSON field would do without the checks above: Django writes NaN as `NaN`, which jsonb refuses (a
    500 had it come from a request); the serializers' stored-JSON check names it first."""
    from platform_kit.api.fields import stored_json_error

    with pytest.raises(DataError), transaction.atomic():
        Record.objects.create(tenant=api.tenant, user_id="u", type="fact", content="x", fields={"cups": math.nan})
    assert "at cups.1" in stored_json_error({"cups": [1, math.inf]})
    assert stored_json_error({"cups": [1, 2.5, None]}) is None


# -- the migrations: rows stored before them ------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_migrations_repair_rows_stored_with_nan_before_adding_the_constraints():
    """Migrated back to before the constraints, rows are written with NaN and ±Infinity as the old code let
    them be; migrating forward repairs them (confidence: NaN and +Infinity 1.0, -Infinity 0.0; a temperature
    and a telemetry value: null) and then holds the constraints."""
    from django.db.migrations.executor import MigrationExecutor

    acme = make_client("acme")
    session = SessionFactory(tenant=acme.tenant, tool="chat", user_id="u")
    records = [Record.objects.create(tenant=acme.tenant, user_id="u", type="fact", content=c) for c in "abcd"]
    message = Message.objects.create(tenant=acme.tenant, session=session, seq=1, role="user", temperature=0.5)
    point = TelemetryRecord.objects.create(
        tenant=acme.tenant, kind="metric", name="m", time="2026-03-01T00:00:00Z", key="k", value=1.0, sent_value=2.0
    )
    before = [("memory_app", "0010_field_labels"), ("sessions_app", "0021_session_all_tokens")]
    after = [("memory_app", "0011_finite_confidence"), ("sessions_app", "0022_finite_numbers")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        with connection.cursor() as cursor:
            for record, value in zip(records, ["NaN", "Infinity", "-Infinity", "0.25"], strict=True):
                cursor.execute(
                    f"UPDATE {Record._meta.db_table} SET confidence = %s::float8 WHERE id = %s", [value, record.pk]
                )
            cursor.execute(f"UPDATE {Message._meta.db_table} SET temperature = 'NaN' WHERE id = %s", [message.pk])
            cursor.execute(  # its table's name before ingest_app took it (ingest_app 0002)
                "UPDATE sessions_app_telemetryrecord SET value = 'Infinity', sent_value = 'NaN' WHERE id = %s",
                [point.pk],
            )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())  # and whatever came later, for the tests that follow
    confidences = [Record.objects.get(pk=record.pk).confidence for record in records]
    assert confidences == [1.0, 1.0, 0.0, 0.25]
    assert Message.objects.get(pk=message.pk).temperature is None
    assert TelemetryRecord.objects.filter(pk=point.pk).values_list("value", "sent_value").get() == (None, None)
    assert make_client("acme").get("/api/v1/records/").status_code == 200
    refused_by_the_database(lambda: Record.objects.filter(pk=records[0].pk).update(confidence=math.nan))
