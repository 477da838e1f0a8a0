# Ready to be distributed by tenant (docs/scaling.md): delivery attempts and webhook changes carry tenant_id (from
# their delivery or webhook), and the attempts' unique key includes it, last.

from django.db import migrations, models

from platform_kit.migration_operations import tenant_added


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0032_sum_bigint"),
        ("webhooks_app", "0005_old_delivery_texts"),
    ]

    operations = [
        *tenant_added(
            "webhookattempt",
            table="webhooks_app_webhookattempt",
            parent_table="webhooks_app_webhookdelivery",
            parent_column="delivery_id",
        ),
        *tenant_added(
            "webhookchange",
            table="webhooks_app_webhookchange",
            parent_table="webhooks_app_webhook",
            parent_column="webhook_id",
        ),
        migrations.RemoveConstraint("webhookattempt", "attempt_delivery_number"),
        migrations.AddConstraint(
            "webhookattempt",
            models.UniqueConstraint(fields=["delivery", "number", "tenant"], name="attempt_delivery_number"),
        ),
    ]
