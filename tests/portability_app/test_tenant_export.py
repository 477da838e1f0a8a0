"""A tenant's full export in the background: requested from the API or the admin, written by the real worker,
downloaded as a zip whose manifest counts the tenant's rows, with every table and no secret."""

import io
import json
import zipfile

from django.core.files.base import ContentFile
from django.test import Client

from platform_kit.storage import ace_storage
from portability_app.models import ExportStatus, TenantExport
from sessions_app.models import Message, Session, Tenant
from tests.support.api import make_client
from webhooks_app.models import Webhook

HOOK = "http://127.0.0.1:9/hook"
FEISHU = "https://open.feishu.cn/open-apis/bot/v2/hook/abc-123"


def fill(api, user_id: str) -> dict:
    """Some rows in the old tables and the new ones (budgets, retention, webhooks); returns the secrets used."""
    session = api.post("/api/v1/sessions/", {"user_id": user_id}, format="json").json()
    for n in range(3):
        answer = api.post(
            f"/api/v1/sessions/{session['id']}/messages/",
            {"role": "user", "content": f"{user_id} says {n}", "input_tokens": 10},
            format="json",
        )
        assert answer.status_code == 201, answer.json()
    webhook = api.post("/api/v1/webhooks/", {"url": HOOK, "events": ["import.finished"]}, format="json")
    assert webhook.status_code == 201, webhook.json()
    feishu_secret = f"feishu-secret-{user_id}"
    budget = api.post(
        "/api/v1/budgets/",
        {
            "name": f"day-{user_id}",
            "limit": 100000,
            "period": "day",
            "feishu_url": FEISHU,
            "feishu_secret": feishu_secret,
        },
        format="json",
    )
    assert budget.status_code == 201, budget.json()
    policy = api.put("/api/v1/retention/", {"message_content_days": 30, "roles": []}, format="json")
    assert policy.status_code == 200, policy.json()
    ttl = api.post("/api/v1/record-ttls/", {"record_type": "task", "ttl_days": 5}, format="json")
    assert ttl.status_code == 201, ttl.json()
    return {"webhook": webhook.json()["secret"], "feishu": feishu_secret, "session": session["id"]}


def open_zip(content: bytes) -> tuple[dict, dict[str, list[dict]]]:
    archive = zipfile.ZipFile(io.BytesIO(content))
    manifest = json.loads(archive.read("manifest.json"))
    files = {
        name: [json.loads(line) for line in archive.read(name).splitlines() if line]
        for name in archive.namelist()
        if name.endswith(".jsonl")
    }
    return manifest, files


def test_an_export_from_the_api_is_the_tenants_data_without_secrets(burst, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path  # the task runs in this process: it writes there too
    api, other = make_client("acme"), make_client("globex")
    secrets = fill(api, "xiaoming")
    other_secrets = fill(other, "zhangsan")

    early = api.post("/api/v1/exports/")
    assert early.status_code == 202, early.json()
    assert early.json()["status"] == "queued"
    burst()
    finished = api.get(f"/api/v1/exports/{early.json()['id']}/").json()
    assert finished["status"] == "succeeded", finished
    assert finished["requested_by"].startswith("api:")
    assert finished["size"] > 0

    download = api.get(f"/api/v1/exports/{finished['id']}/download/")
    assert download.status_code == 200
    assert download["Content-Type"] == "application/zip"
    assert download["Content-Disposition"].startswith("attachment;")
    content = b"".join(download.streaming_content)
    manifest, files = open_zip(content)

    tenant = Tenant.objects.get(name="acme")
    assert manifest["tenant"] == "acme"
    assert manifest["files"] == {name: len(rows) for name, rows in files.items() if name != "records.jsonl"} | {
        "records.jsonl": manifest["files"]["records.jsonl"]
    }
    assert {f"{name}.jsonl": count for name, count in finished["counts"].items()} == manifest["files"]
    assert manifest["files"]["sessions.jsonl"] == Session.objects.filter(tenant=tenant).count() == 1
    assert manifest["files"]["messages.jsonl"] == Message.objects.filter(tenant=tenant).count() == 3
    for name in ("budgets", "budget_changes", "retention_policies", "retention_events", "record_ttls", "webhooks"):
        assert manifest["files"][f"{name}.jsonl"] >= 1, name
    for name in ("budget_usage", "budget_crossings", "retention_runs", "record_imports", "webhook_deliveries"):
        assert f"{name}.jsonl" in files, name
    assert files["webhooks.jsonl"][0]["url"] == HOOK
    assert "secret" not in files["webhooks.jsonl"][0]
    assert "feishu_secret" not in files["budgets.jsonl"][0]
    assert files["budgets.jsonl"][0]["feishu_url"] == FEISHU
    whole = b"".join(
        zipfile.ZipFile(io.BytesIO(content)).read(name) for name in zipfile.ZipFile(io.BytesIO(content)).namelist()
    )
    assert secrets["webhook"].encode() not in whole
    assert secrets["feishu"].encode() not in whole
    # Only acme's rows: globex's session, webhook and budget are not in it.
    assert other_secrets["session"].encode() not in whole
    assert b"zhangsan" not in whole
    assert {row["tenant_id"] for row in files["messages.jsonl"] + files["webhooks.jsonl"]} == {str(tenant.pk)}

    # Another tenant sees none of it.
    assert other.get(f"/api/v1/exports/{finished['id']}/").status_code == 404
    assert other.get(f"/api/v1/exports/{finished['id']}/download/").status_code == 404
    assert other.get("/api/v1/exports/").json()["results"] == []
    listed = api.get("/api/v1/exports/").json()
    assert [row["id"] for row in listed["results"]] == [finished["id"]]
    # The zip is in the storage every host reads, whole; nothing of it is left on this host's disk.
    name = TenantExport.objects.get(pk=finished["id"]).path
    assert name == f"{tenant.pk}/exports/{finished['id']}.zip"
    assert ace_storage().size(name) == len(content) == TenantExport.objects.get(pk=finished["id"]).size
    assert not (tmp_path / "exports").exists()


def test_a_queued_export_cannot_be_downloaded(db):
    api = make_client("acme")
    queued = api.post("/api/v1/exports/")  # in this test's transaction: never committed, so never run
    assert queued.status_code == 202
    answer = api.get(f"/api/v1/exports/{queued.json()['id']}/download/")
    assert answer.status_code == 409
    assert "queued" in answer.json()["detail"]
    assert api.get("/api/v1/exports/not-an-id/").status_code == 404
    assert make_client("globex").get(f"/api/v1/exports/{queued.json()['id']}/download/").status_code == 404


def test_a_task_run_twice_writes_the_export_once(db, settings, tmp_path):
    from portability_app.tasks import tenant_export_run

    settings.ACE_DATA_DIR = tmp_path
    api = make_client("acme")
    fill(api, "xiaoming")
    export_id = api.post("/api/v1/exports/").json()["id"]
    assert tenant_export_run(export_id) == "succeeded"
    first = TenantExport.objects.get(pk=export_id)
    assert tenant_export_run(export_id) == "not queued"
    again = TenantExport.objects.get(pk=export_id)
    assert (again.status, again.finished_at, again.size) == (ExportStatus.SUCCEEDED, first.finished_at, first.size)
    assert first.counts["webhooks"] == 1


def test_the_admin_action_queues_exports_and_staff_download_them(burst, django_user_model, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    api = make_client("acme")
    fill(api, "xiaoming")
    tenant = Tenant.objects.get(name="acme")
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser(username="auditor", password="x", email=""))
    answer = admin.post(
        "/admin/sessions_app/tenant/", {"action": "export_data", "_selected_action": [tenant.pk]}, follow=True
    )
    assert answer.status_code == 200
    assert "Queued 1 export (acme); follow it in" in answer.content.decode()
    export = TenantExport.objects.get(tenant=tenant)
    assert export.requested_by == "admin:auditor"

    burst()
    export.refresh_from_db()
    assert export.status == "succeeded", export.error
    listing = admin.get("/admin/portability_app/tenantexport/").content.decode()
    url = f"/admin/portability_app/tenantexport/{export.pk}/download/"
    assert url in listing
    download = admin.get(url)
    assert download.status_code == 200
    manifest, files = open_zip(b"".join(download.streaming_content))
    assert manifest["tenant"] == "acme" and len(files["messages.jsonl"]) == 3

    # Not staff: the admin's login page, never the file.
    visitor = Client()
    visitor.force_login(django_user_model.objects.create_user(username="visitor", password="x"))
    refused = visitor.get(url)
    assert refused.status_code == 302 and "/admin/login/" in refused["Location"]
    # Staff without the permission to view exports: refused too.
    clerk = Client()
    clerk.force_login(django_user_model.objects.create_user(username="clerk", password="x", is_staff=True))
    assert clerk.get(url).status_code == 403
    assert Webhook.objects.filter(tenant=tenant).count() == 1


def test_the_sweep_queues_a_stranded_export_again_and_fails_one_whose_worker_went_away(burst):
    from datetime import timedelta

    from django.utils import timezone

    from portability_app.tasks import sweep_tenant_exports

    api = make_client("acme")
    long_ago = timezone.now() - timedelta(days=1)
    # Asked for while the broker refused: the row is committed, no task exists.
    stranded = TenantExport.objects.create(tenant=api.tenant, requested_by="api:test", created_at=long_ago)
    lost = TenantExport.objects.create(
        tenant=api.tenant,
        requested_by="api:test",
        status=ExportStatus.RUNNING,
        created_at=long_ago,
        started_at=long_ago,
    )
    recent = TenantExport.objects.create(tenant=api.tenant, requested_by="api:test")  # its task may still come

    assert sweep_tenant_exports() == {"requeued": 1, "failed": 1}

    burst()
    finished = api.get(f"/api/v1/exports/{stranded.pk}/").json()
    assert finished["status"] == "succeeded"
    lost.refresh_from_db()
    assert lost.status == ExportStatus.FAILED and "request another export" in lost.error
    recent.refresh_from_db()
    assert recent.status == ExportStatus.QUEUED


def test_forgetting_a_user_withdraws_the_export_files_that_hold_them(
    db, settings, tmp_path, django_capture_on_commit_callbacks
):
    """An export written before a user is forgotten holds them: its file goes with the forget, its row says why."""
    from portability_app.tasks import tenant_export_run
    from sessions_app.services.forget import user_forget

    settings.ACE_DATA_DIR = tmp_path
    api = make_client("acme")
    fill(api, "xiaoming")
    tenant = Tenant.objects.get(name="acme")
    export_id = api.post("/api/v1/exports/").json()["id"]
    assert tenant_export_run(export_id) == "succeeded"
    name = TenantExport.objects.get(pk=export_id).path
    with ace_storage().open(name) as handle, zipfile.ZipFile(handle) as archive:
        assert b"xiaoming" in b"".join(archive.read(member) for member in archive.namelist())

    dry = user_forget(tenant=tenant, user_id="xiaoming", actor="test", dry_run=True)
    assert dry.deleted["portability_app.TenantExport (file)"] == 1 and ace_storage().exists(name)
    with django_capture_on_commit_callbacks(execute=True):
        done = user_forget(tenant=tenant, user_id="xiaoming", actor="test")
    assert done.deleted["portability_app.TenantExport (file)"] == 1
    assert not ace_storage().exists(name)
    export = TenantExport.objects.get(pk=export_id)
    assert export.status == ExportStatus.WITHDRAWN and "forgotten" in export.error
    answer = api.get(f"/api/v1/exports/{export_id}/download/")
    assert answer.status_code == 409 and "a user it held was forgotten" in answer.json()["detail"]

    # A new export, written after the forget, is kept.
    later = api.post("/api/v1/exports/").json()["id"]
    assert tenant_export_run(later) == "succeeded"
    assert api.get(f"/api/v1/exports/{later}/download/").status_code == 200


def test_an_export_being_written_while_a_user_is_forgotten_is_withdrawn_as_it_finishes(
    db, settings, tmp_path, django_capture_on_commit_callbacks
):
    from portability_app.services.exports import tenant_export_claim, tenant_export_succeed
    from sessions_app.services.forget import user_forget

    settings.ACE_DATA_DIR = tmp_path
    api = make_client("acme")
    fill(api, "xiaoming")
    tenant = Tenant.objects.get(name="acme")
    export_id = api.post("/api/v1/exports/").json()["id"]
    claimed = tenant_export_claim(export_id=export_id)  # the worker started reading...
    user_forget(tenant=tenant, user_id="xiaoming", actor="test")  # ...when the user was forgotten
    name = f"{tenant.pk}/exports/{export_id}.zip"
    ace_storage().save(name, ContentFile(b"the rows it read before the forget"))
    with django_capture_on_commit_callbacks(execute=True):
        tenant_export_succeed(export_id=claimed.pk, name=name, size=34, counts={})
    assert not ace_storage().exists(name)
    assert TenantExport.objects.get(pk=export_id).status == ExportStatus.WITHDRAWN
