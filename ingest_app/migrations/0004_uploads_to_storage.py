"""Uploaded log files kept only on this host's disk before they went to the storage every host reads: each copy
under ACE_DATA_DIR/uploads/<tenant id>/ becomes one segment (its whole bytes, into the storage), and the copy stays
as this host's cache (its modification time made its segment's); their `ImportedFile` rows are named as on every
host (`uploads/<tenant id>/…`, `ingest_app.pipeline.paths`) instead of by this host's absolute path."""

import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.db import migrations
from django.db.models import F, Func, Value
from django.utils import timezone

MACHINES_DIR = "~machines"


def uploads_to_storage(apps, schema_editor):
    from platform_kit.storage import ace_storage

    Tenant = apps.get_model("sessions_app", "Tenant")
    ImportedFile = apps.get_model("ingest_app", "ImportedFile")
    UploadSegment = apps.get_model("ingest_app", "UploadSegment")
    data_dir = Path(settings.ACE_DATA_DIR)
    uploads = data_dir / "uploads"
    old_prefix = f"{data_dir}{os.sep}uploads{os.sep}"
    ImportedFile.objects.filter(path__startswith=old_prefix).update(
        path=Func(F("path"), Value(len(str(data_dir)) + 2), function="substr")
    )
    if not uploads.is_dir():
        return
    storage = ace_storage()
    tenants = {str(pk) for pk in Tenant.objects.values_list("pk", flat=True)}
    for tenant_folder in sorted(uploads.iterdir()):
        if tenant_folder.name not in tenants or not tenant_folder.is_dir():
            continue
        for folder, folders, files in os.walk(tenant_folder):
            folders[:] = [name for name in folders if not name.startswith(".upload-")]  # a request's staging
            for file_name in files:
                path = Path(folder) / file_name
                parts = path.relative_to(tenant_folder).parts
                if parts[0] == MACHINES_DIR:
                    if len(parts) < 3:
                        continue
                    machine, name = parts[1], "/".join(parts[2:])
                else:
                    machine, name = "", "/".join(parts)
                if not path.is_file():
                    continue
                segment_id = uuid.uuid4()
                stored = f"{tenant_folder.name}/uploads/{segment_id}"
                with path.open("rb") as handle:
                    storage.save(stored, File(handle, name=stored))
                created = timezone.now()
                UploadSegment.objects.create(
                    id=segment_id, tenant_id=tenant_folder.name, machine=machine, path=name, start=0,
                    length=path.stat().st_size, created_at=created,
                )  # fmt: skip
                ns = (created - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
                os.utime(path, ns=(ns, ns))


class Migration(migrations.Migration):
    dependencies = [
        ("ingest_app", "0003_upload_segment"),
        ("platform_kit", "0003_stored_object"),
    ]

    operations = [migrations.RunPython(uploads_to_storage, migrations.RunPython.noop)]
