# The tenant export model moved to portability_app (issue 31): portability_app 0001 took it over on this app's
# table; here sessions_app's state forgets it (no SQL: the table and its rows stay, portability_app 0002 renames it).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0024_retention_models_move"),
        ("portability_app", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="TenantExport")],
            database_operations=[],
        ),
    ]
