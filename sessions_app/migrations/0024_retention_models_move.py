# The retention models moved to retention_app (issue 31): they leave sessions_app's state only. Their tables
# stay as they are here; retention_app's 0002 renames them.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0023_ingest_models_move"),
        ("retention_app", "0001_initial"),
    ]
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="RetentionEvent"),
                migrations.DeleteModel(name="RetentionPolicy"),
                migrations.DeleteModel(name="RetentionRun"),
            ],
            database_operations=[],
        ),
    ]
