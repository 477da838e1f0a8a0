"""The zips of succeeded exports written before they went to the storage every host reads (platform_kit.storage):
each is copied from this host's data folder (ACE_DATA_DIR/exports/<tenant id>/<id>.zip) into the storage, its row
then names it there, and the file on disk is deleted. A row whose zip this host does not hold is left as it was
(its download answers 404, as it did on any other host)."""

from pathlib import Path

from django.core.files import File
from django.db import migrations


def zips_to_storage(apps, schema_editor):
    from platform_kit.storage import ace_storage

    TenantExport = apps.get_model("portability_app", "TenantExport")
    storage = ace_storage()
    for export in TenantExport.objects.filter(status="succeeded").exclude(path="").iterator():
        local = Path(export.path)
        if not local.is_absolute() or not local.is_file():
            continue
        name = f"{export.tenant_id}/exports/{export.pk}.zip"
        if not storage.exists(name):
            with local.open("rb") as handle:
                storage.save(name, File(handle, name=name))
        TenantExport.objects.filter(pk=export.pk).update(path=name, size=storage.size(name))
        local.unlink()


class Migration(migrations.Migration):
    dependencies = [
        ("portability_app", "0004_recordimport_table"),
        ("platform_kit", "0003_stored_object"),
    ]

    operations = [migrations.RunPython(zips_to_storage, migrations.RunPython.noop)]
