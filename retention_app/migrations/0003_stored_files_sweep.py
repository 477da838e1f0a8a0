"""The hourly sweep of stored files nothing refers to (retention_app.tasks.sweep_stored_files)."""

from django.db import migrations

TASK = "retention_app.tasks.sweep_stored_files"
NAME = "Sweep stored files"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    hourly, _ = IntervalSchedule.objects.get_or_create(every=1, period="hours")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": hourly,
            "enabled": True,
            "description": "Deletes stored uploads and export zips that nothing refers to any more (a rolled-back "
            "write, a delete that never ran), once they are an hour old.",
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME, task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("retention_app", "0002_tables_and_content_types"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
