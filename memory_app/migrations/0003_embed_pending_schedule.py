from django.db import migrations

TASK = "memory_app.tasks.embed_pending"
NAME = "Embed records and messages missing a vector"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_five, _ = IntervalSchedule.objects.get_or_create(every=5, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": every_five,
            "enabled": True,
            "description": "Catches up with embeddings a broker outage or an embedder change left behind.",
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME, task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0002_embeddings"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
