"""The storage every host reads (platform_kit.storage, issue 34): what keeping files there costs.

On the bench database (ACE_DATA_DIR=.ace/bench unless set), for the database storage and, with --s3, for an S3
store served by moto on loopback (moto[server], requirements-dev.txt; its own speed dominates, so its figures say
the path works and what it costs at most, not what a real store does):

1. a file of --mb MB written to the storage from a local file, then streamed back (MB/s each way, the chunks'
   largest size);
2. a tenant export's zip of that size downloaded through the API from a host whose data folder never held it
   (time to the last byte, through Django's test client: no network);
3. an uploaded log of --mb MB in --parts appended parts: a host that never saw it makes its copy from the storage
   (64 segments, the most a file has before they are merged, and 1), and a host whose copy is current checks it
   (one row read).

    .venv/bin/python bench/storage.py [--mb 64] [--s3]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402


def timed(function):
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--s3", action="store_true", help="also against moto's S3 server on loopback")
    args = parser.parse_args()
    benchlib.setup_django()
    backends = [("database", None)]
    server = None
    if args.s3:
        server, options = s3_options()
        backends.append(("s3 (moto)", options))
    try:
        for label, options in backends:
            run(label, options, args.mb)
    finally:
        if server is not None:
            server.stop()


def s3_options():
    import boto3
    from moto.server import ThreadedMotoServer

    port = benchlib.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    ).create_bucket(Bucket="bench")
    return server, {
        "bucket_name": "bench", "endpoint_url": endpoint, "region_name": "us-east-1", "access_key": "x",
        "secret_key": "x", "default_acl": None, "file_overwrite": True,
    }  # fmt: skip


def run(label: str, options: dict | None, mb: int) -> None:
    from django.core.files import File
    from django.test import override_settings

    from platform_kit.storage import ace_storage, stored_chunks

    storages = None
    if options is not None:
        from django.conf import settings

        storages = {**settings.STORAGES, "ace": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}}
    with override_settings(**({"STORAGES": storages} if storages else {})):
        tenant_id = uuid.uuid4()
        size = mb << 20
        with tempfile.TemporaryFile() as source:
            block = os.urandom(1 << 20)
            for _ in range(mb):
                source.write(block)
            name = f"{tenant_id}/exports/bench.zip"
            _, wrote = timed(lambda: ace_storage().save(name, File(source, name=name)))
        largest = 0

        def read():
            nonlocal largest
            total = 0
            for chunk in stored_chunks(name):
                total, largest = total + len(chunk), max(largest, len(chunk))
            return total

        total, took = timed(read)
        assert total == size
        print(f"{label}: {mb} MB written in {wrote:.2f} s ({mb / wrote:.0f} MB/s), streamed back in {took:.2f} s "
              f"({mb / took:.0f} MB/s), chunks of at most {largest >> 10} KB")  # fmt: skip
        download(label, name, mb)
        upload_copy(label, mb)
        ace_storage().delete(name)


def download(label: str, name: str, mb: int) -> None:
    from django.core.files import File
    from django.test import override_settings

    from platform_kit.storage import ace_storage, stored_chunks
    from portability_app.models import ExportStatus, TenantExport
    from tests.support.api import make_client

    api = make_client(f"bench-storage-{uuid.uuid4().hex[:8]}")
    export = TenantExport.objects.create(tenant=api.tenant, requested_by="bench", status=ExportStatus.SUCCEEDED)
    target = f"{api.tenant.pk}/exports/{export.pk}.zip"
    with tempfile.TemporaryFile() as copy:
        for chunk in stored_chunks(name):
            copy.write(chunk)
        ace_storage().save(target, File(copy, name=target))
    TenantExport.objects.filter(pk=export.pk).update(path=target, size=mb << 20)
    with tempfile.TemporaryDirectory() as other_host, override_settings(ACE_DATA_DIR=Path(other_host)):

        def fetch():
            answer = api.get(f"/api/v1/exports/{export.pk}/download/")
            return sum(len(chunk) for chunk in answer.streaming_content), answer

        _, first = timed(fetch)  # the first request also checks the new API key
        (received, answer), took = timed(fetch)
    assert received == mb << 20 and int(answer["Content-Length"]) == received
    print(f"{label}: export of {mb} MB downloaded from another host in {took:.2f} s ({mb / took:.0f} MB/s; "
          f"{first:.2f} s for the first request, which also checks the new API key)")  # fmt: skip
    ace_storage().delete(target)
    TenantExport.objects.filter(pk=export.pk).delete()


def upload_copy(label: str, mb: int) -> None:
    from django.core.files.base import ContentFile
    from django.test import override_settings

    from ingest_app.models import UploadSegment
    from ingest_app.pipeline.upload_copies import upload_cache_refresh
    from platform_kit.storage import ace_storage
    from sessions_app.models import Tenant

    tenant = Tenant.objects.create(name=f"bench-storage-{uuid.uuid4().hex[:8]}")
    line = b'{"type":"user","message":{"role":"user","content":"' + b"x" * 900 + b'"}}\n'
    for parts in (64, 1):
        name = f"p{parts}/log.jsonl"
        per_part = (mb << 20) // parts
        for n in range(parts):
            segment = UploadSegment(tenant=tenant, path=name, start=n * per_part, length=per_part)
            body = (line * (per_part // len(line) + 1))[:per_part]
            ace_storage().save(segment.storage_name, ContentFile(body))
            segment.save()
        with tempfile.TemporaryDirectory() as new_host, override_settings(ACE_DATA_DIR=Path(new_host)):
            refresh = functools.partial(upload_cache_refresh, tenant=tenant, machine="", names=[name])
            _, made = timed(refresh)
            _, checked = timed(refresh)
        print(f"{label}: a {mb} MB upload in {parts} segments: copy made on a new host in {made:.2f} s "
              f"({mb / made:.0f} MB/s); a current copy checked in {checked * 1000:.1f} ms")  # fmt: skip
        for segment in UploadSegment.objects.filter(tenant=tenant):
            ace_storage().delete(segment.storage_name)
        UploadSegment.objects.filter(tenant=tenant).delete()


if __name__ == "__main__":
    main()
