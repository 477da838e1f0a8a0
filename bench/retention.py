#!/usr/bin/env python
"""Purging message content (retention) on a generated tenant, against a raw-SQL floor measured in the same run.

    .venv/bin/python bench/retention.py                      # 200,000 messages per side
    .venv/bin/python bench/retention.py --messages 20000     # quicker

Data: two tenants, `bench-retention-service` and `bench-retention-floor`, each with N messages in N/100 sessions
(user, assistant with thinking, tool calls and metadata, toolResult), 100 days old, every user and assistant
message with a vector (memory_app_messageembedding, 8 dimensions), written by INSERT … SELECT and rewritten on
every run (a purge is not repeatable on the same rows).

Timed:
- `service`: sessions_app.services.retention.messages_content_purge — batches of 1000 messages, each a
  transaction that locks the batch's sessions, blanks the same columns, drops the search vector and (through the
  `messages_purged` signal) the messages' vectors;
- `floor`: one `UPDATE` of the same columns over the other tenant's messages and one `DELETE` of its vectors,
  in one transaction: no batches, no locks, no keyset reads — what the purge cannot beat.
"""

from __future__ import annotations

import argparse
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

    from sessions_app.services.retention import PURGE_SQL

    # The purge's own UPDATE, over every message of the tenant at once.
    sql = PURGE_SQL.replace("WHERE id = ANY(%s)", "WHERE tenant_id = %s")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [timezone.now(), tenant.pk])
        purged = cursor.rowcount
        cursor.execute("DELETE FROM memory_app_messageembedding WHERE tenant_id = %s", [tenant.pk])
    return purged


def main() -> None:
    args = parse_args()
    benchlib.setup_django()
    from django.utils import timezone

    from memory_app.models import MessageEmbedding
    from sessions_app.models import Tenant
    from sessions_app.services.retention import messages_content_purge

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
    path = benchlib.write_results(
        "retention",
        {
            "messages": args.messages,
            "batch": args.batch,
            "service": {"messages": purged, "seconds": service_seconds},
            "floor": {"messages": floor_purged, "seconds": floor_seconds},
            "database": benchlib.database_description(),
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
        },
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
