# RecordImport's table takes this app's name (memory_app_recordimport → portability_app_recordimport; its rows,
# its identity sequence, its unique constraint and foreign keys go with it), and its content type row moves here.

from django.db import migrations

from platform_kit.migration_operations import CONTENT_TYPES_MOVE_DEPENDENCIES, ContentTypesMove


class Migration(migrations.Migration):
    dependencies = [
        *CONTENT_TYPES_MOVE_DEPENDENCIES,
        ("portability_app", "0003_recordimport"),
        ("memory_app", "0012_record_import_move"),
    ]

    operations = [
        migrations.AlterModelTable(name="recordimport", table=None),
        ContentTypesMove("memory_app", "portability_app", ("recordimport",)),
    ]
