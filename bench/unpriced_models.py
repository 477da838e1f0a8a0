#!/usr/bin/env python
"""The admin's "Unpriced models" (sessions_app.selectors.prices.unpriced_models) on big daily roll-ups: one GROUP BY
model over every row of sessions_app_usagedaily, then the prices in memory.

    .venv/bin/python bench/unpriced_models.py                  # 2,000,000 daily rows
    .venv/bin/python bench/unpriced_models.py --rows 500000    # quicker

Data: --rows daily roll-up rows of 200 tenants `bench-prices-<i>` (365 days, 5 tools, 30 users, 40 model names of
which 10 have no price), written by INSERT … SELECT in the database; a re-run with the same --rows reuses them,
another --rows rewrites them. Prints the plan (EXPLAIN ANALYZE) and p50/max of --queries calls.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TENANTS = 200


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--queries", type=int, default=5)
    return parser.parse_args()


def ensure_rows(rows: int) -> list:
    from django.db import connection

    from sessions_app.models import Tenant, UsageDaily

    tenants = [Tenant.objects.get_or_create(name=f"bench-prices-{i}")[0].pk for i in range(TENANTS)]
    if UsageDaily.objects.filter(tenant_id__in=tenants).count() == rows:
        return tenants
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM sessions_app_usagedaily WHERE tenant_id = ANY(%s)", [tenants])
        cursor.execute(
            """
            INSERT INTO sessions_app_usagedaily (tenant_id, day, tool, user_id, project, machine, model, conversations,
              sessions, requests, messages, message_user, message_assistant, message_toolresult, message_error,
              message_system, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
              cache_creation_5m_tokens, cache_creation_1h_tokens, total_tokens)
            SELECT (%s::uuid[])[1 + (g %% 200)], DATE '2025-12-01' + ((g / 200) %% 365)::int,
              'tool-' || ((g / 73000) %% 5), 'user-' || ((g / 365000) %% 30), 'project', '',
              CASE WHEN g %% 4 = 0 THEN 'unpriced-model-' || (g %% 10)
                ELSE (ARRAY['claude-sonnet-4-5-20250929', 'claude-opus-4-1', 'gpt-5.1', 'gemini-2.5-pro',
                            'qwen-plus'])[1 + (g %% 5)] || '-' || (g %% 6) END,
              1, 1, 10, 20, 5, 10, 5, 0, 0, 1000, 200, 50000, 3000, 3000, 0, 1200
            FROM generate_series(0, %s - 1) AS g
            ON CONFLICT DO NOTHING
            """,
            [tenants, rows],
        )
        cursor.execute("ANALYZE sessions_app_usagedaily")
    print(f"wrote {rows:,} daily rows in {time.perf_counter() - started:.0f} s")
    return tenants


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from django.db import connection
    from django.db.models import F, Max, Min, Sum

    from sessions_app.models import UsageDaily
    from sessions_app.selectors.prices import unpriced_models

    ensure_rows(args.rows)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), pg_size_pretty(pg_total_relation_size('sessions_app_usagedaily')) "
            "FROM sessions_app_usagedaily"
        )
        total, size = cursor.fetchone()
    print(f"{benchlib.server_version()}, {benchlib.database_description()}, {total:,} daily rows ({size})")
    volumes = (
        UsageDaily.objects.order_by()
        .values("model")
        .annotate(
            tokens=Sum(F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_creation_tokens")),
            requests_sum=Sum("requests"),
            first_day=Min("day"),
            last_day=Max("day"),
        )
    )
    sql, params = volumes.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        print("\n".join(row[0] for row in cursor.fetchall()))
    timings, found = [], []
    for _ in range(args.queries):
        started = time.perf_counter()
        found = unpriced_models()
        timings.append(time.perf_counter() - started)
    print(
        f"unpriced_models(): {len(found)} models, p50 {statistics.median(timings):.3f} s, max {max(timings):.3f} s "
        f"over {args.queries} calls"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
