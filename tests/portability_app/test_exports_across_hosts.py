"""Issue 34: a tenant export written by a worker on one host downloads from any other (each host its own
ACE_DATA_DIR, one database). The worker here is a real Celery worker process with its own data folder, on the test
broker; this process is the other host's web. The zip is in the storage every host reads, never on a host's disk."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import zipfile

import pytest
import redis
from django.test import override_settings

from portability_app.models import ExportStatus, TenantExport
from tests.conftest import TEST_BROKER_URL, on_test_broker
from tests.portability_app.test_tenant_export import fill, open_zip
from tests.support.api import make_client
from tests.support.processes import ROOT, process_env
from tests.support.waiting import wait_for


def start_worker(data_dir, **extra) -> subprocess.Popen:
    """A Celery worker of another host: its own data folder, the test database and broker."""
    env = process_env(ACE_DATA_DIR=str(data_dir), CELERY_BROKER_URL=TEST_BROKER_URL, **extra)
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "aceproject", "worker", "-P", "solo", "-Q", "celery",
         "-n", f"host1-{os.getpid()}@%h", "-l", "WARNING", "--without-heartbeat", "--without-gossip",
         "--without-mingle"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def stop(worker: subprocess.Popen) -> None:
    os.killpg(worker.pid, signal.SIGTERM)
    try:
        worker.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)


def export_through_another_host(api, data_dir, **worker_env) -> TenantExport:
    """Request an export here; a worker of the host whose data folder is `data_dir` writes it."""
    redis.Redis.from_url(TEST_BROKER_URL).delete("celery")  # what earlier tests may have left
    with on_test_broker():
        worker = start_worker(data_dir, **worker_env)
        try:
            export_id = api.post("/api/v1/exports/").json()["id"]
            finished = (ExportStatus.SUCCEEDED, ExportStatus.FAILED)
            assert wait_for(lambda: TenantExport.objects.get(pk=export_id).status in finished, 90)
        finally:
            stop(worker)
    export = TenantExport.objects.get(pk=export_id)
    assert export.status == ExportStatus.SUCCEEDED, export.error
    return export


def download(api, data_dir, export_id) -> tuple[object, bytes, float]:
    with override_settings(ACE_DATA_DIR=data_dir):
        started = time.perf_counter()
        answer = api.get(f"/api/v1/exports/{export_id}/download/")
        content = b"".join(answer.streaming_content) if answer.status_code == 200 else b""
        return answer, content, time.perf_counter() - started


@pytest.mark.django_db(transaction=True)
def test_an_export_written_by_a_worker_on_one_host_downloads_from_another(settings, tmp_path):
    host1, host2 = tmp_path / "host1", tmp_path / "host2"
    settings.ACE_DATA_DIR = host2
    api = make_client("acme")
    fill(api, "xiaoming")
    export = export_through_another_host(api, host1)

    answer, content, _ = download(api, host2, export.pk)
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/zip"
    assert answer["Content-Disposition"] == f'attachment; filename="acme-{export.pk}.zip"'
    assert int(answer["Content-Length"]) == len(content) == export.size > 0
    manifest, files = open_zip(content)
    assert manifest["tenant"] == "acme" and manifest["files"]["messages.jsonl"] == 3
    assert {row["user_id"] for row in files["sessions.jsonl"]} == {"xiaoming"}
    assert zipfile.ZipFile(io.BytesIO(content)).testzip() is None
    # Neither host keeps it on its disk: a third one, never used before, serves it the same.
    assert not (host1 / "exports").exists() and not (host2 / "exports").exists()
    third, again, _ = download(api, tmp_path / "host3", export.pk)
    assert third.status_code == 200 and again == content
