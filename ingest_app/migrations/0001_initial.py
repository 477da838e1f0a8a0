# The ingest models move here from sessions_app (issue 31), their rows kept: this migration only tells Django's
# state that ingest_app now has them, over the tables sessions_app created (db_table, for now); the database is not
# touched. sessions_app 0023 then drops them from sessions_app's state and moves their content types (so their
# permissions and admin log entries follow), and 0002 gives the tables ingest_app's names.

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import platform_kit.db


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("sessions_app", "0022_finite_numbers"),
    ]

    state_operations = [
        migrations.CreateModel(
            name="ImportSource",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False, verbose_name="ID")),
                ("path", models.CharField(help_text="A directory (or one file) on the server, e.g. ~/.claude/projects", max_length=1024)),
                ("tool", models.CharField(choices=[("auto", "auto (detect per file)"), ("claude-code", "Claude Code"), ("qwen-code", "Qwen Code"), ("openclaw", "OpenClaw"), ("codex", "Codex CLI"), ("gemini-cli", "Gemini CLI"), ("opencode", "OpenCode")], default="auto", max_length=16)),
                ("user_id", models.CharField(blank=True, help_text="Attribute the sessions to this user (default: the log's or the OS user)", max_length=255, verbose_name="user ID")),
                ("enabled", models.BooleanField(default=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ("last_scan_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("last_summary", models.JSONField(blank=True, default=dict, editable=False)),
                ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="import_sources", to="sessions_app.tenant")),
            ],
            options={
                "db_table": "sessions_app_importsource",
                "ordering": ["tenant", "path"],
                "constraints": [models.UniqueConstraint(fields=("tenant", "path"), name="importsource_tenant_path")],
            },
        ),
        migrations.CreateModel(
            name="ImportedFile",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False, verbose_name="ID")),
                ("path", models.TextField()),
                ("tool", models.CharField(blank=True, max_length=16)),
                ("agent_session_id", models.CharField(blank=True, max_length=255, verbose_name="agent session ID")),
                ("size", models.BigIntegerField(default=0, help_text="Bytes, when last imported")),
                ("mtime", models.DateTimeField(blank=True, null=True)),
                ("device", models.BigIntegerField(blank=True, null=True)),
                ("inode", models.BigIntegerField(blank=True, null=True)),
                ("head_hash", models.CharField(blank=True, help_text="SHA-256 of the first bytes: a different head means a replaced file", max_length=64)),
                ("offset", models.BigIntegerField(default=0, help_text="Bytes consumed: the next import starts here")),
                ("carry", models.JSONField(blank=True, default=dict, help_text="The parser's state at `offset`")),
                ("pending", models.IntegerField(default=0, help_text="Responses stored whose last lines have not arrived yet (completed in place when they do)")),
                ("lines_read", models.BigIntegerField(default=0)),
                ("messages_imported", models.BigIntegerField(default=0)),
                ("issues", models.IntegerField(default=0, help_text="Lines skipped or read with a caveat, all imports")),
                ("last_error", models.TextField(blank=True)),
                ("first_imported_at", models.DateTimeField(blank=True, null=True)),
                ("last_imported_at", models.DateTimeField(blank=True, null=True)),
                ("session", models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="sessions_app.session")),
                ("tenant", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="sessions_app.tenant")),
                ("source", models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="files", to="ingest_app.importsource")),
            ],
            options={
                "db_table": "sessions_app_importedfile",
                "ordering": ["path"],
                "indexes": [models.Index(fields=["source", "path"], name="importedfile_source")],
                "constraints": [models.UniqueConstraint(fields=("tenant", "path"), name="importedfile_tenant_path")],
            },
        ),
        migrations.CreateModel(
            name="TelemetryRecord",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(choices=[("event", "event (log record)"), ("metric", "metric point")], max_length=8)),
                ("name", models.CharField(max_length=255)),
                ("time", models.DateTimeField()),
                ("key", models.CharField(max_length=64)),
                ("attributes", models.JSONField(blank=True, default=dict)),
                ("resource", models.JSONField(blank=True, default=dict)),
                ("value", models.FloatField(blank=True, null=True)),
                ("sent_value", models.FloatField(blank=True, null=True)),
                ("start_time", models.DateTimeField(blank=True, null=True)),
                ("series", models.CharField(blank=True, max_length=64)),
                ("received_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ("message", models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="sessions_app.message")),
                ("session", models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="telemetry", to="sessions_app.session")),
                ("tenant", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="sessions_app.tenant")),
            ],
            options={
                "db_table": "sessions_app_telemetryrecord",
                "ordering": ["-time"],
                "indexes": [
                    models.Index(fields=["tenant", "-time"], name="telemetry_tenant_time"),
                    models.Index(fields=["session", "name"], name="telemetry_session_name"),
                    models.Index(condition=models.Q(("message__isnull", False)), fields=["message"], name="telemetry_message"),
                    models.Index(condition=models.Q(("series", ""), _negated=True), fields=["tenant", "series", "-time"], name="telemetry_series_time"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("tenant", "key"), name="telemetryrecord_tenant_key"),
                    models.CheckConstraint(condition=platform_kit.db.finite("value") & platform_kit.db.finite("sent_value"), name="telemetryrecord_value_finite"),
                ],
            },
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[])]
