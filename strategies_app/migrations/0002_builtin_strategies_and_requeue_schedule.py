import json
import uuid

from django.db import migrations
from django.utils import timezone

# The built-in strategies as they were when this migration was written (later edits to prompts.BUILTIN
# reach new tenants through the service, not this migration).
from strategies_app.prompts import BUILTIN

REQUEUE_TASK = "strategies_app.tasks.runs_requeue"
REQUEUE_NAME = "Requeue lost strategy runs"


def forwards(apps, schema_editor):
    Tenant = apps.get_model("sessions_app", "Tenant")
    Strategy = apps.get_model("strategies_app", "Strategy")
    StrategyVersion = apps.get_model("strategies_app", "StrategyVersion")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    five, _ = IntervalSchedule.objects.get_or_create(every=5, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=REQUEUE_NAME,
        defaults={
            "task": REQUEUE_TASK,
            "interval": five,
            "enabled": True,
            "description": "Strategy runs a broker outage kept from the queue, or whose worker died, are sent again.",
        },
    )
    for tenant in Tenant.objects.all():
        for type, spec in BUILTIN.items():
            spec = dict(spec)
            name = spec.pop("name")
            if Strategy.objects.filter(tenant=tenant, name=name).exists():
                continue
            now = timezone.now()
            strategy = Strategy.objects.create(
                id=uuid.uuid4(), tenant=tenant, name=name, type=type, builtin=True, created_at=now, updated_at=now, **spec
            )
            settings = {k: spec[k] for k in spec if k not in ("description", "prompt")}
            StrategyVersion.objects.create(
                strategy=strategy,
                version=1,
                type=type,
                description=spec["description"],
                prompt=spec["prompt"],
                extractor=strategy.extractor,
                settings=settings,
                actor="install",
                created_at=now,
            )
            if strategy.schedule_minutes:
                interval, _ = IntervalSchedule.objects.get_or_create(every=strategy.schedule_minutes, period="minutes")
                strategy.periodic_task = PeriodicTask.objects.create(
                    name=f"memory strategy {name} of {tenant.name} ({strategy.pk})",
                    task="strategies_app.tasks.strategy_scheduled",
                    kwargs=json.dumps({"strategy_id": str(strategy.pk)}),
                    interval=interval,
                    enabled=True,
                )
                strategy.save(update_fields=["periodic_task"])


def backwards(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(
        task__in=[REQUEUE_TASK, "strategies_app.tasks.strategy_scheduled"]
    ).delete()
    apps.get_model("strategies_app", "Strategy").objects.filter(builtin=True).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("strategies_app", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
