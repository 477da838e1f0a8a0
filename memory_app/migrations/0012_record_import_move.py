# RecordImport, the memory import's ledger, moved to portability_app with the import (issue 31): portability_app
# 0003 took it over on this app's table; here memory_app's state forgets it (no SQL: portability_app 0004 renames
# the table).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0011_finite_confidence"),
        ("portability_app", "0003_recordimport"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="RecordImport")],
            database_operations=[],
        ),
    ]
