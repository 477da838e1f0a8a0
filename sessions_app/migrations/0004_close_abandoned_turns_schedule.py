from django.db import migrations

TASK = "sessions_app.tasks.close_abandoned_turns"
NAME = "Close abandoned chat turns"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": every_minute,
            "enabled": True,
            "description": "Turns with no checkpoint or completion for ACE_TURN_TIMEOUT_SECONDS are closed "
            "with finish_reason error; their partial content is kept.",
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME, task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0003_chat_turns"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
