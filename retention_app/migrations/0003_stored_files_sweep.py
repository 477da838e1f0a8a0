"""The hourly sweep of stored files nothing refers to (retention_app.tasks.sweep_stored_files)."""

from django.db import migrations

from platform_kit.migration_operations import IntervalTaskScheduled


class Migration(migrations.Migration):
    dependencies = [
        ("retention_app", "0002_tables_and_content_types"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        IntervalTaskScheduled(
            "Sweep stored files",
            "retention_app.tasks.sweep_stored_files",
            1,
            "hours",
            "Deletes stored uploads and export zips that nothing refers to any more (a rolled-back write, a delete "
            "that never ran), once they are an hour old.",
        )
    ]
