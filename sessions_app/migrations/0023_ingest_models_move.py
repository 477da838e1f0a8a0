# The ingest models move to ingest_app (issue 31), their rows kept: ingest_app 0001 took them into its state over
# these tables; here they leave sessions_app's state (the database is not touched: ingest_app 0002 renames the
# tables), and their content types follow them, before post_migrate would create fresh ones under ingest_app: the
# permissions granted on them and the admin log entries about them keep pointing at them.

from django.db import migrations

MODELS = ("importsource", "importedfile", "telemetryrecord")


def content_types_move(apps, from_label: str, to_label: str) -> None:
    """Each model's content type row takes the new app label. A row already there under it (a migrate that stopped
    between ingest_app 0001 and this one lets post_migrate create them) holds nothing yet: it goes, with its
    fresh permissions, for the old row, which holds the grants and the log."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        old = ContentType.objects.filter(app_label=from_label, model=model).first()
        if old is None:
            continue
        ContentType.objects.filter(app_label=to_label, model=model).delete()
        old.app_label = to_label
        old.save(update_fields=["app_label"])


def forwards(apps, schema_editor):
    content_types_move(apps, "sessions_app", "ingest_app")


def backwards(apps, schema_editor):
    content_types_move(apps, "ingest_app", "sessions_app")


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),  # a content type deleted takes its permissions
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
        migrations.RunPython(forwards, backwards),
    ]
