#!/usr/bin/env python
"""The memory export (GET /api/v1/records/export/, `ace_export memory`) against a raw COPY of the same rows,
measured in the same run.

    .venv/bin/python bench/export.py                     # 200,000 records
    .venv/bin/python bench/export.py --records 20000     # quicker

Data: a tenant `bench-export-<N>` with N records of --users users, each with --revisions revisions and one
source session (written by INSERT … SELECT in the database; a re-run reuses them).

Timed (--rounds each, best kept):
- `export`: memory_app.selectors.export.memory_export_lines for the tenant, every line encoded, bytes counted
  (what the streaming response sends, without HTTP);
- `COPY floor`: `COPY (SELECT …) TO STDOUT` of the same records and of their revisions, as text, through psycopg:
  what reading the rows costs with no Python per row. The export can't beat it; the ratio says what the
  provenance, the per-page queries and the JSON encoding cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--revisions", type=int, default=2, help="revisions per record")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def generate(tenant, n: int, users: int, revisions: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_app_record WHERE tenant_id = %s", [tenant.pk])
        if cursor.fetchone()[0] >= n:
            return
        cursor.execute(
            "INSERT INTO sessions_app_session (id, tenant_id, name, tool, agent_session_id, user_id, app, project, "
            "machine, metadata, started_at, created_at, updated_at, last_seq, conversations, state_version, requests, "
            "messages, message_user, message_assistant, message_toolresult, message_error, message_system, "
            "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, total_tokens) "
            "SELECT gen_random_uuid(), %s, 'bench', 'claude-code', 'agent-' || u, 'user-' || u, '', '', '', '{}', "
            "now(), now(), now(), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM generate_series(1, %s) u",
            [tenant.pk, users],
        )
        cursor.execute(
            "INSERT INTO memory_app_record (id, tenant_id, user_id, namespace, type, content, fields, confidence, "
            "valid, strategy, revision, created_at, updated_at, invalidated_reason, embedding_key) "
            "SELECT gen_random_uuid(), %s, 'user-' || (i %% %s + 1), '', 'fact', "
            "'The user mentioned fact number ' || i || ' while planning a trip to Hangzhou with friends', "
            "jsonb_build_object('n', i), 0.8, true, '', %s, now(), now(), '', '' FROM generate_series(1, %s) i",
            [tenant.pk, users, revisions, n],
        )
        cursor.execute(
            "INSERT INTO memory_app_record_source_sessions (record_id, session_id, tenant_id) "
            "SELECT r.id, s.id, r.tenant_id FROM memory_app_record r JOIN sessions_app_session s "
            "ON s.tenant_id = r.tenant_id AND s.user_id = r.user_id WHERE r.tenant_id = %s",
            [tenant.pk],
        )
        cursor.execute(
            "INSERT INTO memory_app_recordrevision (record_id, tenant_id, revision, change, actor, reason, type, "
            "content, fields, confidence, valid, source_session_ids, source_message_ids, created_at) "
            "SELECT r.id, r.tenant_id, v, CASE WHEN v = 1 THEN 'create' ELSE 'update' END, 'bench', '', r.type, "
            "r.content, r.fields, r.confidence, true, '[]', '[]', now() "
            "FROM memory_app_record r, generate_series(1, %s) v WHERE r.tenant_id = %s",
            [revisions, tenant.pk],
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_app_record; ANALYZE memory_app_recordrevision")


def time_export(tenant) -> tuple[float, int, int]:
    from memory_app.selectors.export import memory_export_lines

    started, lines, size = time.perf_counter(), 0, 0
    for line in memory_export_lines(tenant=tenant):
        lines += 1
        size += len(line)
    return time.perf_counter() - started, lines - 1, size


def time_copy(tenant) -> tuple[float, int]:
    size = 0
    with benchlib.psycopg_connect() as conn, conn.cursor() as cursor:
        started = time.perf_counter()
        for query in (
            "COPY (SELECT * FROM memory_app_record WHERE tenant_id = '{t}' ORDER BY id) TO STDOUT",
            "COPY (SELECT v.* FROM memory_app_recordrevision v JOIN memory_app_record r ON r.id = v.record_id "
            "WHERE r.tenant_id = '{t}') TO STDOUT",
        ):
            with cursor.copy(query.format(t=tenant.pk)) as copy:
                for block in copy:
                    size += len(block)
        return time.perf_counter() - started, size


def main():
    args = parse_args()
    benchlib.setup_django()
    from sessions_app.models import Tenant

    tenant, _ = Tenant.objects.get_or_create(name=f"bench-export-{args.records}")
    started = time.perf_counter()
    generate(tenant, args.records, args.users, args.revisions)
    print(f"data ready in {time.perf_counter() - started:.1f} s: {args.records:,} records, {benchlib.server_version()}")

    exports = [time_export(tenant) for _ in range(args.rounds)]
    copies = [time_copy(tenant) for _ in range(args.rounds)]
    seconds, records, size = min(exports)
    floor, floor_size = min(copies)

    def row(name, took, nbytes):
        return [name, f"{took:.2f}", f"{records / took:,.0f}", f"{nbytes / took / 1e6:.1f}", f"{nbytes / 1e6:.1f}"]

    rows = [row("export (JSONL)", seconds, size), row("COPY floor", floor, floor_size)]
    benchlib.print_table(["path", "seconds", "records/s", "MB/s", "MB"], rows, title="best of each")
    print(f"export = {floor / seconds:.1%} of the COPY floor's records/s")
    path = benchlib.write_results(
        "export",
        {
            "records": records,
            "revisions_per_record": args.revisions,
            "export": {"seconds": seconds, "bytes": size, "records_per_s": records / seconds},
            "copy_floor": {"seconds": floor, "bytes": floor_size, "records_per_s": records / floor},
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
        },
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
