"""The retention models' move from sessions_app to retention_app (issue 31) on a database that has them: migrated
back to before the move, rows are written to the old tables; migrated forward, they are all there with their ids,
the tables have retention_app's names, and the content types follow with their ids, so the admin's permissions,
the grants of them and the admin's change log stay attached."""

import uuid

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from retention_app.models import RetentionEvent, RetentionPolicy, RetentionRun
from tests.support.api import make_client

OLD_TABLES = ("sessions_app_retentionpolicy", "sessions_app_retentionrun", "sessions_app_retentionevent")


def tables() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


@pytest.mark.django_db(transaction=True)
def test_the_move_keeps_every_row_id_and_content_type(django_user_model):
    acme = make_client("acme")
    tenant_id = acme.tenant.pk
    policy_id, run_id = uuid.uuid4(), uuid.uuid4()
    auditor = django_user_model.objects.create_user("auditor", is_staff=True)
    executor = MigrationExecutor(connection)
    executor.migrate([("retention_app", None)])  # before the move: sessions_app 0023
    try:
        assert set(OLD_TABLES) <= tables()
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO sessions_app_retentionpolicy (id, tenant_id, message_content_days, roles, created_at, "
                "updated_at) VALUES (%s, %s, 30, '[\"toolResult\"]', now(), now())",
                [policy_id, tenant_id],
            )
            cursor.execute(
                "INSERT INTO sessions_app_retentionrun (id, tenant_id, dry_run, trigger, started_at, messages_purged, "
                "records_expired, records_purged, error) VALUES (%s, %s, false, 'command', now(), 7, 1, 2, '')",
                [run_id, tenant_id],
            )
            cursor.execute(
                "INSERT INTO sessions_app_retentionevent (tenant_id, action, actor, subject_id, after, created_at) "
                "VALUES (%s, 'policy_set', 'api', %s, '{\"message_content_days\": 30}', now()), "
                "(%s, 'ttl_created', 'admin:auditor', 'x', NULL, now()) RETURNING id",
                [tenant_id, str(policy_id), tenant_id],
            )
            event_ids = sorted(pk for (pk,) in cursor.fetchall())
        # The content types as the old code had them (moved back by 0002's reverse): a group granted a policy
        # permission, the admin's log of a change to the policy.
        policy_type = ContentType.objects.get(app_label="sessions_app", model="retentionpolicy")
        run_type = ContentType.objects.get(app_label="sessions_app", model="retentionrun")
        change_policy = Permission.objects.get(content_type=policy_type, codename="change_retentionpolicy")
        auditors = Group.objects.create(name="auditors")
        auditors.permissions.add(change_policy)
        auditor.groups.add(auditors)
        logged = LogEntry.objects.create(
            user=auditor, content_type=policy_type, object_id=str(policy_id), object_repr="acme", action_flag=CHANGE
        )
        # A content type of retention_app's made meanwhile (post_migrate after a migrate stopped between 0001 and
        # 0002), with a grant and a log entry of its own: they move to the one that was there first.
        early_type = ContentType.objects.create(app_label="retention_app", model="retentionrun")
        early_view = Permission.objects.create(content_type=early_type, codename="view_retentionrun", name="Can view")
        auditor.user_permissions.add(early_view)
        early_log = LogEntry.objects.create(
            user=auditor, content_type=early_type, object_id=str(run_id), object_repr="run", action_flag=CHANGE
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())  # the leaves, for the tests that follow
        ContentType.objects.clear_cache()

    assert not set(OLD_TABLES) & tables()
    assert {"retention_app_retentionpolicy", "retention_app_retentionrun", "retention_app_retentionevent"} <= tables()
    policy = RetentionPolicy.objects.get(pk=policy_id)
    assert (policy.tenant_id, policy.message_content_days, policy.roles) == (tenant_id, 30, ["toolResult"])
    run = RetentionRun.objects.get(pk=run_id)
    assert (run.trigger, run.messages_purged, run.records_expired, run.records_purged) == ("command", 7, 1, 2)
    assert list(RetentionEvent.objects.order_by("id").values_list("id", "action")) == [
        (event_ids[0], "policy_set"),
        (event_ids[1], "ttl_created"),
    ]
    later = RetentionEvent.objects.create(tenant_id=tenant_id, action="policy_set", actor="api")
    assert later.pk > event_ids[1]  # the identity went on counting
    with connection.cursor() as cursor:
        for table, index in (
            ("retention_app_retentionrun", "retentionrun_tenant_started"),
            ("retention_app_retentionevent", "retentionevent_tenant_created"),
        ):
            assert index in connection.introspection.get_constraints(cursor, table)

    # The content types: the same rows, now retention_app's; none left under sessions_app.
    assert ContentType.objects.get_for_model(RetentionPolicy).pk == policy_type.pk
    assert ContentType.objects.get_for_model(RetentionRun).pk == run_type.pk
    assert not ContentType.objects.filter(app_label="sessions_app", model__startswith="retention").exists()
    assert not ContentType.objects.filter(pk=early_type.pk).exists()
    auditor = django_user_model.objects.get(pk=auditor.pk)
    assert auditor.has_perm("retention_app.change_retentionpolicy")
    assert auditor.has_perm("retention_app.view_retentionrun")  # the early grant, moved to the kept permission
    admin_url = f"/admin/retention_app/retentionpolicy/{policy_id}/change/"
    assert LogEntry.objects.get(pk=logged.pk).get_admin_url() == admin_url
    assert LogEntry.objects.get(pk=early_log.pk).content_type_id == run_type.pk
    assert acme.get("/api/v1/retention/").json()["message_content_days"] == 30
