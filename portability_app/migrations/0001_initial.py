# The tenant export model moves here from sessions_app (issue 31), its rows with it: this migration only tells
# Django's state that the model is portability_app's, still on sessions_app's table (no SQL); sessions_app 0025
# forgets it there; 0002 renames the table and moves its content type (the admin's permissions keep their ids).

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("sessions_app", "0024_retention_models_move"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TenantExport",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("succeeded", "Succeeded"),
                                    ("failed", "Failed"),
                                    ("withdrawn", "Withdrawn"),
                                ],
                                default="queued",
                                max_length=16,
                            ),
                        ),
                        ("requested_by", models.CharField(help_text="api:<key prefix>, admin:<user>", max_length=255)),
                        ("path", models.CharField(blank=True, help_text="The zip, once written", max_length=1000)),
                        ("size", models.BigIntegerField(blank=True, help_text="Bytes of the zip", null=True)),
                        (
                            "counts",
                            models.JSONField(blank=True, default=dict, help_text="Rows per file, as in the zip's manifest"),
                        ),
                        ("error", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "tenant",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="sessions_app.tenant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "sessions_app_tenantexport",
                        "ordering": ["-created_at"],
                        "indexes": [models.Index(fields=["tenant", "-created_at"], name="tenantexport_tenant_created")],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
