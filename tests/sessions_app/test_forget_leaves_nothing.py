"""Forgetting a user stays forgotten: after `POST /api/v1/users/{id}/forget/` no table and no file under ACE_DATA_DIR
holds their id or their words — not their uploaded logs, not the telemetry naming them, not a budget scoped to
them, not a webhook delivery about them, not an export — and an upload that resumes their log at an offset is
refused instead of importing it all again. Another user's data stays."""

import io
import json
import os
import uuid
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps
from django.db import connection

from ingest_app.models import TelemetryRecord
from platform_kit.models import StoredObject
from platform_kit.server_errors import server_error_record
from platform_kit.storage import stored_chunks
from portability_app.models import ExportStatus, TenantExport
from portability_app.tasks import tenant_export_run
from sessions_app.models import Budget, BudgetUsage, Message, Session
from tests.ingest_app.otlp_payloads import metrics_payload, post
from tests.webhooks_app.test_deliveries import subscribe
from webhooks_app.models import WebhookDelivery

pytestmark = pytest.mark.django_db

USER, SECRET = "xm-7f3a91", "zebrateapot"  # the forgotten user's id and a word only they wrote
OTHER, OTHER_SECRET = "xh-52c0de", "kiwiharmonica"
LOG_SESSION, OTHER_LOG_SESSION = str(uuid.uuid4()), str(uuid.uuid4())
# Scanned as text: every text, character, JSON, tsvector and array column of every table.
_SCANNED_TYPES = ("text", "character varying", "character", "json", "jsonb", "tsvector", "ARRAY")


def claude_log(session_id: str, user: str, word: str) -> bytes:
    """A small Claude Code transcript of today: a prompt and an answer that both say `word`, 30 tokens."""
    now = datetime.now(UTC).replace(microsecond=0)
    common = {"sessionId": session_id, "cwd": f"/home/{user}/app", "version": "2.1.62", "isSidechain": False}
    lines = [
        {
            **common,
            "type": "user",
            "uuid": f"{session_id}-u1",
            "parentUuid": None,
            "timestamp": (now - timedelta(seconds=5)).isoformat().replace("+00:00", "Z"),
            "message": {"role": "user", "content": f"Tell me about the {word} again"},
        },
        {
            **common,
            "type": "assistant",
            "uuid": f"{session_id}-a1",
            "parentUuid": f"{session_id}-u1",
            "timestamp": now.isoformat().replace("+00:00", "Z"),
            "requestId": f"req-{session_id}",
            "message": {
                "id": f"msg-{session_id}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "text", "text": f"The {word} is on the shelf."}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 20, "output_tokens": 10},
            },
        },
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def upload(api, name: str, content: bytes, *, user_id: str, offset: int | None = None):
    from django.core.files.uploadedfile import SimpleUploadedFile

    body = {"files": [SimpleUploadedFile("log.jsonl", content)], "paths": [name], "machine": "laptop"}
    body["user_id"] = user_id
    if offset is not None:
        body["offsets"] = [offset]
    return api.post("/api/v1/imports/", body, format="multipart")


def log_name(user: str, session_id: str) -> str:
    return f".claude/projects/-home-{user}-app/{session_id}.jsonl"


def metrics_of(user: str) -> dict:
    """Claude Code metric points naming `user` (user.id only), one without a session."""
    payload = metrics_payload()
    for metric in payload["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]:
        for point in (metric.get("sum") or metric.get("gauge"))["dataPoints"]:
            drop = ("user.email", "user.account_uuid", "user.id", "session.id")
            point["attributes"] = [a for a in point["attributes"] if a["key"] not in drop]
            point["attributes"].append({"key": "user.id", "value": {"stringValue": user}})
    return payload


def fill(api, user: str, word: str, log_session: str) -> None:
    """The user everywhere: an uploaded log, API messages, a memory record, telemetry."""
    uploaded = upload(api, log_name(user, log_session), claude_log(log_session, user, word), user_id=user)
    assert uploaded.status_code == 201, uploaded.json()
    assert uploaded.json()["messages"] == 2
    session = api.post("/api/v1/sessions/", {"user_id": user, "name": f"{word} plans"}, format="json").json()
    answer = api.post(
        f"/api/v1/sessions/{session['id']}/messages/",
        [
            {"role": "user", "content": f"My {word} broke"},
            {"role": "assistant", "content": "Sorry", "model": "m", "request_id": "r1", "input_tokens": 40},
        ],
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    record = api.post(
        "/api/v1/records/", {"user_id": user, "type": "profile", "content": f"Owns a {word}"}, format="json"
    )
    assert record.status_code == 201, record.json()
    assert post(api, "/v1/metrics", metrics_of(user)).status_code == 200


def tables_holding(*needles: str) -> dict[str, int]:
    """{table.column: rows} of every table whose text holds one of `needles`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.data_type = ANY(%s)"
            " ORDER BY 1, 2",
            [list(_SCANNED_TYPES)],
        )
        columns = cursor.fetchall()
        scanned = {table for table, _ in columns}
        for model in apps.get_models():  # every model with a text or JSON field is among them
            kinds = {field.get_internal_type() for field in model._meta.concrete_fields}
            if kinds & {"TextField", "CharField", "JSONField"}:
                assert model._meta.db_table in scanned, model._meta.label
        found = {}
        quote = connection.ops.quote_name
        for table, column in columns:
            cursor.execute(
                f"SELECT count(*) FROM {quote(table)} WHERE {quote(column)}::text ILIKE ANY(%s)",
                [[f"%{needle}%" for needle in needles]],
            )
            if rows := cursor.fetchone()[0]:
                found[f"{table}.{column}"] = rows
    return found


def files_holding(root, *needles: str) -> list[str]:
    """The files under `root` whose name or bytes (a zip's: its files' bytes) hold one of `needles`."""
    found = []
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = os.path.join(folder, name)
            held = any(needle in os.path.relpath(path, root) for needle in needles)
            if not held and name in files and os.path.isfile(path):
                with open(path, "rb") as handle:
                    content = handle.read()
                if zipfile.is_zipfile(path):
                    with zipfile.ZipFile(path) as archive:
                        content += b"".join(archive.read(member) for member in archive.namelist())
                held = any(needle.encode() in content for needle in needles)
            if held:
                found.append(os.path.relpath(path, root))
    return found


def stored_holding(*needles: str) -> list[str]:
    """The files of the storage every host reads (platform_kit.storage) whose bytes (a zip's: its files' bytes)
    hold one of `needles`: `exports` or `uploads`, by what each name says it is."""
    found = []
    for name in StoredObject.objects.order_by("name").values_list("name", flat=True):
        content = b"".join(stored_chunks(name))
        if zipfile.is_zipfile(io.BytesIO(content)):
            with zipfile.ZipFile(io.BytesIO(content)) as archive:
                content += b"".join(archive.read(member) for member in archive.namelist())
        if any(needle.encode() in content for needle in needles):
            found.append(name.split("/")[1])
    return found


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path / "data"
    return settings.ACE_DATA_DIR


def test_after_forgetting_no_table_and_no_file_holds_the_user(api, data_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        subscribe(api, "https://hooks.example.com/ace", events=["record.created", "budget.crossed"])
        scoped = {"name": "xm daily", "scope": "user_id", "scope_value": USER, "limit": 50, "period": "day"}
        assert api.post("/api/v1/budgets/", scoped, format="json").status_code == 201
        whole = api.post("/api/v1/budgets/", {"name": "all daily", "limit": 100000, "period": "day"}, format="json")
        assert whole.status_code == 201
    # Each write commits (as in production): the budgets count it, the webhooks hear of it.
    for user, word, log_session in ((USER, SECRET, LOG_SESSION), (OTHER, OTHER_SECRET, OTHER_LOG_SESSION)):
        with django_capture_on_commit_callbacks(execute=True):
            fill(api, user, word, log_session)
    export = TenantExport.objects.create(tenant=api.tenant, requested_by="test")
    assert tenant_export_run(str(export.pk)) == "succeeded"
    server_error_record(request_id="r-1", path=f"/api/v1/users/{USER}/forget/", status=503)  # a first try failed
    needles = (USER, SECRET, LOG_SESSION)
    held = tables_holding(*needles)
    for table in (
        "sessions_app_message",
        "ingest_app_telemetryrecord",
        "sessions_app_budget",
        "ingest_app_importedfile",
        "memory_app_record",
        "webhooks_app_webhookdelivery",
    ):
        assert any(column.startswith(f"{table}.") for column in held), (table, held)
    assert WebhookDelivery.objects.filter(event="budget.crossed").exists()
    assert {"uploads"} <= {path.split(os.sep)[0] for path in files_holding(data_dir, *needles)}  # this host's copy
    assert set(stored_holding(*needles)) == {"uploads", "exports"}
    budget_used = BudgetUsage.objects.get(budget_id=whole.json()["id"]).used
    assert budget_used == 2 * (30 + 40)  # each user: the log's call and the API's

    dry = api.post(f"/api/v1/users/{USER}/forget/", {"confirm": USER, "dry_run": True}, format="json").json()
    assert dry["deleted"]["ingest_app.ImportedFile (uploaded copy)"] == 1  # the dry run counts the file
    assert dry["deleted"]["sessions_app.Budget"] == 1
    assert files_holding(data_dir / "uploads", *needles)  # and leaves it
    with django_capture_on_commit_callbacks(execute=True):
        answer = api.post(f"/api/v1/users/{USER}/forget/", {"confirm": USER}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["deleted"] == dry["deleted"]

    assert tables_holding(*needles) == {}
    assert files_holding(data_dir, *needles) == []
    assert stored_holding(*needles) == []
    assert stored_holding(OTHER_SECRET) == ["uploads"]
    # The other user keeps everything, and the tenant's budget keeps only their usage.
    assert Message.objects.filter(session__user_id=OTHER, content__contains=OTHER_SECRET).count() == 3
    assert files_holding(data_dir / "uploads", OTHER_SECRET)
    assert BudgetUsage.objects.get(budget_id=whole.json()["id"]).used == 30 + 40
    assert TenantExport.objects.get(pk=export.pk).status == ExportStatus.WITHDRAWN


def test_resuming_a_forgotten_upload_at_an_offset_is_refused_and_a_whole_one_starts_anew(api, data_dir):
    log = claude_log(LOG_SESSION, USER, SECRET)
    name = log_name(USER, LOG_SESSION)
    assert upload(api, name, log, user_id=USER).status_code == 201
    assert api.post(f"/api/v1/users/{USER}/forget/", {"confirm": USER}, format="json").status_code == 200

    # What `ace_push` does when it resumes: the bytes after those it sent before.
    more = log.replace(b"again", b"once more").splitlines(keepends=True)[0]
    resumed = upload(api, name, more, user_id=USER, offset=len(log))

    assert resumed.status_code == 400, resumed.json()
    assert "send from offset 0" in resumed.json()["detail"]
    assert not Session.objects.filter(tenant=api.tenant, user_id=USER).exists()
    assert not Message.objects.filter(tenant=api.tenant, content__contains=SECRET).exists()
    assert files_holding(data_dir, USER, SECRET) == []
    # Sent whole again, it is a new upload: imported from its first byte.
    again = upload(api, name, log, user_id=USER)
    assert again.status_code == 201, again.json()
    assert again.json()["messages"] == 2
    assert Session.objects.filter(tenant=api.tenant, user_id=USER).count() == 1


def test_telemetry_naming_the_user_goes_with_them(api, data_dir):
    """Metric points without a session: only their attributes name the user."""
    assert post(api, "/v1/metrics", metrics_of(USER)).status_code == 200
    points = TelemetryRecord.objects.filter(tenant=api.tenant).count()
    assert points >= 5
    assert post(api, "/v1/metrics", metrics_of(OTHER)).status_code == 200
    body = api.post(f"/api/v1/users/{USER}/forget/", {"confirm": USER}, format="json").json()
    assert body["deleted"]["ingest_app.TelemetryRecord"] == points
    assert tables_holding(USER) == {}
    assert "ingest_app_telemetryrecord.attributes" in tables_holding(OTHER)


def test_a_server_log_is_not_imported_again_after_forgetting_only_its_new_lines(api, data_dir, tmp_path):
    """A log on the server (an import source's, one given to `ace_import`) is not ours to delete: its next scan
    must not bring the forgotten lines back, only lines written afterwards."""
    from ingest_app.pipeline import import_path

    log = tmp_path / "home" / log_name(USER, LOG_SESSION)
    log.parent.mkdir(parents=True)
    log.write_bytes(claude_log(LOG_SESSION, USER, SECRET))
    assert import_path(tenant=api.tenant, path=tmp_path / "home", user_id=USER).messages == 2
    body = api.post(f"/api/v1/users/{USER}/forget/", {"confirm": USER}, format="json").json()

    assert import_path(tenant=api.tenant, path=tmp_path / "home", user_id=USER).messages == 0
    assert not Message.objects.filter(tenant=api.tenant, content__contains=SECRET).exists()
    assert body["deleted"]["ingest_app.ImportedFile (server file, read position kept)"] == 1
    later = claude_log(LOG_SESSION, USER, "pineapple").splitlines(keepends=True)[0].replace(b"-u1", b"-u2")
    with log.open("ab") as handle:
        handle.write(later)
    assert import_path(tenant=api.tenant, path=tmp_path / "home", user_id=USER).messages == 1
    assert [m.content for m in Message.objects.filter(tenant=api.tenant)] == ["Tell me about the pineapple again"]
    assert tables_holding(SECRET) == {}


def test_a_hard_limit_reached_by_the_forgotten_user_is_lifted(api, data_dir):
    budget = api.post(
        "/api/v1/budgets/", {"name": "team", "limit": 100, "period": "day", "hard_limit": True}, format="json"
    ).json()
    theirs, others = (api.post("/api/v1/sessions/", {"user_id": u}, format="json").json()["id"] for u in (USER, OTHER))
    call = {"role": "assistant", "content": "ok", "model": "m", "request_id": "r1", "input_tokens": 150}
    assert api.post(f"/api/v1/sessions/{theirs}/messages/", call, format="json").status_code == 201
    assert (
        api.post(f"/api/v1/sessions/{others}/messages/", {**call, "input_tokens": 5}, format="json").status_code == 429
    )

    assert api.post(f"/api/v1/users/{USER}/forget/", {"confirm": USER}, format="json").status_code == 200

    assert Budget.objects.get(pk=budget["id"]).blocked_until is None
    assert api.get(f"/api/v1/budgets/{budget['id']}/").json()["used"] == 0
    assert (
        api.post(f"/api/v1/sessions/{others}/messages/", {**call, "input_tokens": 5}, format="json").status_code == 201
    )
