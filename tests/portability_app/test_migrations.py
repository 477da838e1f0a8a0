"""The moves of TenantExport (from sessions_app) and RecordImport (from memory_app) to portability_app (issue 31)
keep their rows, their content types and the permissions given on them."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory_app.models import Record
from portability_app.models import ExportStatus, RecordImport, TenantExport
from tests.support.api import make_client


@pytest.mark.django_db(transaction=True)
def test_the_models_move_to_portability_app_with_their_rows_and_content_types():
    tenant = make_client("acme").tenant
    content_type = ContentType.objects.get(app_label="portability_app", model="tenantexport")
    permission = Permission.objects.get(content_type=content_type, codename="view_tenantexport")
    imports_type = ContentType.objects.get(app_label="portability_app", model="recordimport")
    record = Record.objects.create(tenant=tenant, user_id="u", type="fact", content="Prefers tea")
    executor = MigrationExecutor(connection)
    executor.migrate([("portability_app", None)])  # and sessions_app 0025 and memory_app 0012, which depend on it
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO sessions_app_tenantexport (id, tenant_id, status, requested_by, path, size, counts,"
                " error, created_at) VALUES ('6f9619ff-8b86-d011-b42d-00cf4fc964ff', %s, 'succeeded', 'api:old',"
                " '/x.zip', 12, '{\"messages\": 3}', '', now())",
                [tenant.pk],
            )
            cursor.execute(
                "INSERT INTO memory_app_recordimport (tenant_id, origin_record_id, origin_tenant, record_id, outcome,"
                " external_sources, actor, imported_at) VALUES (%s, '0f9619ff-8b86-d011-b42d-00cf4fc964ff',"
                " 'initech', %s, 'created', '{}', 'command', now())",
                [tenant.pk, record.pk],
            )
        assert ContentType.objects.get(pk=content_type.pk).app_label == "sessions_app"
        assert ContentType.objects.get(pk=imports_type.pk).app_label == "memory_app"
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())  # the leaves, for the tests that follow
    export = TenantExport.objects.get(pk="6f9619ff-8b86-d011-b42d-00cf4fc964ff")
    assert (export.tenant_id, export.status, export.size, export.counts) == (
        tenant.pk,
        ExportStatus.SUCCEEDED,
        12,
        {"messages": 3},
    )
    assert TenantExport._meta.db_table == "portability_app_tenantexport"
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        indexes = connection.introspection.get_constraints(cursor, "portability_app_tenantexport")
    assert "portability_app_tenantexport" in tables and "sessions_app_tenantexport" not in tables
    assert "tenantexport_tenant_created" in indexes
    assert ContentType.objects.get(pk=content_type.pk).app_label == "portability_app"
    assert ContentType.objects.get(pk=imports_type.pk).app_label == "portability_app"
    imported = RecordImport.objects.get(origin_record_id="0f9619ff-8b86-d011-b42d-00cf4fc964ff")
    assert (imported.tenant_id, imported.record_id, imported.origin_tenant) == (tenant.pk, record.pk, "initech")
    assert "memory_app_recordimport" not in tables
    # Its identity column goes on numbering after the table's rename.
    later = RecordImport.objects.create(
        tenant=tenant, origin_record_id=record.pk, record=record, outcome="merged", actor="test"
    )
    assert later.pk > imported.pk
    assert Permission.objects.get(pk=permission.pk).content_type_id == content_type.pk
