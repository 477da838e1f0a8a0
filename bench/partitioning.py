#!/usr/bin/env python
"""Time partitioning of the big tables at 10M messages, against the current layout, in one run.

    nice -n 10 .venv/bin/python bench/partitioning.py                      # 10,000,000 messages
    nice -n 10 .venv/bin/python bench/partitioning.py --messages 200000    # a quick check

The same data set is written into each layout, side by side in the bench database:

- `current`: the tables as migrated. Each is a table made from the real table's definition as pg_catalog
  has it (columns, defaults, checks, every index, the search-vector triggers), under another name, so the
  real tables stay usable and every layout is built the same way (rows first, then the indexes).
- `monthly`, `weekly`: the same, PARTITION BY RANGE (created_at), one partition a month or a week. A
  unique index of a partitioned table must include the partition key, so the primary key (id), (session_id,
  seq) and (session_id, external_id) become (…, created_at): unique within a partition only.

Tables: sessions_app_message and sessions_app_llmrequest (the roll-ups are ~1% of the messages' rows:
bench/dashboard.py). Foreign keys are left out in every layout (the checks cost the same in each; the
tables that point at a message by id are named in bench/README.md).

Data: the sessions of bench/dashboard.py's plan (users, tools, models, sizes, 90 days), spread over 8
tenants; messages user → (assistant → toolResult)* → answer, with content drawn from a pool of the bench's
English and Chinese prose and tool outputs (200–2,000 characters) and their search vectors, written in the
order of created_at, as an append-only ledger's heap is. Every assistant or error message has its request.

Measured, each layout in the same run:
1. disk per row: heap (with TOAST) and each index, via pg_relation_size (summed over the partitions);
2. reads, p50/p95 over --runs, the layouts taking turns: a session's messages in seq order, the audit list
   (a tenant's newest and a page 30 days back), a tenant's one-day count, a message by id, the append's
   external-id lookup;
3. inserts: --insert-rows new messages by COPY and as many by the app's INSERT of 100 rows a statement (one
   transaction each; the search-vector trigger on; a CHECKPOINT before each), time and WAL per row;
4. retention of everything before the first whole month: the content purge retention runs today (an UPDATE,
   on one day of rows), DELETE … WHERE created_at < cutoff then VACUUM, against DETACH + DROP of the
   partitions (the weekly layout deletes the rest of the week that straddles the cutoff); time, WAL (the
   difference of pg_current_wal_lsn) and the table's size and dead rows afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import sys
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import dashboard  # noqa: E402

LAYOUTS = ("current", "monthly", "weekly")
TABLES = {"message": "sessions_app_message", "llmrequest": "sessions_app_llmrequest"}
PREFIX = "bench_part"
SKELETON = f"{PREFIX}_skeleton"
TEXTS = f"{PREFIX}_text"
PLAN = f"{PREFIX}_plan"
TENANTS = [uuid.UUID(int=0xACE0 << 64 | n) for n in range(8)]
INSERT_BATCH = 100  # messages.INLINE_ROWS: up to this many rows go as an INSERT clause, more by COPY


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000_000, help="messages in the data set (default 10M)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, of {', '.join(LAYOUTS)}")
    parser.add_argument("--runs", type=int, default=200, help="timed runs per read query and layout (default 200)")
    parser.add_argument("--insert-rows", type=int, default=100_000, help="rows per insert way (default 100,000)")
    parser.add_argument("--keep", action="store_true", help="keep the tables afterwards (default: drop them)")
    parser.add_argument(
        "--wal-compression",
        default="",
        help="also time the inserts with these wal_compression methods, comma-separated (e.g. lz4,zstd)",
    )
    parser.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="build, measure and drop each layout before the next (disk for one layout at a time: ~4.6 KB a "
        "message; reads are then timed layout after layout, not taking turns)",
    )
    parser.add_argument("--name", default=None, help="results file name (default partitioning-<N>)")
    args = parser.parse_args()
    args.layouts = [name for name in args.layouts.split(",") if name]
    args.wal_compression = ("off", *[name for name in args.wal_compression.split(",") if name])
    unknown = set(args.layouts) - set(LAYOUTS)
    if unknown:
        parser.error(f"unknown layouts: {', '.join(sorted(unknown))}")
    args.name = args.name or f"partitioning-{args.messages}"
    return args


def table_name(layout: str, table: str) -> str:
    return f"{PREFIX}_{layout}_{table}"


def execute(cursor, sql: str, params=None):
    cursor.execute(sql, params)
    return cursor


def wal_lsn(cursor) -> str:
    return execute(cursor, "SELECT pg_current_wal_lsn()").fetchone()[0]


def wal_since(cursor, lsn: str) -> int:
    return int(execute(cursor, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [lsn]).fetchone()[0])


# -- the data set ----------------------------------------------------------------------------------------------
def make_texts(cursor) -> None:
    """A pool of contents (prose for user and assistant messages, tool output for tool results) with the search
    vectors the insert trigger gives them."""
    rng = random.Random(7)
    rows = [(n, "prose", benchlib.prose(rng)) for n in range(1000)]
    rows += [(1000 + n, "tool", benchlib.tool_output(rng)) for n in range(500)]
    execute(cursor, f"DROP TABLE IF EXISTS {TEXTS}")
    execute(cursor, f"CREATE TABLE {TEXTS} (n int PRIMARY KEY, kind text, content text, search_vector tsvector)")
    with cursor.copy(f"COPY {TEXTS} (n, kind, content) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    execute(cursor, f"UPDATE {TEXTS} SET search_vector = ace_tsvector(content) WHERE length(content) <= 2000")


SKELETON_SQL = f"""
CREATE UNLOGGED TABLE {SKELETON} AS
SELECT gen_random_uuid() AS id, m.tenant_id, m.session_id, m.seq, m.role, m.created_at,
       md5(m.session_id::text || '/' || ((m.seq - 1) / m.cycle))::uuid AS conversation_id,
       CASE WHEN m.role IN ('assistant', 'error') THEN gen_random_uuid() END AS llm_request_id,
       CASE WHEN m.role IN ('assistant', 'error')
            THEN CASE WHEN random() < m.share_b THEN m.model_b ELSE m.model_a END ELSE '' END AS model,
       CASE WHEN m.role = 'assistant' THEN 200 + (random() * 30000)::int END AS input_tokens,
       CASE WHEN m.role = 'assistant' THEN 20 + (random() * 2000)::int END AS output_tokens,
       CASE WHEN m.role = 'assistant' THEN (random() * 100000)::int END AS cache_read_tokens,
       CASE WHEN m.role = 'assistant' THEN (random() * 5000)::int END AS cache_creation_tokens,
       CASE WHEN m.role = 'toolResult' THEN 1000 + (random() * 499)::int ELSE (random() * 999)::int END AS text_n
FROM (
    SELECT p.session_id, p.tenant_id, p.cycle, p.model_a, p.model_b, p.share_b, g.seq,
           p.started_at + (g.seq - 1) * p.step * interval '1 second' AS created_at,
           CASE WHEN mod(g.seq - 1, p.cycle) = 0 THEN 'user'
                WHEN mod(mod(g.seq - 1, p.cycle), 2) = 1 OR mod(g.seq - 1, p.cycle) = p.cycle - 1
                THEN CASE WHEN random() < 0.01 THEN 'error' ELSE 'assistant' END
                ELSE 'toolResult' END AS role
    FROM {PLAN} p CROSS JOIN LATERAL generate_series(1, p.size) AS g(seq)
) AS m
ORDER BY m.created_at
"""

# The skeleton's rows as the message table stores them, in created_at order (the pool joined by hash).
MESSAGE_SELECT = f"""
SELECT s.id, s.seq, s.role, t.content, '' AS thinking,
       CASE WHEN s.role = 'assistant' AND mod(s.seq, 3) <> 0
            THEN jsonb_build_array(jsonb_build_object('id', 'call_' || left(s.id::text, 8), 'type', 'function',
                 'function', jsonb_build_object('name', 'bash', 'arguments', '{{"command": "pytest -x -q"}}'))) END,
       CASE WHEN s.role = 'toolResult' THEN 'bash' ELSE '' END, '' AS auth_type,
       CASE WHEN s.llm_request_id IS NOT NULL THEN 'req_' || left(replace(s.llm_request_id::text, '-', ''), 24)
            ELSE '' END AS request_id,
       s.model, CASE WHEN s.role = 'assistant' THEN 'end_turn' ELSE '' END AS finish_reason,
       s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_creation_tokens,
       s.input_tokens + s.output_tokens AS total_tokens,
       CASE WHEN s.role = 'assistant' THEN 300 + s.seq % 20000 END AS elapsed_ms,
       md5(s.session_id::text || s.seq) AS external_id, '' AS feishu_conversation_id,
       '{{}}'::jsonb AS metadata, s.created_at, s.created_at + interval '2 seconds' AS received_at,
       t.search_vector, s.conversation_id, s.llm_request_id, s.session_id, s.tenant_id, '' AS thinking_mode,
       s.cache_creation_tokens AS cache_creation_5m_tokens
FROM {SKELETON} s JOIN {TEXTS} t ON t.n = s.text_n
"""
MESSAGE_COLUMNS = (
    "id, seq, role, content, thinking, tool_calls, tool_name, auth_type, request_id, model, finish_reason, "
    "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, total_tokens, elapsed_ms, external_id, "
    "feishu_conversation_id, metadata, created_at, received_at, search_vector, conversation_id, llm_request_id, "
    "session_id, tenant_id, thinking_mode, cache_creation_5m_tokens"
)
_ZERO_MEASURES = (
    "cache_creation_1h_tokens, reported_cost_nano_usd, reported_cost_requests, long_context_cache_creation_1h_tokens, "
    "long_context_cache_creation_tokens, long_context_cache_read_tokens, long_context_input_tokens, "
    "long_context_output_tokens"
)
REQUEST_SELECT = f"""
SELECT s.llm_request_id, 'req_' || left(replace(s.llm_request_id::text, '-', ''), 24), '', s.model,
       coalesce(s.input_tokens, 0), coalesce(s.output_tokens, 0), coalesce(s.cache_read_tokens, 0),
       coalesce(s.cache_creation_tokens, 0), coalesce(s.input_tokens + s.output_tokens, 0), s.created_at,
       s.conversation_id, s.session_id, s.tenant_id, coalesce(s.cache_creation_tokens, 0),
       {", ".join(["0"] * len(_ZERO_MEASURES.split(", ")))}
FROM {SKELETON} s WHERE s.llm_request_id IS NOT NULL
"""
REQUEST_COLUMNS = (
    "id, request_id, auth_type, model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, "
    f"total_tokens, created_at, conversation_id, session_id, tenant_id, cache_creation_5m_tokens, {_ZERO_MEASURES}"
)
LOADS = {"message": (MESSAGE_COLUMNS, MESSAGE_SELECT), "llmrequest": (REQUEST_COLUMNS, REQUEST_SELECT)}


def make_skeleton(cursor, args, now: datetime) -> dict:
    plan = dashboard.plan_sessions(args.messages, now)
    tenant_of = {user: TENANTS[n % len(TENANTS)] for n, user in enumerate(dashboard.USERS)}
    execute(cursor, f"DROP TABLE IF EXISTS {PLAN}")
    execute(
        cursor,
        f"CREATE UNLOGGED TABLE {PLAN} (session_id uuid, tenant_id uuid, size int, started_at timestamptz, "
        "step float8, cycle int, model_a text, model_b text, share_b float8)",
    )
    with cursor.copy(f"COPY {PLAN} FROM STDIN") as copy:
        for p in plan:
            copy.write_row(
                (
                    p["id"],
                    tenant_of[p["user_id"]],
                    p["size"],
                    p["started_at"],
                    p["step"],
                    p["cycle"],
                    p["model_a"],
                    p["model_b"],
                    p["share_b"],
                )
            )
    make_texts(cursor)
    execute(cursor, f"DROP TABLE IF EXISTS {SKELETON}")
    execute(cursor, SKELETON_SQL)
    execute(cursor, f"ANALYZE {SKELETON}")
    first, last, count = execute(
        cursor, f"SELECT min(created_at), max(created_at), count(*) FROM {SKELETON}"
    ).fetchone()
    return {"sessions": len(plan), "messages": count, "first": first, "last": last}


# -- the layouts ------------------------------------------------------------------------------------------------
def partition_bounds(layout: str, first: datetime, last: datetime) -> list[tuple[date, date]]:
    if layout == "monthly":
        start = first.date().replace(day=1)

        def step(d: date) -> date:
            return (d.replace(day=28) + timedelta(days=4)).replace(day=1)
    else:
        start = first.date() - timedelta(days=first.weekday())

        def step(d: date) -> date:
            return d + timedelta(days=7)

    bounds = []
    while start <= last.date():
        bounds.append((start, step(start)))
        start = step(start)
    return bounds


def index_definitions(cursor, source: str, target: str, layout: str) -> list[tuple[str, str]]:
    """The source table's indexes re-made on `target`; a partitioned table's unique ones take the partition key."""
    rows = execute(
        cursor, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s ORDER BY indexname", [source]
    ).fetchall()
    out = []
    for name, definition in rows:
        new_name = f"{PREFIX}_{layout[0]}_{name}"[:63]
        sql = definition.replace(f"INDEX {name} ON", f"INDEX {new_name} ON").replace(
            f"public.{source} ", f"public.{target} "
        )
        if layout != "current" and " UNIQUE " in f" {sql} ":
            sql = re.sub(r"USING (\w+) \(([^()]*)\)", r"USING \1 (\2, created_at)", sql, count=1)
        out.append((name, sql))
    return out


def trigger_definitions(cursor, source: str, target: str) -> list[str]:
    rows = execute(
        cursor,
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
        [source],
    ).fetchall()
    return [
        definition.replace(f"TRIGGER {name} ", f"TRIGGER {PREFIX}_{name} ").replace(
            f"public.{source} ", f"public.{target} "
        )
        for name, definition in rows
    ]


def build_layout(cursor, layout: str, data: dict, timings: dict) -> dict:
    built = {}
    for table, source in TABLES.items():
        target = table_name(layout, table)
        execute(cursor, f"DROP TABLE IF EXISTS {target} CASCADE")
        partitioned = "" if layout == "current" else " PARTITION BY RANGE (created_at)"
        execute(
            cursor,
            f"CREATE TABLE {target} (LIKE {source} INCLUDING DEFAULTS INCLUDING CONSTRAINTS){partitioned}",
        )
        bounds = [] if layout == "current" else partition_bounds(layout, data["first"], data["now"] + timedelta(days=1))
        for low, high in bounds:
            execute(
                cursor,
                f"CREATE TABLE {target}_p{low:%Y%m%d} PARTITION OF {target} "
                f"FOR VALUES FROM ('{low.isoformat()}') TO ('{high.isoformat()}')",
            )
        for leaf in relations_of(cursor, target):  # a VACUUM is part of what is timed: none of autovacuum's
            execute(cursor, f"ALTER TABLE {leaf} SET (autovacuum_enabled = off)")
        columns, select = LOADS[table]
        start = time.perf_counter()
        execute(cursor, f"INSERT INTO {target} ({columns}) {select}")
        load_s = time.perf_counter() - start
        index_s = {}
        for name, sql in index_definitions(cursor, source, target, layout):
            start = time.perf_counter()
            execute(cursor, sql)
            index_s[name] = round(time.perf_counter() - start, 1)
        for sql in trigger_definitions(cursor, source, target):
            execute(cursor, sql)
        execute(cursor, f"VACUUM (ANALYZE) {target}")
        timings[f"{layout} {table}"] = {"load_s": round(load_s, 1), "index_s": index_s}
        built[table] = {
            "table": target,
            "partitions": [f"{target}_p{low:%Y%m%d}" for low, _ in bounds],
            "bounds": bounds,
        }
        print(f"  {target}: rows {load_s:.0f} s, indexes {sum(index_s.values()):.0f} s, {len(bounds)} partitions")
    return built


def relations_of(cursor, relation: str) -> list[str]:
    """The relation itself, or its leaf partitions (a partitioned table or index has no storage of its own)."""
    rows = execute(
        cursor, "SELECT relid::text FROM pg_partition_tree(%s::regclass) WHERE isleaf", [relation]
    ).fetchall()
    return [r[0] for r in rows] or [relation]


def sizes(cursor, target: str) -> dict:
    leaves = relations_of(cursor, target)
    heap = sum(execute(cursor, "SELECT pg_table_size(%s::regclass)", [leaf]).fetchone()[0] for leaf in leaves)
    rows = execute(cursor, f"SELECT count(*) FROM {target}").fetchone()[0]
    indexes = {}
    for (index,) in execute(
        cursor,
        "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = %s::regclass ORDER BY 1",
        [target],
    ).fetchall():
        indexes[re.sub(rf"^{PREFIX}_[a-z]_", "", index)] = sum(
            execute(cursor, "SELECT pg_relation_size(%s::regclass)", [leaf]).fetchone()[0]
            for leaf in relations_of(cursor, index)
        )
    return {"rows": rows, "heap_bytes": heap, "index_bytes": indexes}


def dead_rows(cursor, target: str) -> int:
    execute(cursor, "SELECT pg_stat_force_next_flush()")
    time.sleep(1.5)
    leaves = relations_of(cursor, target)
    return sum(
        execute(
            cursor, "SELECT coalesce(n_dead_tup, 0) FROM pg_stat_user_tables WHERE relid = %s::regclass", [leaf]
        ).fetchone()[0]
        for leaf in leaves
    )


# -- reads ---------------------------------------------------------------------------------------------------------
READS = {
    "a session's messages in seq order (first 100)": (
        "SELECT id, seq, role, content, created_at FROM {message} WHERE session_id = %(session)s ORDER BY seq LIMIT 100"
    ),
    "a session's messages after seq 100 (next page)": (
        "SELECT id, seq, role, content, created_at FROM {message} WHERE session_id = %(session)s AND seq > 100 "
        "ORDER BY seq LIMIT 100"
    ),
    "audit list: a tenant's newest 100": (
        "SELECT id, session_id, seq, role, model, total_tokens, created_at FROM {message} WHERE tenant_id = %(tenant)s "
        "ORDER BY created_at DESC, seq DESC LIMIT 100"
    ),
    "audit list: a tenant's 100 before a day 30 days back": (
        "SELECT id, session_id, seq, role, model, total_tokens, created_at FROM {message} WHERE tenant_id = %(tenant)s "
        "AND created_at < %(day)s ORDER BY created_at DESC, seq DESC LIMIT 100"
    ),
    "count: a tenant's messages in one day": (
        "SELECT count(*) FROM {message} WHERE tenant_id = %(tenant)s AND created_at >= %(day)s "
        "AND created_at < %(day)s + interval '1 day'"
    ),
    "a message by id (turns, sources, embeddings)": (
        "SELECT id, session_id, seq, content FROM {message} WHERE id = %(id)s"
    ),
    "the append's external-id lookup (10 ids)": (
        "SELECT id, seq, external_id FROM {message} WHERE session_id = %(session)s AND external_id = ANY(%(externals)s)"
    ),
    "a session's requests by time": (
        "SELECT id, model, total_tokens, created_at FROM {llmrequest} WHERE session_id = %(session)s "
        "ORDER BY created_at LIMIT 100"
    ),
}


def read_params(cursor, runs: int, data: dict) -> list[dict]:
    rng = random.Random(11)
    sample = execute(
        cursor,
        f"SELECT id, session_id, seq FROM {SKELETON} TABLESAMPLE SYSTEM (1) REPEATABLE (3) LIMIT %s",
        [runs],
    ).fetchall()
    days = (data["now"].date() - data["first"].date()).days
    out = []
    for n in range(runs):
        message_id, session_id, seq = sample[n % len(sample)]
        day = datetime.combine(data["now"].date() - timedelta(days=rng.randrange(1, days)), datetime.min.time(), UTC)
        out.append(
            {
                "session": session_id,
                "tenant": TENANTS[rng.randrange(len(TENANTS))],
                "day": day,
                "back30": datetime.combine(data["now"].date() - timedelta(days=30), datetime.min.time(), UTC),
                "id": message_id,
                "externals": [
                    hashlib.md5(f"{session_id}{s}".encode()).hexdigest() for s in range(max(seq - 9, 1), seq + 1)
                ],
            }
        )
    return out


def time_reads(cursor, layouts: dict, runs: int, data: dict) -> list[dict]:
    params = read_params(cursor, runs, data)
    results = []
    for label, sql in READS.items():
        seconds = {layout: [] for layout in layouts}
        for n in range(runs + 5):
            p = dict(params[n % runs])
            if "30 days back" in label:
                p["day"] = p["back30"]
            for layout, built in layouts.items():
                statement = sql.format(message=built["message"]["table"], llmrequest=built["llmrequest"]["table"])
                start = time.perf_counter()
                execute(cursor, statement, p).fetchall()
                if n >= 5:
                    seconds[layout].append(time.perf_counter() - start)
        row = {"query": label}
        for layout in layouts:
            row[layout] = benchlib.summary_ms(seconds[layout])
        results.append(row)
        print("  " + label + ": " + ", ".join(f"{k} {row[k]['p50_ms']}/{row[k]['p95_ms']} ms" for k in layouts))
    return results


# -- inserts ---------------------------------------------------------------------------------------------------------
def new_messages(rows: int, now: datetime, seed: int, sessions: int = 0) -> list[tuple]:
    """`rows` new messages in sessions of 200, created in the last two hours, as the message service stores them.
    The contents come from `seed`; the sessions (and so the external ids) from `seed` and `sessions`."""
    out = []
    for n in range(0, rows, 200):
        session = uuid.UUID(int=random.Random((seed * 1_000_003 + n) * 31 + sessions).getrandbits(128))
        stream = benchlib.MessageStream(seed=seed + n, prefix=str(session)[:8], start=now - timedelta(hours=2))
        items = stream.take(min(200, rows - n))
        text = benchlib.copy_rows(
            items, tenant_id=TENANTS[n % len(TENANTS)], session_id=session, first_seq=1, received_at=benchlib.iso(now)
        )
        out.extend(tuple(None if f == "\\N" else f for f in line.split("\t")) for line in text.decode().splitlines())
    return out


def unescape(field):
    if field is None:
        return None
    return field.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r").replace("\\\\", "\\")


def time_inserts(connection, layouts: dict, rows: int, now: datetime, compressions: tuple[str, ...] = ("off",)) -> dict:
    """COPY of `rows` messages, then `rows` more by INSERTs of 100 rows (autocommit: a transaction each); again for
    each `wal_compression` after the first (the figures' names then end in _<method>)."""
    columns = ", ".join(benchlib.MESSAGE_COLUMNS)
    placeholders = "(" + ", ".join(["%s"] * len(benchlib.MESSAGE_COLUMNS)) + ")"
    out = {}
    connection.autocommit = True
    with connection.cursor() as cursor:
        for layout, built in layouts.items():
            target = built["message"]["table"]
            out[layout] = {}
            for n, method in enumerate(compressions):
                suffix = f"_{method}" if n else ""
                execute(cursor, f"SET wal_compression = '{method}'")  # a superuser's session setting
                # The same contents each time, in new sessions (their unique keys).
                copied = new_messages(rows, now, seed=1, sessions=n)
                inserted = [tuple(unescape(f) for f in row) for row in new_messages(rows, now, seed=2, sessions=n)]
                fresh = [(uuid.uuid4(), *row[1:]) for row in copied]
                execute(cursor, "CHECKPOINT")  # alike: a first change is a whole page
                lsn, start = wal_lsn(cursor), time.perf_counter()
                with connection.transaction(), cursor.copy(f"COPY {target} ({columns}) FROM STDIN") as copy:
                    for row in fresh:
                        copy.write("\t".join("\\N" if f is None else str(f) for f in row) + "\n")
                copy_s, copy_wal = time.perf_counter() - start, wal_since(cursor, lsn)
                fresh = [(uuid.uuid4(), *row[1:]) for row in inserted]
                execute(cursor, "CHECKPOINT")
                lsn, start = wal_lsn(cursor), time.perf_counter()
                for at in range(0, len(fresh), INSERT_BATCH):
                    batch = fresh[at : at + INSERT_BATCH]
                    cursor.execute(
                        f"INSERT INTO {target} ({columns}) VALUES " + ", ".join([placeholders] * len(batch)),
                        [value for row in batch for value in row],
                    )
                insert_s, insert_wal = time.perf_counter() - start, wal_since(cursor, lsn)
                out[layout].update(
                    {
                        f"copy_us_per_row{suffix}": round(copy_s / rows * 1e6, 1),
                        f"copy_wal_bytes_per_row{suffix}": round(copy_wal / rows),
                        f"insert_us_per_row{suffix}": round(insert_s / rows * 1e6, 1),
                        f"insert_wal_bytes_per_row{suffix}": round(insert_wal / rows),
                    }
                )
            execute(cursor, "RESET wal_compression")
            print(f"  {layout}: {out[layout]}")
    connection.autocommit = False
    return out


# -- retention ---------------------------------------------------------------------------------------------------------
PURGE_SQL = """
UPDATE {target} SET content = '', thinking = '', search_vector = ''::tsvector, attachments = NULL,
  metadata = '{{}}', content_purged_at = now()
WHERE created_at >= %(low)s AND created_at < %(high)s AND content_purged_at IS NULL
"""


def time_retention(connection, layouts: dict, cutoff: datetime, purge_day: datetime) -> dict:
    out = {}
    connection.autocommit = True
    with connection.cursor() as cursor:
        for layout, built in layouts.items():
            result = {}
            message = built["message"]["table"]
            # Today's retention: the content purge (an UPDATE of the rows, kept), on one day of them.
            execute(cursor, "CHECKPOINT")
            lsn, start = wal_lsn(cursor), time.perf_counter()
            purged = execute(
                cursor, PURGE_SQL.format(target=message), {"low": purge_day, "high": purge_day + timedelta(days=1)}
            ).rowcount
            result["purge_one_day"] = {
                "rows": purged,
                "seconds": round(time.perf_counter() - start, 2),
                "wal_bytes": wal_since(cursor, lsn),
            }
            for table, info in built.items():
                target = info["table"]
                before = sizes(cursor, target)
                execute(cursor, "CHECKPOINT")
                lsn, start = wal_lsn(cursor), time.perf_counter()
                removed = 0
                if layout == "current":
                    removed = execute(cursor, f"DELETE FROM {target} WHERE created_at < %s", [cutoff]).rowcount
                    delete_s, delete_wal = time.perf_counter() - start, wal_since(cursor, lsn)
                    dead = dead_rows(cursor, target)
                    after_delete = sizes(cursor, target)
                    lsn, start = wal_lsn(cursor), time.perf_counter()
                    execute(cursor, f"VACUUM {target}")
                    vacuum_s, vacuum_wal = time.perf_counter() - start, wal_since(cursor, lsn)
                    step = {
                        "delete_s": delete_s,
                        "delete_wal": delete_wal,
                        "vacuum_s": vacuum_s,
                        "vacuum_wal": vacuum_wal,
                    }
                else:
                    dropped = [
                        name
                        for name, (low, high) in zip(info["partitions"], info["bounds"], strict=True)
                        if high <= cutoff.date()
                    ]
                    straddling = [
                        name
                        for name, (low, high) in zip(info["partitions"], info["bounds"], strict=True)
                        if low < cutoff.date() < high
                    ]
                    for name in dropped:
                        removed += execute(cursor, f"SELECT count(*) FROM {name}").fetchone()[0]
                    lsn, start = wal_lsn(cursor), time.perf_counter()
                    for name in dropped:
                        execute(cursor, f"ALTER TABLE {target} DETACH PARTITION {name}")
                        execute(cursor, f"DROP TABLE {name}")
                    drop_s, drop_wal = time.perf_counter() - start, wal_since(cursor, lsn)
                    lsn, start = wal_lsn(cursor), time.perf_counter()
                    for name in straddling:
                        removed += execute(cursor, f"DELETE FROM {name} WHERE created_at < %s", [cutoff]).rowcount
                    delete_s, delete_wal = time.perf_counter() - start, wal_since(cursor, lsn)
                    dead = dead_rows(cursor, target)
                    after_delete = sizes(cursor, target)
                    lsn, start = wal_lsn(cursor), time.perf_counter()
                    for name in straddling:
                        execute(cursor, f"VACUUM {name}")
                    vacuum_s, vacuum_wal = time.perf_counter() - start, wal_since(cursor, lsn)
                    step = {
                        "partitions_dropped": len(dropped),
                        "drop_s": drop_s,
                        "drop_wal": drop_wal,
                        "delete_s": delete_s,
                        "delete_wal": delete_wal,
                        "vacuum_s": vacuum_s,
                        "vacuum_wal": vacuum_wal,
                    }
                after = sizes(cursor, target)
                bytes_before = before["heap_bytes"] + sum(before["index_bytes"].values())
                bytes_after = after["heap_bytes"] + sum(after["index_bytes"].values())
                result[table] = {
                    "rows_removed": removed,
                    **{k: round(v, 2) if isinstance(v, float) else v for k, v in step.items()},
                    "dead_rows_after_delete": dead,
                    "bytes_before": bytes_before,
                    "bytes_after_delete": after_delete["heap_bytes"] + sum(after_delete["index_bytes"].values()),
                    "bytes_after": bytes_after,
                    "rows_after": after["rows"],
                    # What the table would take for its rows at the density it had before: the rest is free space.
                    "free_share_after": round(1 - (after["rows"] / before["rows"]) * bytes_before / bytes_after, 3)
                    if bytes_after
                    else 0,
                }
                print(f"  {layout} {table}: {result[table]}")
            out[layout] = result
    connection.autocommit = False
    return out


# -- output ----------------------------------------------------------------------------------------------------------
def per_row(size: dict) -> dict:
    rows = size["rows"] or 1
    return {
        "heap": size["heap_bytes"] / rows,
        "indexes": sum(size["index_bytes"].values()) / rows,
        "by_index": {name: b / rows for name, b in size["index_bytes"].items()},
    }


def measure(raw, group: list[str], args, data: dict, timings: dict, cutoff: datetime, purge_day: datetime) -> dict:
    """Build the layouts of `group` and measure them together: disk, reads (taking turns), inserts, retention."""
    layouts = {}
    with raw.cursor() as cursor:
        execute(cursor, "SET max_parallel_workers_per_gather = 0")  # rows written in created_at order
        for layout in group:
            print(f"Building {layout}…")
            layouts[layout] = build_layout(cursor, layout, data, timings)
        execute(cursor, "RESET max_parallel_workers_per_gather")
        execute(cursor, "CHECKPOINT")
        print("Sizes…")
        disk = {
            layout: {t: sizes(cursor, info["table"]) for t, info in built.items()} for layout, built in layouts.items()
        }
        print(f"Reads ({args.runs} runs each)…")
        reads = time_reads(cursor, layouts, args.runs, data)
    print(f"Inserts ({args.insert_rows:,} rows by COPY, as many by INSERTs of {INSERT_BATCH})…")
    inserts = time_inserts(raw, layouts, args.insert_rows, data["now"], args.wal_compression)
    print(f"Retention: everything before {cutoff:%Y-%m-%d}…")
    retention = time_retention(raw, layouts, cutoff, purge_day)
    return {"layouts": layouts, "disk": disk, "reads": reads, "inserts": inserts, "retention": retention}


def drop_layouts(raw, layouts: dict) -> None:
    raw.autocommit = True
    with raw.cursor() as cursor:
        for built in layouts.values():
            for info in built.values():
                execute(cursor, f"DROP TABLE IF EXISTS {info['table']} CASCADE")


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from django.db import connection

    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    load_before = os.getloadavg()
    connection.ensure_connection()
    raw = connection.connection
    raw.autocommit = True
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    timings: dict = {}
    with raw.cursor() as cursor:
        execute(cursor, "SET max_parallel_workers_per_gather = 0")  # rows written in created_at order
        execute(cursor, "SET work_mem = '256MB'")
        start = time.perf_counter()
        print(f"Generating {args.messages:,} messages…")
        data = make_skeleton(cursor, args, now)
        data["now"] = now
        timings["skeleton_s"] = round(time.perf_counter() - start, 1)
        print(
            f"  {data['messages']:,} messages, {data['sessions']:,} sessions, "
            f"{data['first']:%Y-%m-%d} to {data['last']:%Y-%m-%d}"
        )
    cutoff = datetime.combine(
        (data["first"].date().replace(day=28) + timedelta(days=4)).replace(day=1), datetime.min.time(), UTC
    )
    purge_day = cutoff - timedelta(days=3)
    groups = [[layout] for layout in args.layouts] if args.one_at_a_time else [args.layouts]
    layouts, disk, reads, inserts, retention = {}, {}, [], {}, {}
    for group in groups:
        built = measure(raw, group, args, data, timings, cutoff, purge_day)
        layouts.update(built["layouts"])
        disk.update(built["disk"])
        inserts.update(built["inserts"])
        retention.update(built["retention"])
        reads = [{**old, **new} for old, new in zip(reads, built["reads"], strict=True)] if reads else built["reads"]
        if args.one_at_a_time and not args.keep:
            drop_layouts(raw, built["layouts"])

    # -- the tables ------------------------------------------------------------------------------------------------
    names = list(layouts)
    rows = []
    for table in TABLES:
        for layout in names:
            pr = per_row(disk[layout][table])
            rows.append([f"{table}: heap + TOAST bytes/row", layout, f"{pr['heap']:.0f}"])
            rows.append([f"{table}: all indexes bytes/row", layout, f"{pr['indexes']:.0f}"])
    benchlib.print_table(["disk", "layout", "value"], rows, title="Disk per row")
    index_rows = []
    for table in TABLES:
        base = disk[names[0]][table]["index_bytes"]
        for index in base:
            cells = [table, index]
            for layout in names:
                size = disk[layout][table]
                cells.append(f"{size['index_bytes'].get(index, 0) / max(size['rows'], 1):.1f}")
            index_rows.append(cells)
    benchlib.print_table(["table", "index", *[f"{n} B/row" for n in names]], index_rows, title="Each index")
    read_rows = [[r["query"], *[f"{r[n]['p50_ms']:.2f} / {r[n]['p95_ms']:.2f}" for n in names]] for r in reads]
    benchlib.print_table(["read", *[f"{n} p50/p95 ms" for n in names]], read_rows, title="Reads")
    insert_rows = [
        [what, *[f"{inserts[n][key]}" for n in names]]
        for method, suffix in [("", ""), *[(f", {m}", f"_{m}") for m in args.wal_compression[1:]]]
        for what, key in (
            (f"COPY µs/row{method}", f"copy_us_per_row{suffix}"),
            (f"COPY WAL bytes/row{method}", f"copy_wal_bytes_per_row{suffix}"),
            (f"INSERT of 100 µs/row{method}", f"insert_us_per_row{suffix}"),
            (f"INSERT of 100 WAL bytes/row{method}", f"insert_wal_bytes_per_row{suffix}"),
        )
    ]
    benchlib.print_table(["insert (message)", *names], insert_rows, title="Inserts")
    ret_rows = []
    for table in TABLES:
        for layout in names:
            r = retention[layout][table]
            ret_rows.append(
                [
                    table,
                    layout,
                    f"{r['rows_removed']:,}",
                    f"{r.get('drop_s', 0):.2f}",
                    f"{r['delete_s']:.1f}",
                    f"{r['vacuum_s']:.1f}",
                    f"{(r.get('drop_wal', 0) + r['delete_wal'] + r['vacuum_wal']) / 2**20:.0f}",
                    f"{r['dead_rows_after_delete']:,}",
                    f"{r['bytes_after'] / 2**20:,.0f}",
                    f"{r['free_share_after']:.0%}",
                ]
            )
    benchlib.print_table(
        [
            "table",
            "layout",
            "rows removed",
            "drop s",
            "delete s",
            "vacuum s",
            "WAL MB",
            "dead rows",
            "MB after",
            "free",
        ],
        ret_rows,
        title=f"Retention: before {cutoff:%Y-%m-%d}",
    )
    purge_rows = [
        [
            layout,
            f"{retention[layout]['purge_one_day']['rows']:,}",
            retention[layout]["purge_one_day"]["seconds"],
            f"{retention[layout]['purge_one_day']['wal_bytes'] / 2**20:.0f}",
        ]
        for layout in names
    ]
    benchlib.print_table(
        ["layout", "rows", "seconds", "WAL MB"], purge_rows, title="Content purge of one day (today's retention)"
    )
    print(f"  load average before {load_before}, after {os.getloadavg()} on {os.cpu_count()} cores")

    if not args.keep:
        drop_layouts(raw, layouts)
        with raw.cursor() as cursor:
            for scratch in (SKELETON, TEXTS, PLAN):
                execute(cursor, f"DROP TABLE IF EXISTS {scratch}")
    path = benchlib.write_results(
        args.name,
        {
            "config": {k: v for k, v in vars(args).items() if k != "name"},
            "database": benchlib.database_description(),
            "server": benchlib.server_version(),
            "machine": {**benchlib.machine(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
            "data": {**data, "cutoff": cutoff},
            "build_timings": timings,
            "disk": disk,
            "reads": reads,
            "inserts": inserts,
            "retention": retention,
        },
    )
    print(f"\nWritten: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
