"""Memory export and import: a round trip into another tenant, re-imports that write nothing, bad lines refused."""

import json
import zipfile

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from memory_app.models import Record, RecordRevision
from portability_app.models import RecordImport
from tests.support.factories import SessionFactory


@pytest.fixture
def memories(api):
    """Three records of xiaoming (one changed twice, one deleted) and one of another user, with provenance."""
    trip = SessionFactory(
        tenant=api.tenant, name="杭州行", user_id="xiaoming", tool="claude-code", agent_session_id="a-1"
    )
    message = api.post(
        f"/api/v1/sessions/{trip.pk}/messages/",
        {"role": "user", "content": "我喜欢博物馆", "external_id": "m-1"},
        format="json",
    ).json()
    museum = api.post(
        "/api/v1/records/",
        {
            "user_id": "xiaoming",
            "type": "profile",
            "content": "Likes museums",
            "fields": {"interest": "museum"},
            "confidence": 0.7,
            "source_message_ids": [message["id"]],
            "strategy": "user-profile",
            "strategy_version": 2,
        },
        format="json",
    ).json()
    api.patch(f"/api/v1/records/{museum['id']}/", {"content": "Loves museums"}, format="json")
    api.patch(f"/api/v1/records/{museum['id']}/", {"confidence": 0.9}, format="json")
    budget = api.post(
        "/api/v1/records/",
        {"user_id": "xiaoming", "type": "task", "content": "Budget 3000 yuan", "valid_until": "2031-01-01T00:00:00Z"},
        format="json",
    ).json()
    old = api.post(
        "/api/v1/records/", {"user_id": "xiaoming", "type": "fact", "content": "Lives in Beijing"}, format="json"
    )
    api.delete(f"/api/v1/records/{old.json()['id']}/")
    api.post("/api/v1/records/", {"user_id": "xiaohong", "type": "fact", "content": "Plays go"}, format="json")
    return {"museum": museum, "budget": budget, "old": old.json(), "session": trip, "message": message}


def export(client, **params):
    response = client.get("/api/v1/records/export/", params)
    assert response.status_code == 200, response
    assert response.streaming
    assert response["Content-Type"] == "application/x-ndjson"
    return b"".join(response.streaming_content)


def lines(body: bytes) -> list[dict]:
    return [json.loads(line) for line in body.splitlines()]


def post_import(client, body: bytes, query=""):
    return client.generic("POST", f"/api/v1/records/import/{query}", body, content_type="application/x-ndjson")


def comparable(record: dict) -> tuple:
    return (
        record["user_id"],
        record["type"],
        record["content"],
        record["fields"],
        record["confidence"],
        record["valid"],
        record["valid_until"],
        record["invalidated_reason"],
        record["strategy"],
        record["strategy_version"],
        record["revision"],
        record["created_at"],
        len(record["revisions"]),
    )


def test_the_export_has_a_header_then_every_record_with_provenance_and_history(api, memories):
    header, *records = lines(export(api, user_id="xiaoming"))
    assert (header["format"], header["version"], header["tenant"], header["user_id"], header["records"]) == (
        "open-ace.memory",
        1,
        "acme",
        "xiaoming",
        3,
    )
    by_content = {r["content"]: r for r in records}
    assert set(by_content) == {"Loves museums", "Budget 3000 yuan", "Lives in Beijing"}
    museum = by_content["Loves museums"]
    assert [r["change"] for r in museum["revisions"]] == ["create", "update", "update"]
    assert museum["revisions"][0]["content"] == "Likes museums"
    assert museum["sources"]["sessions"] == [
        {"id": str(memories["session"].pk), "tool": "claude-code", "agent_session_id": "a-1"}
    ]
    assert museum["sources"]["messages"][0]["external_id"] == "m-1"
    assert by_content["Lives in Beijing"]["valid"] is False
    # The whole tenant without ?user_id=, another user included.
    assert lines(export(api))[0]["records"] == 4


def test_a_round_trip_into_another_tenant_gives_the_same_records(api, other_api, memories):
    body = export(api, user_id="xiaoming")
    response = post_import(other_api, body)
    assert response.status_code == 200, response.content
    assert response.json() == {"records": 3, "created": 3, "merged": 0, "unchanged": 0, "external_sources": 2}
    original = sorted(lines(body)[1:], key=lambda r: r["content"])
    imported = sorted(lines(export(other_api))[1:], key=lambda r: r["content"])
    assert [comparable(r) for r in imported] == [comparable(r) for r in original]
    # The sources are not sessions of globex: kept on the import as the exporting instance's ids.
    museum = Record.objects.get(tenant=other_api.tenant, content="Loves museums")
    assert museum.source_sessions.count() == 0
    kept = RecordImport.objects.get(record=museum).external_sources
    assert kept["sessions"][0]["agent_session_id"] == "a-1"
    assert kept["messages"][0]["external_id"] == "m-1"
    # Valid imports are recalled; the deleted one is not.
    recall = other_api.post("/api/v1/recall/", {"query": "museums", "user_id": "xiaoming"}, format="json").json()
    assert recall["results"][0]["text"] == "Loves museums"
    assert not other_api.get("/api/v1/records/?user_id=xiaoming&q=Beijing").json()["results"]


def test_importing_the_same_file_again_writes_nothing(api, other_api, memories):
    body = export(api, user_id="xiaoming")
    assert post_import(other_api, body).json()["created"] == 3
    revisions = RecordRevision.objects.count()
    again = post_import(other_api, body)
    assert again.status_code == 200
    assert again.json() == {"records": 3, "created": 0, "merged": 0, "unchanged": 3, "external_sources": 0}
    assert Record.objects.filter(tenant=other_api.tenant).count() == 3
    assert RecordRevision.objects.count() == revisions
    # Into the tenant it came from: its own records, nothing new either.
    assert post_import(api, body).json()["unchanged"] == 3
    assert Record.objects.filter(tenant=api.tenant).count() == 4


def test_sources_are_matched_by_agent_ids_on_another_instance(api, other_api, memories):
    """The same agent log imported on both sides: the provenance points at the target's own rows."""
    theirs = SessionFactory(tenant=other_api.tenant, user_id="xiaoming", tool="claude-code", agent_session_id="a-1")
    other_api.post(
        f"/api/v1/sessions/{theirs.pk}/messages/",
        {"role": "user", "content": "我喜欢博物馆", "external_id": "m-1"},
        format="json",
    )
    assert post_import(other_api, export(api, user_id="xiaoming")).json()["external_sources"] == 0
    museum = Record.objects.get(tenant=other_api.tenant, content="Loves museums")
    assert list(museum.source_sessions.values_list("pk", flat=True)) == [theirs.pk]
    assert museum.source_messages.get().external_id == "m-1"


def test_a_restatement_merges_into_the_targets_record(api, other_api, memories):
    other_api.post(
        "/api/v1/records/", {"user_id": "xiaoming", "type": "task", "content": "budget 3000 YUAN!"}, format="json"
    )
    summary = post_import(other_api, export(api, user_id="xiaoming")).json()
    assert (summary["created"], summary["merged"]) == (2, 1)
    budget = Record.objects.get(tenant=other_api.tenant, type="task")
    assert (budget.content, budget.revision) == ("Budget 3000 yuan", 2)


def test_user_ids_can_be_mapped(api, other_api, memories):
    response = post_import(other_api, export(api, user_id="xiaoming"), "?map_user=xiaoming=xm-42")
    assert response.json()["created"] == 3
    assert set(Record.objects.filter(tenant=other_api.tenant).values_list("user_id", flat=True)) == {"xm-42"}
    assert post_import(other_api, b"", "?map_user=nonsense").status_code == 400


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (b"{not json", "line 3"),
        (b'{"kind": "record", "id": "x", "user_id": "u", "type": "fact", "content": "c"}', "line 3.id"),
        (
            b'{"kind": "record", "id": "9f8b5c0e-8c0e-4c55-9d38-1c2f0d0b7a11", "user_id": "u", "type": "mood"}',
            "line 3.type",
        ),
        (b"[1, 2]", "line 3"),
    ],
)
def test_a_bad_line_is_refused_by_number_and_nothing_is_written(api, other_api, memories, line, field):
    header, first, *_ = export(api, user_id="xiaoming").splitlines()
    response = post_import(other_api, b"\n".join([header, first, line]))
    assert response.status_code == 400
    body = response.json()
    assert field in body["errors"] or any(key.startswith(field) for key in body["errors"]), body
    assert "line 3" in body["detail"]
    assert not Record.objects.filter(tenant=other_api.tenant).exists()
    assert not RecordImport.objects.exists()


def test_a_file_that_is_not_an_export_is_refused(other_api):
    assert post_import(other_api, b"").json()["errors"] == {
        "line 1": ["The export is empty: expected a header line and record lines."]
    }
    response = post_import(other_api, b'{"format": "something-else"}\n')
    assert (response.status_code, list(response.json()["errors"])) == (400, ["line 1.format"])
    wrong = b'{"format": "open-ace.memory", "kind": "header", "version": 99}\n'
    assert list(post_import(other_api, wrong).json()["errors"]) == ["line 1.version"]


def test_another_tenants_export_is_its_own(api, other_api, memories):
    header, *records = lines(export(other_api))
    assert (header["tenant"], header["records"], records) == ("globex", 0, [])
    assert APIClient().get("/api/v1/records/export/").status_code == 401


def test_the_export_and_import_routes_sit_beside_the_records_ones(api, memories):
    """records/export/ and records/import/ are portability_app's, routed before memory_app's records/{id}/."""
    record = Record.objects.filter(tenant=api.tenant).first()
    assert api.get(f"/api/v1/records/{record.pk}/").json()["id"] == str(record.pk)
    assert api.post("/api/v1/records/export/").status_code == 405
    assert api.get("/api/v1/records/import/").status_code == 405
    for path in ("/api/v1/records/export/", "/api/v1/records/import/"):
        assert api.options(path).status_code == 200


def test_a_big_export_streams_page_by_page(api):
    Record.objects.bulk_create(
        Record(tenant=api.tenant, user_id="bulk", type="fact", content=f"fact number {n}") for n in range(3000)
    )
    response = api.get("/api/v1/records/export/?user_id=bulk")
    chunks = iter(response.streaming_content)
    with CaptureQueriesContext(connection) as first:
        header = json.loads(next(chunks))
        next(chunks)  # the first record: one page of 500 read, not the table
    assert header["records"] == 3000
    assert len(first.captured_queries) <= 6
    with CaptureQueriesContext(connection) as rest:
        remaining = sum(1 for _ in chunks)
    assert remaining == 2999
    record_pages = [
        q for q in rest.captured_queries if 'FROM "memory_app_record"' in q["sql"] and "LIMIT 500" in q["sql"]
    ]
    assert len(record_pages) == 6  # keyset pages of 500, then the empty one that ends it


def test_the_commands_export_and_import(api, memories, tmp_path, capsys):
    path = tmp_path / "memory.jsonl"
    call_command("ace_export", "memory", "--tenant", "acme", "--user-id", "xiaoming", "--out", str(path))
    assert lines(path.read_bytes())[0]["records"] == 3
    call_command("ace_import_memory", str(path), "--tenant", "initech", "--map-user", "xiaoming=xm")
    assert "3 created" in capsys.readouterr().out
    call_command("ace_import_memory", str(path), "--tenant", "initech", "--map-user", "xiaoming=xm")
    assert "0 created, 0 merged, 3 unchanged" in capsys.readouterr().out
    assert Record.objects.filter(tenant__name="initech", user_id="xm").count() == 3
    path.write_bytes(path.read_bytes() + b'{"kind": "record"}\n')
    with pytest.raises(CommandError, match="line 5"):
        call_command("ace_import_memory", str(path), "--tenant", "initech")


def test_a_tenant_export_is_a_zip_of_every_table(api, memories, tmp_path):
    path = tmp_path / "acme.zip"
    call_command("ace_export", "tenant", "--tenant", "acme", "--out", str(path))
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert (manifest["format"], manifest["tenant"]) == ("open-ace.tenant", "acme")
        assert manifest["files"]["records.jsonl"] == 4
        assert manifest["files"]["messages.jsonl"] == 1
        assert manifest["files"]["strategies.jsonl"] >= 1
        sessions = lines(archive.read("sessions.jsonl"))
        assert [s["agent_session_id"] for s in sessions] == ["a-1"]
        message = lines(archive.read("messages.jsonl"))[0]
        assert message["content"] == "我喜欢博物馆" and "search_vector" not in message
        assert len(lines(archive.read("records.jsonl"))) == 5  # the header and four records
        for name, count in manifest["files"].items():
            assert len(archive.read(name).splitlines()) == count + (name == "records.jsonl")
