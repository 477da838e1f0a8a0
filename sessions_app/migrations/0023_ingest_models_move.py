# The ingest models move to ingest_app (issue 31), their rows kept: ingest_app 0001 took them into its state over
# these tables; here they leave sessions_app's state (the database is not touched: ingest_app 0002 renames the
# tables), and their content types follow them, before post_migrate would create fresh ones under ingest_app: the
# permissions granted on them and the admin log entries about them keep pointing at them.

from django.db import migrations

from platform_kit.migration_operations import CONTENT_TYPES_MOVE_DEPENDENCIES, ContentTypesMove


class Migration(migrations.Migration):
    dependencies = [
        *CONTENT_TYPES_MOVE_DEPENDENCIES,
        ("sessions_app", "0022_finite_numbers"),
        ("ingest_app", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ImportedFile"),
                migrations.DeleteModel(name="ImportSource"),
                migrations.DeleteModel(name="TelemetryRecord"),
            ],
            database_operations=[],
        ),
        ContentTypesMove("sessions_app", "ingest_app", ("importsource", "importedfile", "telemetryrecord")),
    ]
