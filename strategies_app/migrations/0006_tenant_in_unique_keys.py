# Ready to be distributed by tenant (docs/scaling.md): strategy versions, watermarks and run-record links carry
# tenant_id (from their strategy or run), and every unique key includes it, last. A strategy's one periodic task
# becomes a foreign key with a unique (periodic task, tenant) key.

from django.db import migrations, models

from platform_kit.migration_operations import tenant_added


def _unique(model_name, name, old_fields):
    return [
        migrations.RemoveConstraint(model_name, name),
        migrations.AddConstraint(model_name, models.UniqueConstraint(fields=[*old_fields, "tenant"], name=name)),
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        ("sessions_app", "0032_sum_bigint"),
        ("strategies_app", "0005_finite_thresholds"),
    ]

    operations = [
        *tenant_added(
            "strategyversion",
            table="strategies_app_strategyversion",
            parent_table="strategies_app_strategy",
            parent_column="strategy_id",
        ),
        *tenant_added(
            "watermark",
            table="strategies_app_watermark",
            parent_table="strategies_app_strategy",
            parent_column="strategy_id",
        ),
        *tenant_added(
            "runrecord",
            table="strategies_app_runrecord",
            parent_table="strategies_app_strategyrun",
            parent_column="run_id",
        ),
        *_unique("strategyversion", "strategy_version_unique", ["strategy", "version"]),
        *_unique("watermark", "watermark_unique", ["strategy", "session"]),
        *_unique("runrecord", "run_record_unique", ["run", "record", "action"]),
        migrations.AlterField(
            "strategy",
            "periodic_task",
            models.ForeignKey(
                blank=True,
                null=True,
                on_delete=models.deletion.SET_NULL,
                related_name="+",
                to="django_celery_beat.periodictask",
                db_index=False,
            ),
        ),
        migrations.AddConstraint(
            "strategy", models.UniqueConstraint(fields=["periodic_task", "tenant"], name="strategy_periodic_task")
        ),
    ]
