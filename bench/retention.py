#!/usr/bin/env python
"""Purging message content (retention) on a generated tenant, against a raw-SQL floor measured in the same run.

    .venv/bin/python bench/retention.py                      # 200,000 messages per side
    .venv/bin/python bench/retention.py --messages 20000     # quicker

Data: two tenants, `bench-retention-service` and `bench-retention-floor`, each with N messages in N/100 sessions
(user, assistant with thinking, tool calls and metadata, toolResult), 100 days old, every user and assistant
message with a vector (memory_app_messageembedding, 8 dimensions), written by INSERT … SELECT and rewritten on
every run (a purge is not repeatable on the same rows).

Timed:
- `service`: sessions_app.services.content_purge.messages_content_purge — batches of 1000 messages, each a
  transaction that locks the batch's sessions, blanks the same columns, drops the search vector and (through the
  `messages_purged` signal) the messages' vectors;
- `floor`: one `UPDATE` of the same columns over the other tenant's messages and one `DELETE` of its vectors,
  in one transaction: no batches, no locks, no keyset reads — what the purge cannot beat.

Then the daily case: a second run over the service tenant's history, all of it purged now, beside N/10 messages
of the last 12 hours that the policy keeps (nothing is left to purge):
- `second run (now)`: messages_content_purge again, first right after the purge (autovacuum has not yet cleared
  the purged rows' index entries), then the median of --repeat runs after `VACUUM (ANALYZE)`;
- `before issue 21`: the query the purge ran before, on the schema before (the index of unpurged messages
  dropped in a transaction rolled back after): it read the purged history through the `(tenant, created_at)`
  index and found nothing — the whole cost of that second run — timed the same two ways.
Each with the rows of the message table it read (PostgreSQL's count, `pg_stat_xact_user_tables`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

KEY = "bench-retention:8"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="per side")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5, help="second runs timed after VACUUM (median)")
    return parser.parse_args()


def generate(tenant, n: int) -> None:
    from django.db import connection
    from memory_status import columns_sql

    sessions = max(n // 100, 1)
    per = n // sessions
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_app_messageembedding WHERE tenant_id = %s", [tenant.pk])
        cursor.execute("DELETE FROM sessions_app_message WHERE tenant_id = %s", [tenant.pk])
        cursor.execute("DELETE FROM sessions_app_session WHERE tenant_id = %s", [tenant.pk])
        names, values = columns_sql(
            "sessions_app_session",
            {
                "id": "gen_random_uuid()",
                "tenant_id": "%(tenant)s",
                "user_id": "'user-' || (g %% 50)",
                "name": "'bench session ' || g",
                "started_at": "now() - interval '100 days' + g * interval '1 second'",
                "created_at": "now()",
                "updated_at": "now()",
                "last_seq": "%(per)s",
                "messages": "%(per)s",
            },
        )
        cursor.execute(
            f"INSERT INTO sessions_app_session ({names}) SELECT {values} FROM generate_series(1, %(sessions)s) g",
            {"tenant": tenant.pk, "per": per, "sessions": sessions},
        )
        names, values = columns_sql(
            "sessions_app_message",
            {
                "id": "gen_random_uuid()",
                "tenant_id": "s.tenant_id",
                "session_id": "s.id",
                "seq": "q",
                "role": "CASE WHEN q %% 3 = 0 THEN 'toolResult' WHEN q %% 3 = 1 THEN 'user' ELSE 'assistant' END",
                "content": "repeat('message ' || q || ' about trips, food and work; ', 8)",
                "thinking": "CASE WHEN q %% 3 = 2 THEN 'reasoning about message ' || q ELSE '' END",
                "tool_calls": "CASE WHEN q %% 3 = 2 THEN jsonb_build_array(jsonb_build_object('id', 'toolu_' || q, "
                "'name', 'Read', 'arguments', jsonb_build_object('file_path', '/src/' || q || '.py'))) END",
                "metadata": "jsonb_build_object('message_id', 'msg_' || q, 'cwd', '/home/user/project')",
                "search_vector": "to_tsvector('english', 'message ' || q || ' about trips, food and work')",
                "created_at": "s.started_at + q * interval '1 second'",
                "received_at": "s.started_at + q * interval '1 second'",
            },
        )
        cursor.execute(
            f"INSERT INTO sessions_app_message ({names}) SELECT {values} FROM sessions_app_session s "
            "CROSS JOIN generate_series(1, %(per)s) q WHERE s.tenant_id = %(tenant)s",
            {"tenant": tenant.pk, "per": per},
        )
        cursor.execute(
            "INSERT INTO memory_app_messageembedding (message_id, tenant_id, session_id, user_id, created_at, "
            "embedding, embedding_key) "
            "SELECT m.id, m.tenant_id, m.session_id, s.user_id, m.created_at, '[1,0,0,0,0,0,0,0]'::vector, %(key)s "
            "FROM sessions_app_message m JOIN sessions_app_session s ON s.id = m.session_id "
            "WHERE m.tenant_id = %(tenant)s AND m.role IN ('user', 'assistant')",
            {"tenant": tenant.pk, "key": KEY},
        )
        cursor.execute("ANALYZE sessions_app_message")
        cursor.execute("ANALYZE memory_app_messageembedding")


def floor(tenant) -> int:
    from django.db import connection, transaction
    from django.utils import timezone

    from sessions_app.services.content_purge import PURGE_SQL

    # The purge's own UPDATE, over every message of the tenant at once.
    sql = PURGE_SQL.replace("WHERE id = ANY(%s)", "WHERE tenant_id = %s")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [timezone.now(), tenant.pk])
        purged = cursor.rowcount
        cursor.execute("DELETE FROM memory_app_messageembedding WHERE tenant_id = %s", [tenant.pk])
    return purged


# The purge's first read before issue 21: the oldest unpurged messages by created_at, through the (tenant,
# created_at) index, every purged row of the tenant read and filtered out on the way.
BEFORE_SQL = """
SELECT id, session_id, created_at FROM sessions_app_message
WHERE tenant_id = %s AND created_at < %s AND content_purged_at IS NULL
ORDER BY created_at LIMIT %s
"""


def recent(tenant, n: int) -> None:
    """About `n` messages of the last 12 hours in the tenant's sessions, after their old ones: content kept."""
    from django.db import connection
    from memory_status import columns_sql

    names, values = columns_sql(
        "sessions_app_message",
        {
            "id": "gen_random_uuid()",
            "tenant_id": "s.tenant_id",
            "session_id": "s.id",
            "seq": "s.last_seq + q",
            "role": "CASE WHEN q %% 2 = 0 THEN 'user' ELSE 'assistant' END",
            "content": "'a recent message ' || q",
            "created_at": "now() - interval '12 hours' + q * interval '1 second'",
            "received_at": "now() - interval '12 hours' + q * interval '1 second'",
        },
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sessions_app_session WHERE tenant_id = %s", [tenant.pk])
        per = max(n // max(cursor.fetchone()[0], 1), 1)
        cursor.execute(
            f"INSERT INTO sessions_app_message ({names}) SELECT {values} FROM sessions_app_session s "
            "CROSS JOIN generate_series(1, %(per)s) q WHERE s.tenant_id = %(tenant)s",
            {"tenant": tenant.pk, "per": per},
        )


def rows_read() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
            "WHERE relid = 'sessions_app_message'::regclass"
        )
        return cursor.fetchone()[0]


def timed_read(work) -> tuple[float, int]:
    """Seconds and message rows read by `work`, in one transaction (the row count stays with it)."""
    from django.db import transaction

    with transaction.atomic():
        rows = rows_read()
        started = time.perf_counter()
        work()
        seconds = time.perf_counter() - started
        return seconds, rows_read() - rows


def second_runs(tenant, before, batch: int, repeat: int) -> dict:
    from django.db import connection, transaction

    from sessions_app.services.content_purge import messages_content_purge

    def service():
        assert messages_content_purge(tenant=tenant, before=before, batch=batch).messages == 0

    def before_issue_21():
        with connection.cursor() as cursor:
            cursor.execute(BEFORE_SQL, [tenant.pk, before, batch])
            assert cursor.fetchall() == []

    def timed(name, work):
        if name == "service":
            return timed_read(work)
        with transaction.atomic():  # the schema before issue 21, for this one read
            with connection.cursor() as cursor:
                cursor.execute("DROP INDEX message_content_kept")
            figures = timed_read(work)
            transaction.set_rollback(True)
            return figures

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_message")  # what autovacuum does after a purge of this size
    figures = {"service": {}, "before": {}}
    for name, work in (("service", service), ("before", before_issue_21)):
        figures[name]["unvacuumed"] = timed(name, work)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) sessions_app_message")
    for name, work in (("service", service), ("before", before_issue_21)):
        runs = [timed(name, work) for _ in range(repeat)]
        figures[name]["vacuumed"] = (statistics.median(s for s, _ in runs), runs[-1][1])
    return figures


def main() -> None:
    args = parse_args()
    benchlib.setup_django()
    from django.utils import timezone

    from memory_app.models import MessageEmbedding
    from sessions_app.models import Tenant
    from sessions_app.services.content_purge import messages_content_purge

    service_tenant, _ = Tenant.objects.get_or_create(name="bench-retention-service")
    floor_tenant, _ = Tenant.objects.get_or_create(name="bench-retention-floor")
    print(f"generating {args.messages:,} messages per side …", flush=True)
    generate(service_tenant, args.messages)
    generate(floor_tenant, args.messages)

    before = timezone.now() - timedelta(days=1)
    started = time.perf_counter()
    purged = messages_content_purge(tenant=service_tenant, before=before, batch=args.batch).messages
    service_seconds = time.perf_counter() - started
    left = MessageEmbedding.objects.filter(tenant=service_tenant).count()

    started = time.perf_counter()
    floor_purged = floor(floor_tenant)
    floor_seconds = time.perf_counter() - started

    rows = [
        [f"service (batches of {args.batch})", purged, service_seconds],
        ["floor (one UPDATE)", floor_purged, floor_seconds],
    ]
    rows = [[name, f"{n:,}", f"{seconds:.2f}", f"{n / seconds:,.0f}"] for name, n, seconds in rows]
    benchlib.print_table(["purge", "messages", "seconds", "messages/s"], rows, title="Purging message content")
    print(f"service / floor time: {service_seconds / floor_seconds:.2f}×; vectors left on the service side: {left}")

    recent(service_tenant, args.messages // 10)
    second = second_runs(service_tenant, before, args.batch, args.repeat)
    rows = [
        [label, when, f"{seconds * 1000:,.1f}", f"{read:,}"]
        for label, name in (("second run (now)", "service"), ("second run before issue 21", "before"))
        for when, (seconds, read) in (
            ("right after the purge", second[name]["unvacuumed"]),
            (f"after VACUUM (median of {args.repeat})", second[name]["vacuumed"]),
        )
    ]
    benchlib.print_table(
        ["run", "when", "ms", "message rows read"],
        rows,
        title=f"A second run over {purged:,} purged messages (nothing left to purge)",
    )
    path = benchlib.write_results(
        "retention",
        {
            "messages": args.messages,
            "batch": args.batch,
            "service": {"messages": purged, "seconds": service_seconds},
            "floor": {"messages": floor_purged, "seconds": floor_seconds},
            "second_run": {
                name: {when: {"seconds": seconds, "rows_read": read} for when, (seconds, read) in figures.items()}
                for name, figures in second.items()
            },
            "database": benchlib.database_description(),
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
        },
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
