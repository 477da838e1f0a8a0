# The moved tables take ingest_app's names (ingest_app_importsource, …): a rename each, rows, indexes and constraints
# kept. The ids are UUIDs (no sequence to rename); the indexes and constraints named in the models keep their names,
# those Django named itself (the primary keys, the foreign keys and their indexes) keep their sessions_app_ prefix,
# as on a database migrated from the start: Django finds them by their columns.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ingest_app", "0001_initial"),
        ("sessions_app", "0023_ingest_models_move"),
    ]

    operations = [
        migrations.AlterModelTable(name="importsource", table=None),
        migrations.AlterModelTable(name="importedfile", table=None),
        migrations.AlterModelTable(name="telemetryrecord", table=None),
    ]
