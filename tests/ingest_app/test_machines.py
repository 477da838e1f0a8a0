"""The machine a session ran on: set through the sessions API, by uploads (their `machine`), by local imports
(this host's name); stats, the admin and the dashboard group and filter by it; the upload endpoint's
append-from-offset semantics and its bad input (4xx, nothing written)."""

from __future__ import annotations

import io
import os
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from ingest_app.models import ImportedFile
from ingest_app.pipeline import local_machine
from sessions_app.models import Session, UsageDaily
from sessions_app.selectors.recount import rollup_drift
from tests.support.agent_logs import DATA
from tests.support.api import upload
from tests.support.factories import SessionFactory

QWEN = DATA / "qwen_code/.qwen/projects/-home-dev-weather/chats/8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12.jsonl"
SEED = DATA / "seed/weather-openclaw.jsonl"


def answer(request_id, created_at, input_tokens, output_tokens):
    return {
        "role": "assistant",
        "content": "…",
        "request_id": request_id,
        "model": "qwen3-coder-plus",
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "created_at": created_at,
    }


@pytest.fixture
def two_machines(api):
    """Two sessions through the API, on machines laptop and build-01, and one with no machine."""
    sessions = {}
    for machine, tokens in (("laptop", 100), ("build-01", 1000), ("", 7)):
        response = api.post(
            "/api/v1/sessions/", {"user_id": "alice", "tool": "chat", "machine": machine}, format="json"
        )
        assert response.status_code == 201, response.json()
        assert response.json()["machine"] == machine
        session_id = response.json()["id"]
        items = [
            {"role": "user", "content": "q", "created_at": "2026-03-01T09:00:00Z"},
            answer(f"r-{machine}", "2026-03-01T09:00:01Z", tokens, 10),
        ]
        assert api.post(f"/api/v1/sessions/{session_id}/messages/", items, format="json").status_code == 201
        sessions[machine] = Session.objects.get(pk=session_id)
    return sessions


def test_stats_group_and_filter_by_machine(api, other_api, two_machines):
    body = api.get("/api/v1/stats/", {"group_by": "machine"}).json()
    rows = {row["key"]: (row["requests"], row["input_tokens"], row["sessions"]) for row in body["results"]}
    assert rows == {"build-01": (1, 1000, 1), "laptop": (1, 100, 1), None: (1, 7, 1)}
    only = api.get("/api/v1/stats/", {"group_by": "tool", "machine": "laptop"}).json()
    assert (only["totals"]["input_tokens"], only["totals"]["requests"]) == (100, 1)
    unlabelled = api.get("/api/v1/stats/", {"group_by": "session", "machine": ""}).json()
    assert [row["key"] for row in unlabelled["results"]] == [str(two_machines[""].pk)]
    by_session = api.get("/api/v1/stats/", {"group_by": "session"}).json()["results"]
    assert {row["machine"] for row in by_session} == {"laptop", "build-01", ""}
    assert other_api.get("/api/v1/stats/", {"group_by": "machine"}).json()["results"] == []
    assert [s["machine"] for s in api.get("/api/v1/sessions/", {"machine": "laptop"}).json()["results"]] == ["laptop"]


def test_the_machine_is_fixed_once_a_session_has_messages_and_recounts_exactly(api, two_machines):
    laptop = two_machines["laptop"]
    response = api.patch(f"/api/v1/sessions/{laptop.pk}/", {"machine": "other"}, format="json")
    assert response.status_code == 400 and "machine" in response.json()["errors"]
    empty = api.post("/api/v1/sessions/", {"user_id": "alice"}, format="json").json()
    assert api.patch(f"/api/v1/sessions/{empty['id']}/", {"machine": "ci-7"}, format="json").json()["machine"] == (
        "ci-7"
    )
    assert UsageDaily.objects.filter(tenant=api.tenant, machine="build-01").exists()
    assert rollup_drift(tenant=api.tenant) == {"hourly": [], "daily": [], "session_model": []}
    out = io.StringIO()
    call_command("ace_recount", "--rollups", "--fix", stdout=out)
    assert rollup_drift(tenant=api.tenant) == {"hourly": [], "daily": [], "session_model": []}
    assert api.get("/api/v1/stats/", {"group_by": "machine"}).json()["totals"]["input_tokens"] == 1107


@pytest.mark.parametrize("machine", ["x" * 101, "a/b", "../etc", ".hidden", "two words", 7], ids=lambda m: str(m)[:12])
def test_a_bad_machine_name_is_400(api, machine):
    response = api.post("/api/v1/sessions/", {"user_id": "alice", "machine": machine}, format="json")
    assert response.status_code == 400 and "machine" in response.json()["errors"]
    if isinstance(machine, str):  # a form field is always a string
        response = upload(api, ("seed.jsonl", SEED.read_bytes()), machine=machine)
        assert response.status_code == 400 and "machine" in response.json()["errors"]
    assert not Session.objects.filter(tenant=api.tenant).exists()


def test_local_imports_label_sessions_with_this_host_or_the_machine_given(api, tmp_path):
    copy = tmp_path / "seed.jsonl"
    copy.write_bytes(SEED.read_bytes())
    call_command("ace_import", str(copy), "--tenant", api.tenant.name, stdout=io.StringIO())
    assert Session.objects.get(tenant=api.tenant).machine == local_machine() != ""
    other = tmp_path / "qwen.jsonl"
    other.write_bytes(QWEN.read_bytes())
    with pytest.raises(CommandError, match="1 line skipped"):  # the fixture's broken line: exit status 3
        args = [str(other), "--tenant", api.tenant.name, "--machine", "nas"]
        call_command("ace_import", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert Session.objects.get(tenant=api.tenant, tool="qwen-code").machine == "nas"


def test_an_upload_without_a_machine_keeps_the_old_behaviour(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    response = upload(api, ("seed.jsonl", SEED.read_bytes()))
    assert response.status_code == 201
    assert response.json()["files"][0]["stored_bytes"] == len(SEED.read_bytes())
    assert Session.objects.get(tenant=api.tenant).machine == ""
    assert (tmp_path / "uploads" / str(api.tenant.pk) / "seed.jsonl").exists()
    listed = api.get("/api/v1/imports/files/").json()["results"]
    assert [(f["path"], f["machine"], f["stored_bytes"]) for f in listed] == [
        ("seed.jsonl", "", len(SEED.read_bytes()))
    ]


def test_appending_from_an_offset(api, other_api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    data = QWEN.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    name = ".qwen/projects/-home-dev-weather/chats/8e6b3f2a.jsonl"
    stored = tmp_path / "uploads" / str(api.tenant.pk) / "~machines" / "laptop" / name

    def part(content, offset):
        return upload(api, ("c.jsonl", content), paths=[name], offsets=[offset], machine="laptop")

    first = part(data[:cut], 0)
    assert first.status_code == 201 and first.json()["files"][0]["stored_bytes"] == cut
    # Beyond what the server holds: a 400 naming where to resume, nothing written.
    beyond = part(data[cut + 10 :], cut + 10)
    assert beyond.status_code == 400
    assert f"send from offset {cut}" in beyond.json()["errors"]["offsets.0"][0]
    assert stored.stat().st_size == cut
    # Bytes that differ from the server's: a 409, nothing written.
    changed = part(b"X" + data[1:cut], 0)
    assert changed.status_code == 409 and "send it whole" in changed.json()["detail"]
    assert stored.read_bytes() == data[:cut]
    # A retry of bytes the server holds, with the new ones: the held ones are skipped.
    rest = part(data[cut - 100 :], cut - 100)
    assert rest.status_code == 201 and rest.json()["files"][0]["stored_bytes"] == len(data)
    assert stored.read_bytes() == data
    again = part(data[cut:], cut).json()
    assert (again["messages"], again["files"][0]["stored_bytes"]) == (0, len(data))
    session = Session.objects.get(tenant=api.tenant)
    assert session.machine == "laptop"
    lines = data.count(b"\n")
    record = ImportedFile.objects.get(tenant=api.tenant)
    assert record.lines_read == lines
    # What the server holds, for this tenant and machine only.
    listed = api.get("/api/v1/imports/files/", {"machine": "laptop", "path": name}).json()["results"]
    assert [(f["path"], f["stored_bytes"], f["session"]) for f in listed] == [(name, len(data), str(session.pk))]
    assert 0 < listed[0]["imported_bytes"] <= len(data)
    assert api.get("/api/v1/imports/files/", {"machine": "desktop"}).json()["results"] == []
    assert api.get("/api/v1/imports/files/").json()["results"] == []  # uploads without a machine: none
    assert other_api.get("/api/v1/imports/files/", {"machine": "laptop"}).json()["results"] == []
    assert api.get("/api/v1/imports/files/", {"machine": "a/b"}).status_code == 400


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"offsets": [0, 0]}, "offsets"),
        ({"offsets": [-1]}, "offsets"),
        ({"offsets": ["x"]}, "offsets"),
        ({"paths": ["notes.json"]}, "files.0"),
    ],
    ids=["offsets-count", "negative", "not-a-number", "json-outside-a-document-folder"],
)
def test_bad_offsets_and_names_are_400_and_write_nothing(api, settings, tmp_path, fields, field):
    settings.ACE_DATA_DIR = tmp_path
    response = upload(api, ("seed.jsonl", SEED.read_bytes()), **fields)
    assert response.status_code == 400, response.json()
    assert any(key.startswith(field) for key in response.json()["errors"]), response.json()
    assert not Session.objects.filter(tenant=api.tenant).exists()
    uploads = tmp_path / "uploads"
    assert not uploads.exists() or not [p for p in uploads.rglob("*") if p.is_file()]


def test_the_admin_lists_and_filters_sessions_by_machine(staff, api, two_machines):
    url = reverse("admin:sessions_app_session_changelist")
    html = staff.get(url).content.decode()
    assert "build-01" in html and "laptop" in html and "?machine=laptop" in html
    filtered = staff.get(url, {"machine": "laptop"})
    assert list(filtered.context["cl"].queryset) == [two_machines["laptop"]]


def test_the_dashboard_breaks_usage_down_by_machine(staff, api, two_machines):
    url = reverse("admin:sessions_app_usage_dashboard")
    window = {"tenant": api.tenant.pk, "since": "2026-03-01", "until": "2026-03-01"}
    response = staff.get(url, window)
    breakdown = next(b for b in response.context["breakdowns"] if b["name"] == "machine")
    assert [(row["key"], row["input_tokens"]) for row in breakdown["rows"]] == [
        ("build-01", 1000),
        ("laptop", 100),
        (None, 7),
    ]
    assert "By machine" in response.content.decode()
    narrowed = staff.get(url, {**window, "machine": "laptop"})
    assert narrowed.context["totals"]["input_tokens"] == 100
    csv = b"".join(staff.get(url, {**window, "format": "csv", "table": "machine"}).streaming_content).decode()
    assert csv.lstrip("\ufeff").splitlines()[0].startswith("machine,") and "build-01,1," in csv


def test_sessions_imported_before_machines_are_continued_not_duplicated(api, settings, tmp_path):
    """A session imported before sessions had machines ('') is continued by this host's files; its machine stays
    '' (its usage is counted under it)."""
    legacy = SessionFactory(
        tenant=api.tenant, tool="openclaw", agent_session_id="7c1e0d52-3a94-4f6b-b8e2-91d0c4a5f7e3", user_id="u"
    )
    assert legacy.machine == ""
    copy = tmp_path / "seed.jsonl"
    copy.write_bytes(SEED.read_bytes())
    past = time.time() - 3600
    os.utime(copy, (past, past))
    call_command("ace_import", str(copy), "--tenant", api.tenant.name, stdout=io.StringIO())
    (session,) = Session.objects.filter(tenant=api.tenant)
    assert (session.pk, session.machine, session.messages) == (legacy.pk, "", 6)
    # An upload labelled with a machine continues it too (it has none); a second machine's is its own.
    settings.ACE_DATA_DIR = tmp_path / "server"
    response = upload(api, ("seed.jsonl", SEED.read_bytes()), machine="laptop")
    assert (response.status_code, response.json()["sessions_created"]) == (201, 0)
    assert Session.objects.filter(tenant=api.tenant).count() == 1
