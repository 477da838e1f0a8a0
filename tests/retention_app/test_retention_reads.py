"""A retention run reads the messages it still has to purge and nothing of the purged history: a second run over
a purged history costs the same whether that history is two thousand messages or twenty thousand, and stays
correct when the policy changes (a role added, a cutoff moved either way)."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from retention_app.models import RetentionRun
from retention_app.services import retention_apply, retention_policy_set
from sessions_app.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

# Rows a run may read beyond those it purges: an index entry of a purged row not yet cleaned up costs a look
# (PostgreSQL counts a few); the purged history itself is thousands here.
SPARE_ROWS = 5


def history(session, *, n: int, days_ago: int, roles=("user", "assistant", "toolResult")) -> None:
    """`n` messages of `roles` in turn, `days_ago` days old, written as a long-lived tenant's would be."""
    first = (Message.objects.filter(session=session).order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {Message._meta.db_table} (id, tenant_id, session_id, seq, role, content, thinking, tool_name,
              auth_type, request_id, model, finish_reason, feishu_conversation_id, metadata, thinking_mode,
              created_at, received_at)
            SELECT gen_random_uuid(), %(tenant)s, %(session)s, %(first)s + g, (%(roles)s::text[])[1 + g %% %(k)s],
              'message ' || g || ' about a trip', '', '', '', '', '', '', '', '{{}}', '',
              now() - %(days)s * interval '1 day' + g * interval '1 second', now()
            FROM generate_series(0, %(n)s - 1) g
            """,
            {
                "tenant": session.tenant_id,
                "session": session.pk,
                "first": first,
                "roles": list(roles),
                "k": len(roles),
                "days": days_ago,
                "n": n,
            },
        )
    analyze()


def analyze() -> None:
    """Fresh planner statistics, as autovacuum gathers once a write or a purge has changed many rows."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Message._meta.db_table}")


def purge(tenant) -> RetentionRun:
    run = retention_apply(tenant=tenant, trigger=RetentionRun.Trigger.COMMAND)
    analyze()
    return run


def message_rows_read() -> int:
    """Rows of the message table this backend has read and not yet reported: fetched through an index or read by
    a scan, kept or filtered out (PostgreSQL's own count; nothing is reported while a transaction is open)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
            "WHERE relid = %s::regclass",
            [Message._meta.db_table],
        )
        return cursor.fetchone()[0]


def run_cost(tenant) -> tuple[RetentionRun, int, int]:
    """A retention run, its statements, and the rows of the message table it read (inside one transaction, so
    that the count of rows read stays with this backend until the end)."""
    with transaction.atomic():
        before = message_rows_read()
        with CaptureQueriesContext(connection) as queries:
            run = retention_apply(tenant=tenant, trigger=RetentionRun.Trigger.COMMAND)
        return run, len(queries), message_rows_read() - before


def test_a_second_run_reads_nothing_of_the_purged_history_whatever_its_size(api, session):
    retention_policy_set(tenant=api.tenant, actor="test", message_content_days=30, roles=[])
    history(session, n=2_000, days_ago=200)
    history(session, n=300, days_ago=5)  # within the policy: kept, and never read by a run

    assert purge(api.tenant).messages_purged == 2_000
    run, statements, rows = run_cost(api.tenant)
    assert run.messages_purged == 0 and rows <= SPARE_ROWS

    history(session, n=20_000, days_ago=150)  # ten times the history, all of it purged by the next run
    assert purge(api.tenant).messages_purged == 20_000
    run, statements_after, rows_after = run_cost(api.tenant)
    assert run.messages_purged == 0 and rows_after <= SPARE_ROWS and statements_after == statements

    # What arrives after is purged by the next run, which reads only that.
    history(session, n=50, days_ago=40)
    run, _, rows = run_cost(api.tenant)
    assert run.messages_purged == 50 and rows <= 2 * 50 + SPARE_ROWS  # each found, then updated
    assert Message.objects.filter(tenant=api.tenant, content_purged_at__isnull=True).count() == 300


def test_policy_changes_purge_what_they_now_cover_and_runs_still_skip_the_rest(api, session):
    retention_policy_set(tenant=api.tenant, actor="test", message_content_days=30, roles=["toolResult"])
    history(session, n=6_000, days_ago=100)  # 2,000 of each role
    assert purge(api.tenant).messages_purged == 2_000
    # The 4,000 old user and assistant messages stay unpurged, and a run limited to tool results skips them.
    run, _, rows = run_cost(api.tenant)
    assert run.messages_purged == 0 and rows <= SPARE_ROWS

    # Every role now: the old user and assistant messages are purged too.
    retention_policy_set(tenant=api.tenant, actor="test", roles=[])
    assert purge(api.tenant).messages_purged == 4_000
    assert not Message.objects.filter(tenant=api.tenant, content_purged_at__isnull=True).exists()

    # A longer retention purges nothing of what is younger than its cutoff; a shorter one reaches it.
    history(session, n=90, days_ago=20)
    retention_policy_set(tenant=api.tenant, actor="test", message_content_days=60)
    run, _, rows = run_cost(api.tenant)
    assert run.messages_purged == 0 and rows <= SPARE_ROWS
    retention_policy_set(tenant=api.tenant, actor="test", message_content_days=10)
    run = run_cost(api.tenant)[0]
    assert run.messages_purged == 90 and run.newest_message_at < timezone.now() - timedelta(days=19)
    purged = Message.objects.filter(tenant=api.tenant, content_purged_at__isnull=False)
    assert purged.count() == 6_090 and not purged.exclude(content="").exists()
