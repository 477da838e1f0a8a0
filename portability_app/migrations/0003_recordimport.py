# The memory import's ledger, RecordImport, moves here from memory_app (issue 31), its rows with it: state only,
# still on memory_app's table (no SQL); memory_app 0012 forgets it there; 0004 renames the table.

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0011_finite_confidence"),
        ("sessions_app", "0025_export_model_move"),
        ("portability_app", "0002_tenantexport_table"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RecordImport",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False, verbose_name="ID")),
                        (
                            "origin_record_id",
                            models.UUIDField(help_text="The record's id in the export", verbose_name="origin record ID"),
                        ),
                        (
                            "origin_tenant",
                            models.CharField(blank=True, help_text="The tenant the export came from", max_length=255),
                        ),
                        (
                            "outcome",
                            models.CharField(
                                choices=[
                                    ("created", "created with its history"),
                                    ("merged", "merged into a record saying the same"),
                                ],
                                max_length=8,
                            ),
                        ),
                        (
                            "external_sources",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                help_text="Exported sources not found here: {sessions: [...], messages: [...]}",
                            ),
                        ),
                        ("actor", models.CharField(max_length=255)),
                        ("imported_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        (
                            "record",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="imports",
                                to="memory_app.record",
                            ),
                        ),
                        (
                            "tenant",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="sessions_app.tenant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "memory_app_recordimport",
                        "ordering": ["-imported_at"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("tenant", "origin_record_id"), name="record_import_origin_unique"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
