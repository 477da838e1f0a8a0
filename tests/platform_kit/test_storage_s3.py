"""ACE_STORAGE=s3: the same behaviour through an S3-compatible object store (django-storages' S3Storage, boto3),
tested against a real S3 server on loopback: moto's server (moto[server], requirements-dev.txt), over HTTP, in a
thread of this process. The worker of the export test is another process, configured only by the ACE_S3_*
settings documented in docs/operations.md."""

from __future__ import annotations

import uuid

import boto3
import pytest
from django.core.files.base import ContentFile

from ingest_app.models import UploadSegment
from platform_kit.models import StoredObject
from platform_kit.storage import CHUNK_BYTES, ace_storage, stored_chunks
from tests.ingest_app import test_uploads_across_hosts as uploads_across_hosts
from tests.portability_app.test_exports_across_hosts import download, export_through_another_host
from tests.portability_app.test_tenant_export import fill, open_zip
from tests.support.api import make_client
from tests.support.processes import free_port

BUCKET = "ace-test"
KEYS = {"ACE_S3_ACCESS_KEY_ID": "testing", "ACE_S3_SECRET_ACCESS_KEY": "testing", "ACE_S3_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def s3_server():
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_server, settings):
    """STORAGES["ace"] as ACE_STORAGE=s3 makes it (aceproject/settings.py), on a new bucket of the moto server;
    returns the settings a worker process is given and a boto3 client of the bucket."""
    bucket = f"{BUCKET}-{uuid.uuid4().hex[:8]}"
    client = boto3.client(
        "s3", endpoint_url=s3_server, aws_access_key_id="testing", aws_secret_access_key="testing",
        region_name="us-east-1",
    )  # fmt: skip
    client.create_bucket(Bucket=bucket)
    env = {"ACE_STORAGE": "s3", "ACE_S3_BUCKET": bucket, "ACE_S3_ENDPOINT_URL": s3_server, **KEYS}
    options = {
        "bucket_name": bucket, "endpoint_url": s3_server, "region_name": "us-east-1", "access_key": "testing",
        "secret_key": "testing", "location": "", "addressing_style": None, "default_acl": None,
        "querystring_auth": True, "file_overwrite": True,
    }  # fmt: skip
    settings.STORAGES = {**settings.STORAGES, "ace": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}}
    yield env, client, bucket


def keys(client, bucket: str, prefix: str = "") -> list[str]:
    return sorted(item["Key"] for item in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))


def test_files_go_to_the_bucket_and_stream_back(db, s3):
    _, client, bucket = s3
    name = f"{uuid.uuid4()}/exports/big.zip"
    content = bytes(range(256)) * (CHUNK_BYTES // 128 + 3)  # a little over 2 MB
    assert ace_storage().save(name, ContentFile(content)) == name
    assert keys(client, bucket) == [name]
    assert ace_storage().size(name) == len(content)
    chunks = list(stored_chunks(name))
    assert b"".join(chunks) == content and max(map(len, chunks)) <= CHUNK_BYTES
    assert not StoredObject.objects.exists()  # nothing of it in the database
    ace_storage().delete(name)
    assert keys(client, bucket) == []
    with pytest.raises(FileNotFoundError):
        stored_chunks(name)


@pytest.mark.django_db(transaction=True)
def test_an_export_written_by_a_worker_on_one_host_downloads_from_another(s3, settings, tmp_path):
    env, client, bucket = s3
    settings.ACE_DATA_DIR = tmp_path / "host2"
    api = make_client("acme")
    fill(api, "xiaoming")
    export = export_through_another_host(api, tmp_path / "host1", **env)
    assert keys(client, bucket) == [f"{api.tenant.pk}/exports/{export.pk}.zip"]

    answer, content, _ = download(api, tmp_path / "host2", export.pk)
    assert answer.status_code == 200
    assert int(answer["Content-Length"]) == len(content) == export.size
    assert answer["Content-Disposition"] == f'attachment; filename="acme-{export.pk}.zip"'
    assert open_zip(content)[0]["files"]["messages.jsonl"] == 3
    assert not StoredObject.objects.exists()


def test_an_upload_continued_on_another_host_imports_as_on_one(db, s3, tmp_path):
    _, client, bucket = s3
    uploads_across_hosts.test_an_upload_continued_on_another_host_imports_as_on_one(db, tmp_path)
    segments = UploadSegment.objects.all()
    assert keys(client, bucket) == sorted(segment.storage_name for segment in segments)
    assert len(segments) == 2 * (3 + 1)  # both tenants: the main log's three parts, the agent's file
    assert not StoredObject.objects.exists()


def test_a_retry_through_another_host_and_the_refusals(db, s3, tmp_path):
    uploads_across_hosts.test_a_retry_through_another_host_is_idempotent_and_refusals_are_unchanged(db, tmp_path)


def test_forgetting_a_user_deletes_their_uploads_from_the_bucket(db, s3, tmp_path, django_capture_on_commit_callbacks):
    _, client, bucket = s3
    uploads_across_hosts.test_forgetting_a_user_through_one_host_deletes_their_files_everywhere(
        db, tmp_path, django_capture_on_commit_callbacks
    )
    assert keys(client, bucket) == [UploadSegment.objects.get().storage_name]


def test_files_nothing_refers_to_are_swept_from_the_bucket(db, s3, tmp_path):
    """One listing per tenant and kind gives each object's time: no request per file."""
    from datetime import timedelta

    from platform_kit.storage import stored_files_sweep
    from tests.platform_kit.test_storage_sweep import sweep_scenario

    _, client, bucket = s3
    sweep_scenario(tmp_path, sweep=lambda: stored_files_sweep(older_than=timedelta(0)))
    assert not StoredObject.objects.exists()
    assert len(keys(client, bucket)) == 3
    assert stored_files_sweep()["deleted"] == 0  # the objects are seconds old: within the grace time
