#!/usr/bin/env python
"""The memory status (GET /api/v1/memory/status/, and the backlog every recall answer carries) on a big tenant,
against the exact count it replaces, measured in the same run.

    .venv/bin/python bench/memory_status.py                     # 1,000,000 messages
    .venv/bin/python bench/memory_status.py --messages 200000   # quicker

Data: a tenant `bench-status-<N>` with N messages (user and assistant turns, with a toolResult every fifth)
in N/100 sessions of --users users, all but --pending of them embedded (rows of memory_app_messageembedding with
8-dimension vectors under a bench key: the counts never read a vector), written by INSERT … SELECT in the
database; and N/10 valid records, all but --pending embedded. A re-run reuses the rows already there.

Timed (p50/p95 over --queries calls, one connection, in-process):
- `exact`: what a count without the watermarks costs — the tenant's messages of the embedded roles with text in
  live sessions and no vector of the key (the anti-join `pending_messages` runs, without its one-day window), and
  the records count with `embedding_key <> key`;
- `status cold`: memory_app.selectors.status.memory_status for the tenant with no watermark yet (the first count
  after a deploy or an embedder change reads every session once; the periodic sweep `embed_pending` does it);
- `status warm`: the same, every later call (each session's tail after its watermark);
- per user: memory_status(user_id=…) as every POST /api/v1/recall/ runs it, for the heaviest users and for
  random ones, against the exact anti-join over that user's messages.
The figures must agree: each variant's counts are printed beside the exact ones.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

KEY = "bench-status:8"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--pending", type=int, default=2_000, help="messages (and records) left without a vector")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--seed", type=int, default=17)
    return parser.parse_args()


def columns_sql(table: str, overrides: dict[str, str]) -> tuple[str, str]:
    """(column list, select list) for INSERT … SELECT into `table`: `overrides`, else a neutral value per type."""
    from django.db import connection

    neutral = {"text": "''", "character varying": "''", "jsonb": "'{}'::jsonb", "bigint": "0", "integer": "0"}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name, data_type, is_nullable, is_generated FROM information_schema.columns "
            "WHERE table_name = %s ORDER BY ordinal_position",
            [table],
        )
        names, values = [], []
        for name, data_type, nullable, generated in cursor.fetchall():
            if generated == "ALWAYS":
                continue
            if name in overrides:
                names.append(name)
                values.append(overrides[name])
            elif nullable == "NO":
                names.append(name)
                values.append(neutral.get(data_type, "NULL"))
    return ", ".join(names), ", ".join(values)


def generate(tenant, n: int, users: int, pending: int) -> None:
    from django.db import connection

    sessions = max(n // 100, 1)
    per_session = n // sessions
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sessions_app_message WHERE tenant_id = %s", [tenant.pk])
        if cursor.fetchone()[0] >= n:
            return
        print(f"generating {n:,} messages in {sessions:,} sessions, {n // 10:,} records …", flush=True)
        cursor.execute("DELETE FROM memory_app_messageembedding WHERE tenant_id = %s", [tenant.pk])
        cursor.execute("DELETE FROM memory_app_sessionembeddingprogress p USING sessions_app_session s "
                       "WHERE s.id = p.session_id AND s.tenant_id = %s", [tenant.pk])  # fmt: skip
        cursor.execute("DELETE FROM sessions_app_message WHERE tenant_id = %s", [tenant.pk])
        cursor.execute("DELETE FROM memory_app_record WHERE tenant_id = %s", [tenant.pk])
        cursor.execute("DELETE FROM sessions_app_session WHERE tenant_id = %s", [tenant.pk])
        names, values = columns_sql(
            "sessions_app_session",
            {
                "id": "gen_random_uuid()",
                "tenant_id": "%(tenant)s",
                "user_id": "'user-' || floor(%(users)s * power(random(), 3))::int",  # skewed: a few heavy users
                "name": "'bench session ' || g",
                "started_at": "now() - interval '30 days' + g * interval '1 second'",
                "created_at": "now()",
                "updated_at": "now()",
                "last_seq": "%(per)s",
                "messages": "%(per)s",
                "last_message_at": "now()",
            },
        )
        started = time.perf_counter()
        cursor.execute(
            f"INSERT INTO sessions_app_session ({names}) SELECT {values} FROM generate_series(1, %(sessions)s) g",
            {"tenant": tenant.pk, "users": users, "per": per_session, "sessions": sessions},
        )
        names, values = columns_sql(
            "sessions_app_message",
            {
                "id": "gen_random_uuid()",
                "tenant_id": "s.tenant_id",
                "session_id": "s.id",
                "seq": "q",
                "role": "CASE WHEN q %% 5 = 0 THEN 'toolResult' WHEN q %% 2 = 1 THEN 'user' ELSE 'assistant' END",
                "content": "'message ' || q || ' of a long conversation about trips, food and work'",
                "created_at": "s.started_at + q * interval '1 second'",
                "received_at": "s.started_at + q * interval '1 second'",
            },
        )
        cursor.execute(
            f"INSERT INTO sessions_app_message ({names}) SELECT {values} FROM sessions_app_session s "
            "CROSS JOIN generate_series(1, %(per)s) q WHERE s.tenant_id = %(tenant)s",
            {"tenant": tenant.pk, "per": per_session},
        )
        # Every embeddable message has its vector but the newest `pending` ones (received last).
        cursor.execute(
            "INSERT INTO memory_app_messageembedding (message_id, tenant_id, session_id, user_id, created_at, "
            "embedding, embedding_key) "
            "SELECT m.id, m.tenant_id, m.session_id, s.user_id, m.created_at, '[1,0,0,0,0,0,0,0]'::vector, %(key)s "
            "FROM sessions_app_message m JOIN sessions_app_session s ON s.id = m.session_id "
            "WHERE m.tenant_id = %(tenant)s AND m.role IN ('user', 'assistant') "
            "ORDER BY m.received_at DESC OFFSET %(pending)s",
            {"tenant": tenant.pk, "key": KEY, "pending": pending},
        )
        names, values = columns_sql(
            "memory_app_record",
            {
                "id": "gen_random_uuid()",
                "tenant_id": "%(tenant)s",
                "user_id": "'user-' || floor(%(users)s * power(random(), 3))::int",
                "type": "'fact'",
                "content": "'fact number ' || g",
                "fields": "'{}'::jsonb",
                "confidence": "1",
                "valid": "true",
                "revision": "1",
                "created_at": "now()",
                "updated_at": "now() - g * interval '1 second'",
                "embedding": "CASE WHEN g > %(pending)s THEN '[1,0,0,0,0,0,0,0]'::vector END",
                "embedding_key": "CASE WHEN g > %(pending)s THEN %(key)s ELSE '' END",
            },
        )
        cursor.execute(
            f"INSERT INTO memory_app_record ({names}) SELECT {values} FROM generate_series(1, %(records)s) g",
            {"tenant": tenant.pk, "users": users, "pending": pending, "key": KEY, "records": n // 10},
        )
        for table in (
            "sessions_app_session",
            "sessions_app_message",
            "memory_app_messageembedding",
            "memory_app_record",
        ):
            cursor.execute(f"VACUUM ANALYZE {table}")
        print(f"  generated in {time.perf_counter() - started:.0f} s", flush=True)


EXACT_MESSAGES = """
    SELECT count(*) FROM sessions_app_message m JOIN sessions_app_session s ON s.id = m.session_id
    WHERE m.tenant_id = %(tenant)s {user} AND s.deleted_at IS NULL AND m.role = ANY(%(roles)s)
      AND m.content ~ '[^[:space:]]'
      AND NOT EXISTS (SELECT 1 FROM memory_app_messageembedding e
                      WHERE e.message_id = m.id AND e.embedding_key = %(key)s)
"""
EXACT_RECORDS = (
    "SELECT count(*) FROM memory_app_record WHERE tenant_id = %(tenant)s {user} AND valid AND embedding_key <> %(key)s"
)


def exact(tenant, user: str | None) -> tuple[int, int]:
    from django.conf import settings
    from django.db import connection

    params = {"tenant": tenant.pk, "key": KEY, "roles": list(settings.ACE_EMBED_MESSAGE_ROLES), "user": user}
    with connection.cursor() as cursor:
        cursor.execute(EXACT_MESSAGES.format(user="AND s.user_id = %(user)s" if user else ""), params)
        messages = cursor.fetchone()[0]
        cursor.execute(EXACT_RECORDS.format(user="AND user_id = %(user)s" if user else ""), params)
        return messages, cursor.fetchone()[0]


def timed(fn, runs: int) -> tuple[dict, object]:
    seconds, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - started)
    return benchlib.summary_ms(seconds), result


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from django.db import connection
    from django.test import override_settings

    from memory_app.embedders import get_embedder
    from memory_app.models import SessionEmbeddingProgress
    from memory_app.selectors.status import memory_status
    from sessions_app.models import Tenant

    tenant, _ = Tenant.objects.get_or_create(name=f"bench-status-{args.messages}")
    generate(tenant, args.messages, args.users, args.pending)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT user_id, count(*) FROM sessions_app_session WHERE tenant_id = %s GROUP BY 1 ORDER BY 2 DESC",
            [tenant.pk],
        )
        users = [row[0] for row in cursor.fetchall()]
    rng = random.Random(args.seed)
    heavy, sample = users[:10], rng.sample(users, min(len(users), 20))

    # The bench key is a `hash` key of 8 dimensions: memory_status asks the configured embedder for its key.
    with override_settings(ACE_EMBEDDER="hash", ACE_EMBEDDER_DIMENSIONS=8):
        get_embedder.cache_clear()
        key = get_embedder().key
        with connection.cursor() as cursor:  # the bench rows carry the hash embedder's key of 8 dimensions
            cursor.execute("UPDATE memory_app_messageembedding SET embedding_key = %s WHERE tenant_id = %s "
                           "AND embedding_key <> %s", [key, tenant.pk, key])  # fmt: skip
            cursor.execute("UPDATE memory_app_record SET embedding_key = %s WHERE tenant_id = %s "
                           "AND embedding_key NOT IN ('', %s)", [key, tenant.pk, key])  # fmt: skip
        global KEY
        KEY = key
        SessionEmbeddingProgress.objects.filter(session__tenant=tenant).delete()
        rows = []

        exact_tenant, exact_counts = timed(lambda: exact(tenant, None), max(3, args.queries // 10))
        cold, cold_status = timed(lambda: memory_status(tenant=tenant), 1)
        warm, warm_status = timed(lambda: memory_status(tenant=tenant), args.queries)
        figure = lambda s: f"{s.pending_message_vectors:,} / {s.pending_record_vectors:,}"  # noqa: E731
        rows.append(["tenant: exact anti-join", *_ms(exact_tenant), f"{exact_counts[0]:,} / {exact_counts[1]:,}"])
        rows.append(["tenant: status, cold (no watermark)", *_ms(cold), figure(cold_status)])
        rows.append(["tenant: status, warm", *_ms(warm), figure(warm_status)])

        results = {"tenant": {"exact": exact_tenant, "cold": cold, "warm": warm}}
        for label, group in (("heaviest users", heavy), ("random users", sample)):
            exact_s, status_s, agree = [], [], True
            for user in group:
                started = time.perf_counter()
                truth = exact(tenant, user)
                exact_s.append(time.perf_counter() - started)
                memory_status(tenant=tenant, user_id=user)  # the user's first recall after the deploy: cold
                for _ in range(max(1, args.queries // len(group))):
                    started = time.perf_counter()
                    found = memory_status(tenant=tenant, user_id=user)
                    status_s.append(time.perf_counter() - started)
                agree &= (found.pending_message_vectors, found.pending_record_vectors) == truth
            results[label] = {"exact": benchlib.summary_ms(exact_s), "status": benchlib.summary_ms(status_s)}
            rows.append([f"{label}: exact anti-join", *_ms(results[label]["exact"]), ""])
            rows.append([f"{label}: status (recall's)", *_ms(results[label]["status"]), "agree" if agree else "DIFFER"])
        get_embedder.cache_clear()

    print()
    benchlib.print_table(
        ["variant", "p50 ms", "p95 ms", "pending messages / records"],
        rows,
        title=f"Memory status on {args.messages:,} messages ({len(users):,} users), {args.pending:,} pending",
    )
    path = benchlib.write_results(
        "memory_status",
        {
            "messages": args.messages,
            "users": len(users),
            "pending": args.pending,
            "results": results,
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
        },  # fmt: skip
    )
    print(f"\nresults: {path}")
    return 0


def _ms(summary: dict) -> list[str]:
    return [f"{summary['p50_ms']:.1f}", f"{summary['p95_ms']:.1f}"]


if __name__ == "__main__":
    sys.exit(main())
