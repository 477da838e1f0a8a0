"""Stored files nothing refers to any more are swept (platform_kit.storage.stored_files_sweep, hourly): an upload's
part whose write was rolled back, a failed export's zip, a deleted tenant's files, a delete that never ran. Files in
use, files of a kind no app registered and files younger than the grace time are kept. Against the database storage
here, and against an S3 server in test_storage_s3.py (`sweep_scenario`)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.db import connection
from django.utils import timezone

from ingest_app.models import UploadSegment
from platform_kit.models import StoredObject
from platform_kit.storage import ace_storage, stored_files_sweep
from portability_app.models import ExportStatus, TenantExport
from retention_app.tasks import sweep_stored_files
from tests.ingest_app.test_imports import CLAUDE_AGENT
from tests.ingest_app.test_uploads_across_hosts import AGENT, send
from tests.support.agent_logs import DATA
from tests.support.api import make_client

pytestmark = pytest.mark.django_db


def sweep_scenario(tmp_path, *, sweep) -> dict:
    """Files in use and files nothing refers to, of two tenants and a deleted one; `sweep()` runs the sweep. Returns
    what it counted; asserts which files are left."""
    api = make_client("acme")
    tenant = api.tenant
    answer = send(api, tmp_path / "host1", AGENT, (DATA / CLAUDE_AGENT).read_bytes())
    assert answer.status_code == 201, answer.content
    (segment,) = UploadSegment.objects.filter(tenant=tenant)
    storage = ace_storage()

    def put(name: str) -> str:
        assert storage.save(name, ContentFile(b"zip or log bytes")) == name
        return name

    succeeded = TenantExport.objects.create(tenant=tenant, status=ExportStatus.SUCCEEDED, requested_by="api:x")
    failed = TenantExport.objects.create(tenant=tenant, status=ExportStatus.FAILED, requested_by="api:x")
    kept = {
        segment.storage_name,
        put(f"{tenant.pk}/exports/{succeeded.pk}.zip"),
        put(f"{tenant.pk}/notes/readme.txt"),  # a kind no app registered: not the sweep's
    }
    swept = {
        put(f"{tenant.pk}/uploads/{uuid.uuid4()}"),  # its segment's row was rolled back
        put(f"{tenant.pk}/exports/{failed.pk}.zip"),
        put(f"{tenant.pk}/exports/{uuid.uuid4()}.zip"),  # its export deleted
        put(f"{uuid.uuid4()}/uploads/{uuid.uuid4()}"),  # a deleted tenant's
    }
    counts = sweep()
    left = {name for name in kept | swept if storage.exists(name)}
    assert left == kept, (sorted(left - kept), sorted(kept - left))
    assert counts == {"seen": len(kept) - 1 + len(swept), "kept": len(kept) - 1, "deleted": len(swept)}
    return counts


def test_files_nothing_refers_to_are_swept_and_the_others_kept(tmp_path):
    def sweep():
        # Written a moment ago: older than the grace time only by setting their clock back.
        StoredObject.objects.update(created_at=timezone.now() - timedelta(hours=2))
        return stored_files_sweep()

    sweep_scenario(tmp_path, sweep=sweep)


def test_a_file_younger_than_the_grace_time_is_kept(tmp_path):
    """An upload's part is written before its row commits: the sweep leaves what is younger than an hour."""
    name = ace_storage().save(f"{make_client('acme').tenant.pk}/uploads/{uuid.uuid4()}", ContentFile(b"x"))
    assert stored_files_sweep() == {"seen": 1, "kept": 1, "deleted": 0}
    StoredObject.objects.filter(name=name).update(created_at=timezone.now() - timedelta(minutes=61))
    assert sweep_stored_files() == {"seen": 1, "kept": 0, "deleted": 1}  # the hourly task
    assert not ace_storage().exists(name)


def test_the_sweep_is_scheduled_hourly():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.every, i.period, t.enabled FROM django_celery_beat_periodictask t"
            " JOIN django_celery_beat_intervalschedule i ON i.id = t.interval_id WHERE t.task = %s",
            ["retention_app.tasks.sweep_stored_files"],
        )
        assert cursor.fetchall() == [(1, "hours", True)]
