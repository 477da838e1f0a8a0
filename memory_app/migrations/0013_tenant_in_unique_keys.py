# Ready to be distributed by tenant (docs/scaling.md): record revisions, the embedding progress of sessions and the
# links from records to the sessions and messages they came from carry tenant_id (from their record or session),
# and every unique key includes it, last. The links become models of their own (RecordSourceSession,
# RecordSourceMessage) on the same tables, which an automatic many-to-many table cannot be given a column.

from django.db import migrations, models

from platform_kit.migration_operations import tenant_added


def _link(name, table, target, target_model):
    """The state of an automatic many-to-many table, as a model of its own (its table unchanged)."""
    return migrations.CreateModel(
        name=name,
        fields=[
            ("id", models.BigAutoField(primary_key=True, serialize=False, verbose_name="ID")),
            (
                "record",
                models.ForeignKey(on_delete=models.deletion.CASCADE, related_name="+", to="memory_app.record"),
            ),
            (target, models.ForeignKey(on_delete=models.deletion.CASCADE, related_name="+", to=target_model)),
        ],
        options={"db_table": table, "unique_together": {("record", target)}},
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0012_record_import_move"),
        ("sessions_app", "0032_sum_bigint"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                _link("RecordSourceSession", "memory_app_record_source_sessions", "session", "sessions_app.session"),
                _link("RecordSourceMessage", "memory_app_record_source_messages", "message", "sessions_app.message"),
                migrations.AlterField(
                    "record",
                    "source_sessions",
                    models.ManyToManyField(
                        blank=True,
                        related_name="records",
                        through="memory_app.RecordSourceSession",
                        to="sessions_app.session",
                    ),
                ),
                migrations.AlterField(
                    "record",
                    "source_messages",
                    models.ManyToManyField(
                        blank=True,
                        related_name="records",
                        through="memory_app.RecordSourceMessage",
                        to="sessions_app.message",
                    ),
                ),
            ]
        ),
        *tenant_added(
            "recordsourcesession",
            table="memory_app_record_source_sessions",
            parent_table="memory_app_record",
            parent_column="record_id",
        ),
        *tenant_added(
            "recordsourcemessage",
            table="memory_app_record_source_messages",
            parent_table="memory_app_record",
            parent_column="record_id",
        ),
        *tenant_added(
            "recordrevision",
            table="memory_app_recordrevision",
            parent_table="memory_app_record",
            parent_column="record_id",
        ),
        *tenant_added(
            "sessionembeddingprogress",
            table="memory_app_sessionembeddingprogress",
            parent_table="sessions_app_session",
            parent_column="session_id",
        ),
        migrations.AlterUniqueTogether("recordsourcesession", set()),
        migrations.AlterUniqueTogether("recordsourcemessage", set()),
        migrations.AddConstraint(
            "recordsourcesession",
            models.UniqueConstraint(fields=["record", "session", "tenant"], name="record_source_session_unique"),
        ),
        migrations.AddConstraint(
            "recordsourcemessage",
            models.UniqueConstraint(fields=["record", "message", "tenant"], name="record_source_message_unique"),
        ),
        migrations.RemoveConstraint("recordrevision", "record_revision_unique"),
        migrations.AddConstraint(
            "recordrevision",
            models.UniqueConstraint(fields=["record", "revision", "tenant"], name="record_revision_unique"),
        ),
    ]
