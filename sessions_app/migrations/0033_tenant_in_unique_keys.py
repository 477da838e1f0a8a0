# Ready to be distributed by tenant (docs/scaling.md): the budget usage rows carry tenant_id (from their budget),
# and the unique keys of the smaller tables include it, last, so the lookups by their first columns keep using
# them. A turn's one user and one assistant message become foreign keys with unique (message, tenant) keys (a
# one-to-one field's unique index cannot include tenant_id). Every ON CONFLICT of these keys names the new columns.
# The big tables' keys are rebuilt concurrently in 0034.

from django.db import migrations, models
from django.db.models import Q

from platform_kit.migration_operations import tenant_added


def _unique(model_name, name, old_fields, condition=None):
    """The constraint `name` of `model_name`, from `old_fields` to `old_fields` + tenant."""
    options = {"condition": condition} if condition is not None else {}
    return [
        migrations.RemoveConstraint(model_name, name),
        migrations.AddConstraint(
            model_name, models.UniqueConstraint(fields=[*old_fields, "tenant"], name=name, **options)
        ),
    ]


def _message_of_turn(related_name):
    return models.ForeignKey(
        on_delete=models.deletion.CASCADE, related_name=related_name, to="sessions_app.message", db_index=False
    )


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0032_sum_bigint")]

    operations = [
        *tenant_added(
            "budgetusage",
            table="sessions_app_budgetusage",
            parent_table="sessions_app_budget",
            parent_column="budget_id",
        ),
        *_unique("budgetusage", "budget_usage_key", ["budget", "bucket"]),
        *_unique("budgetcrossing", "budget_crossing_once", ["budget", "period_start", "threshold"]),
        *_unique("sessionmodelusage", "session_model_day_usage_key", ["session", "model", "day"]),
        *_unique("stateversion", "state_session_version", ["session", "version"]),
        *_unique("turn", "turn_session_external_id", ["session", "external_id"], Q(external_id__isnull=False)),
        migrations.AlterField("turn", "user_message", _message_of_turn("turn_as_user")),
        migrations.AlterField("turn", "assistant_message", _message_of_turn("turn_as_assistant")),
        migrations.AddConstraint(
            "turn", models.UniqueConstraint(fields=["user_message", "tenant"], name="turn_user_message")
        ),
        migrations.AddConstraint(
            "turn", models.UniqueConstraint(fields=["assistant_message", "tenant"], name="turn_assistant_message")
        ),
    ]
