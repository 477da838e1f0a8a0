"""The ingest models' move from sessions_app to ingest_app (sessions_app 0023, ingest_app 0001-0002) keeps every
row: migrated back to before it, rows are written to the old tables as the old code wrote them; migrated forward,
they are the new models' rows with the same ids and relations, their content types (and so the permissions
granted on them and the admin log about them) follow, and the tables carry the indexes and constraints the models
name. The move migrates back and forward again."""

import datetime

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ingest_app.models import ImportedFile, ImportSource, TelemetryRecord
from sessions_app.models import Message
from tests.support.api import make_client
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("sessions_app", "0022_finite_numbers"), ("ingest_app", None)]
MODELS = (ImportSource, ImportedFile, TelemetryRecord)
OLD_TABLES = ("sessions_app_importsource", "sessions_app_importedfile", "sessions_app_telemetryrecord")


def migrate(targets=None) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    ContentType.objects.clear_cache()
    return executor


def tables() -> set[str]:
    return set(connection.introspection.table_names())


def old_rows(executor, tenant, session, message) -> dict:
    """Rows written through the models as they were before the move (sessions_app's)."""
    old = executor.loader.project_state(BEFORE[0]).apps
    source = old.get_model("sessions_app", "ImportSource").objects.create(
        tenant_id=tenant.pk, path="/srv/logs", tool="claude-code", user_id="xiaoming"
    )
    file = old.get_model("sessions_app", "ImportedFile").objects.create(
        tenant_id=tenant.pk, source_id=source.pk, session_id=session.pk, path="/srv/logs/a.jsonl", offset=1234,
        carry={"open": 1}, pending=1,
    )  # fmt: skip
    record = old.get_model("sessions_app", "TelemetryRecord").objects.create(
        tenant_id=tenant.pk, session_id=session.pk, message_id=message.pk, kind="event",
        name="claude_code.api_request", time=datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC), key="k1",
        attributes={"model": "m"},
    )  # fmt: skip
    return {"source": source.pk, "file": file.pk, "record": record.pk}


def assert_moved(ids: dict, tenant, session, message) -> None:
    source = ImportSource.objects.get(pk=ids["source"])
    assert (source.tenant_id, source.path, source.tool, source.user_id) == (
        tenant.pk, "/srv/logs", "claude-code", "xiaoming",
    )  # fmt: skip
    file = ImportedFile.objects.get(pk=ids["file"])
    assert (file.source_id, file.session_id, file.offset, file.carry, file.pending) == (
        source.pk, session.pk, 1234, {"open": 1}, 1,
    )  # fmt: skip
    assert list(source.files.all()) == [file]
    record = TelemetryRecord.objects.get(pk=ids["record"])
    assert (record.session_id, record.message_id, record.attributes) == (session.pk, message.pk, {"model": "m"})
    assert list(session.telemetry.all()) == [record]


def test_the_ingest_models_move_with_their_rows_content_types_and_constraints(django_user_model):
    api = make_client("acme")
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="xiaoming")
    message = Message.objects.create(tenant=api.tenant, session=session, seq=1, role="assistant")
    auditor = django_user_model.objects.create_user("auditor", "auditor@example.com", "not-used", is_staff=True)
    try:
        executor = migrate(BEFORE)
        assert set(OLD_TABLES) <= tables()
        assert not {model._meta.db_table for model in MODELS} & tables()
        ids = old_rows(executor, api.tenant, session, message)
        # Granted and logged under sessions_app, before the move.
        old_types = {
            ct.model: ct
            for ct in ContentType.objects.filter(
                app_label="sessions_app", model__in=[model._meta.model_name for model in MODELS]
            )
        }
        assert len(old_types) == 3
        auditor.user_permissions.add(
            Permission.objects.get(content_type=old_types["importedfile"], codename="view_importedfile")
        )
        LogEntry.objects.create(
            user=auditor, content_type=old_types["importsource"], object_id=str(ids["source"]), object_repr="/srv/logs",
            action_flag=CHANGE,
        )  # fmt: skip
        # A post_migrate that ran between ingest_app 0001 and sessions_app 0023 made a fresh, empty type: it gives way.
        fresh = ContentType.objects.create(app_label="ingest_app", model="telemetryrecord")
        fresh_permission = Permission.objects.create(content_type=fresh, codename="view_telemetryrecord", name="-")

        migrate()
        assert_moved(ids, api.tenant, session, message)
        assert not set(OLD_TABLES) & tables()
        for model in MODELS:
            moved = ContentType.objects.get_for_model(model)
            assert moved.pk == old_types[model._meta.model_name].pk
        assert not ContentType.objects.filter(pk=fresh.pk).exists()
        assert not Permission.objects.filter(pk=fresh_permission.pk).exists()
        assert not ContentType.objects.filter(app_label="sessions_app", model__in=old_types).exists()
        assert django_user_model.objects.get(pk=auditor.pk).has_perm("ingest_app.view_importedfile")
        entry = LogEntry.objects.get(user=auditor)
        assert entry.get_edited_object() == ImportSource.objects.get(pk=ids["source"])
        assert entry.get_admin_url() == f"/admin/ingest_app/importsource/{ids['source']}/change/"
        # The renamed tables carry what the models name (the checks, uniques and indexes).
        with connection.cursor() as cursor:
            for model in MODELS:
                held = connection.introspection.get_constraints(cursor, model._meta.db_table)
                named = {item.name for item in (*model._meta.constraints, *model._meta.indexes)}
                assert named <= set(held), (model, named - set(held))

        # And back, and forward again.
        migrate(BEFORE)
        assert set(OLD_TABLES) <= tables()
        assert ContentType.objects.get(pk=old_types["importedfile"].pk).app_label == "sessions_app"
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM sessions_app_telemetryrecord WHERE id = %s", [ids["record"]])
            assert cursor.fetchone() == (1,)
    finally:
        migrate()  # the leaves, for the tests that follow
    assert_moved(ids, api.tenant, session, message)
    assert ContentType.objects.get_for_model(ImportedFile).pk == old_types["importedfile"].pk
