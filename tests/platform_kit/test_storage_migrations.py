"""Upgrading a single-host install (issue 34): the export zips and uploaded logs it kept in its data folder move
into the storage every host reads (portability_app 0005, ingest_app 0004), and are served through another host."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from ingest_app.models import ImportedFile, UploadSegment
from ingest_app.pipeline.batch import fingerprint
from platform_kit.storage import ace_storage
from portability_app.models import ExportStatus, TenantExport
from tests.ingest_app.test_imports import CLAUDE
from tests.ingest_app.test_uploads_across_hosts import MAIN, send
from tests.support.agent_logs import DATA
from tests.support.api import make_client


@pytest.mark.django_db(transaction=True)
def test_an_upgraded_install_keeps_its_export_zips_and_uploads_in_the_storage(settings, tmp_path):
    old_host, other_host = tmp_path / "old", tmp_path / "other"
    settings.ACE_DATA_DIR = old_host
    api = make_client("acme")
    tenant = api.tenant
    data = (DATA / CLAUDE).read_bytes()
    half = data.index(b"\n", len(data) // 2) + 1
    executor = MigrationExecutor(connection)
    executor.migrate([("portability_app", "0004_recordimport_table"), ("ingest_app", "0002_table_names")])
    try:
        # What the version before kept: a zip in the data folder, an upload's copy and its import row.
        export = TenantExport.objects.create(tenant=tenant, requested_by="api:old", status=ExportStatus.SUCCEEDED)
        zip_path = old_host / "exports" / str(tenant.pk) / f"{export.pk}.zip"
        zip_path.parent.mkdir(parents=True)
        zip_path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
        TenantExport.objects.filter(pk=export.pk).update(path=str(zip_path), size=22)
        copy = old_host / "uploads" / str(tenant.pk) / "~machines" / "laptop" / MAIN
        copy.parent.mkdir(parents=True)
        copy.write_bytes(data[:half])
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO ingest_app_importedfile (id, tenant_id, path, tool, agent_session_id, size, head_hash,"
                ' "offset", carry, pending, lines_read, messages_imported, issues, last_error)'
                " VALUES (gen_random_uuid(), %s, %s, 'claude-code', '', %s, %s, %s, '{}', 0, 0, 0, 0, '')",
                [tenant.pk, str(copy), half, fingerprint(copy, half), half],
            )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    export.refresh_from_db()
    assert export.path == f"{tenant.pk}/exports/{export.pk}.zip" and export.size == 22
    assert not zip_path.exists()
    with override_settings(ACE_DATA_DIR=other_host):
        answer = api.get(f"/api/v1/exports/{export.pk}/download/")
    assert answer.status_code == 200 and b"".join(answer.streaming_content) == b"PK\x05\x06" + bytes(18)

    assert ImportedFile.objects.get(tenant=tenant).path == f"uploads/{tenant.pk}/~machines/laptop/{MAIN}"
    segment = UploadSegment.objects.get(tenant=tenant)
    assert (segment.machine, segment.path, segment.start, segment.length) == ("laptop", MAIN, 0, half)
    assert b"".join(ace_storage().open(segment.storage_name).chunks()) == data[:half]
    assert copy.read_bytes() == data[:half]  # kept, as the old host's cache
    # The rest of the file, through another host: read on from where the old host's import stopped.
    rest = send(api, other_host, MAIN, data[half:], offset=half)
    assert rest.status_code == 201, rest.json()
    assert rest.json()["files"][0]["stored_bytes"] == len(data)
    imported = rest.json()["files"][0]
    assert 0 < imported["lines_read"] <= data[half:].count(b"\n")  # from where it stopped, not from the start
    assert ImportedFile.objects.get(tenant=tenant).offset > half
