#!/usr/bin/env python
"""POST /api/v1/recall/ end to end at 1M records with the local model: statements, CPU and latency per call,
first-time and repeated queries, against a raw floor measured in the same run.

    .venv/bin/python bench/recall_local.py --generate-only    # once: pool embedding, 1M rows by COPY, HNSW build
    .venv/bin/python bench/recall_local.py                    # the measurement (reuses the rows)

Data: a tenant `bench-recall-local-<N>` with N valid records over --users users (skewed as in bench/recall.py:
the heaviest user holds ~4.6% of the rows). Their vectors are in the local model's own space, under its real
key (`local:all-MiniLM-L6-v2:384`), so the product's recall finds them: embedding a million texts on two cores
would take hours, so a pool of --pool distinct facts is embedded with the local model and record i gets the
vector of one pool text plus Gaussian noise (σ = --noise per dimension, ≈ cosine 0.96 to its text), normalised,
and that text as its content (bench/recall_dense.generate, binary COPY).

Measured in-process (django.test.Client, the real view, service and local model under ACE_EMBEDDER=local), per
user set ("heaviest": the 20 users with most rows; "random": users drawn uniformly), each query asked twice:
`first` (a question never asked before in this process: its embedding runs in the call) and `repeated` (the same
question again: its vector comes from recall's query cache). Per call: wall time (p50/p95/p99), statements
(CaptureQueriesContext), this process's CPU (time.process_time: Python and the model's threads) and the
PostgreSQL backend's CPU (/proc/<pid>/stat of the connection's backend).

The floor, in the same run on one psycopg connection: the raw model encode of the query (LocalEmbedder.embed)
plus one SQL statement — the user's nearest 10 records (same tenant/user/valid/key filter, pgvector's iterative
HNSW scan allowed, plan left to PostgreSQL). recall@10 of the product's vector list (its records' top 10 by
cosine) against an exact scan is checked on the same queries.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import recall  # noqa: E402
import recall_dense  # noqa: E402

TARGET_P95_MS = 50


class LocalSpace:
    """The product's local embedder under its own key: what recall_dense.generate needs from a space."""

    def __init__(self):
        from memory_app.embedders import get_embedder

        self.model = get_embedder()
        if self.model.provider != "local":
            raise SystemExit(f"ACE_EMBEDDER must be local for this bench, not {self.model.provider}")
        self.key = self.model.key
        self.dimensions = self.model.dimensions

    def embed(self, texts):
        return self.model.embed(texts)


QUESTIONS = [
    "What did {name} do in {place}?",
    "Who {activity} in {place}?",
    "When did {name} go to {place}?",
    "How much did {name} spend in {place}?",
    "Which city did {name} visit with friends?",
    "Has {name} ever {activity}?",
]
ZH_QUESTIONS = ["{name}在{place}做了什么？", "{name}去{place}花了多少钱？"]


def questions(rng: random.Random, count: int, asked: set[str]) -> list[str]:
    """`count` questions about the facts, none of them in `asked` (which they join)."""
    out = []
    while len(out) < count:
        if rng.random() < 0.2:
            text = rng.choice(ZH_QUESTIONS).format(name=rng.choice(recall.NAMES), place=rng.choice(recall.ZH_PLACES))
        else:
            text = rng.choice(QUESTIONS).format(
                name=rng.choice(recall.NAMES), place=rng.choice(recall.PLACES), activity=rng.choice(recall.ACTIVITIES)
            )
        if text not in asked:
            asked.add(text)
            out.append(text)
    return out


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (a PostgreSQL backend), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def stats(values: list[float], scale: float = 1000.0) -> dict:
    ms = sorted(v * scale for v in values)
    return {
        "p50": round(benchlib.percentile(ms, 50), 1),
        "p95": round(benchlib.percentile(ms, 95), 1),
        "p99": round(benchlib.percentile(ms, 99), 1),
        "mean": round(statistics.fmean(ms), 2),
    }


def api_calls(client, api_key: str, asks: list[tuple[str, str]]) -> dict:
    """POST /api/v1/recall/ for each (user, question): wall, statements, this process's CPU, the backend's CPU."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    connection.ensure_connection()
    backend = connection.connection.info.backend_pid
    wall, cpu, pg, statements = [], [], [], []
    for user, question in asks:
        body = json.dumps({"query": question, "user_id": user, "top_k": 10})
        connection.queries_log.clear()  # a full log (9,000 statements) would make the capture count nothing
        with CaptureQueriesContext(connection) as captured:
            pg_before, cpu_before, start = cpu_seconds(backend), time.process_time(), time.perf_counter()
            response = client.post(
                "/api/v1/recall/", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_key}"
            )
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - cpu_before)
            pg.append(cpu_seconds(backend) - pg_before)
        if response.status_code != 200 or response.json()["degraded"]:
            raise RuntimeError(f"HTTP {response.status_code}: {response.content[:300]!r}")
        statements.append(len(captured.captured_queries))
    return {
        "calls": len(asks),
        "wall_ms": stats(wall),
        "cpu_ms": round(statistics.fmean(cpu) * 1000, 2),
        "pg_cpu_ms": round(statistics.fmean(pg) * 1000, 2),
        "statements": sorted(set(statements)),
    }


def floor_calls(space: LocalSpace, tenant, asks: list[tuple[str, str]]) -> dict:
    """The raw floor of each (user, question): the model's encode, then one psycopg statement for the user's
    nearest 10 (planner's choice, iterative HNSW allowed). Also returns the query vectors, for recall@10."""
    from memory_app.query_vectors import vector_literal

    dims, key = space.dimensions, space.key
    sql = (
        f"SELECT id, (embedding::vector({dims})) <=> %s::vector({dims}) FROM memory_app_record "
        "WHERE embedding_key = %s AND tenant_id = %s AND user_id = %s AND valid "
        f"ORDER BY (embedding::vector({dims})) <=> %s::vector({dims}) LIMIT 10"
    )
    encode_wall, encode_cpu, sql_wall, sql_cpu, sql_pg, literals = [], [], [], [], [], []
    with benchlib.psycopg_connect(autocommit=True) as conn:
        backend = conn.info.backend_pid
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute("SET hnsw.ef_search = 100")
        for user, question in asks:
            cpu_before, start = time.process_time(), time.perf_counter()
            literal = vector_literal(space.model.embed([question])[0])
            encode_wall.append(time.perf_counter() - start)
            encode_cpu.append(time.process_time() - cpu_before)
            pg_before, cpu_before, start = cpu_seconds(backend), time.process_time(), time.perf_counter()
            conn.execute(sql, [literal, key, tenant.pk, user, literal]).fetchall()
            sql_wall.append(time.perf_counter() - start)
            sql_cpu.append(time.process_time() - cpu_before)
            sql_pg.append(cpu_seconds(backend) - pg_before)
            literals.append(literal)
    total = [a + b for a, b in zip(encode_wall, sql_wall, strict=True)]
    return {
        "calls": len(asks),
        "wall_ms": stats(total),
        "encode_ms": stats(encode_wall),
        "sql_ms": stats(sql_wall),
        "cpu_ms": round(statistics.fmean(encode_cpu) * 1000 + statistics.fmean(sql_cpu) * 1000, 2),
        "sql_cpu_ms": round(statistics.fmean(sql_cpu) * 1000, 2),
        "pg_cpu_ms": round(statistics.fmean(sql_pg) * 1000, 2),
    }, literals


def vector_recall_at_10(space: LocalSpace, tenant, asks: list[tuple[str, str]], literals: list[str]) -> float:
    """recall@10 of the product's vector list (memory_app.selectors.recall._vector_ids: exact, or the sign-bit
    shortlist for a heavy user) against an exact scan of the user's rows."""
    from memory_app.selectors.recall import _vector_ids

    dims = space.dimensions
    where = "tenant_id = %s AND user_id = %s AND valid"
    exact_sql = (
        f"SELECT id::text, (embedding::vector({dims})) <=> %s::vector({dims}) AS d FROM memory_app_record "
        f"WHERE embedding_key = %s AND {where} ORDER BY d LIMIT 10"
    )
    found_sql = (
        f"SELECT id::text, (embedding::vector({dims})) <=> %s::vector({dims}) FROM memory_app_record "
        "WHERE id = ANY(%s::uuid[])"
    )
    scores = []
    with benchlib.psycopg_connect(autocommit=True) as conn:
        for (user, _), literal in zip(asks, literals, strict=True):
            values = [float(x) for x in literal[1:-1].split(",")]
            ids = _vector_ids("memory_app_record", where, [tenant.pk, user], values, dims, space.key)[:10]
            with conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                exact = [(i, float(d)) for i, d in conn.execute(exact_sql, [literal, space.key, tenant.pk, user])]
            distance = dict(conn.execute(found_sql, [literal, ids]).fetchall())
            found = sorted(((i, float(distance[i])) for i in ids), key=lambda pair: pair[1])
            score = recall.recall_at_10(found, exact)
            if score is not None:
                scores.append(score)
    return round(statistics.fmean(scores), 4)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(space: LocalSpace, tenant, users_by_count, args) -> list[dict]:
    from django.test import Client

    from memory_app.query_vectors import query_vectors
    from sessions_app.services.apikeys import apikey_create

    api_key = apikey_create(tenant_name=tenant.name, name="bench/recall_local.py").plain_key
    client = Client()
    rng, asked = random.Random(args.seed), set()
    sets = {
        "heaviest": [u for u, _ in users_by_count[:20]],
        "random": [u for u, _ in users_by_count],
    }
    warmup = [(sets["heaviest"][i % 20], q) for i, q in enumerate(questions(rng, 10, asked))]
    api_calls(client, api_key, warmup)
    floor_calls(space, tenant, warmup)
    runs = []
    for round_number in range(1, args.rounds + 1):
        for name, users in sets.items():
            picked = users if name == "heaviest" else rng.sample(users, min(len(users), args.queries))
            asks = [(picked[i % len(picked)], q) for i, q in enumerate(questions(rng, args.queries, asked))]
            load_before = load_average()
            first = api_calls(client, api_key, asks)  # new questions: embedded in the call
            repeated = api_calls(client, api_key, asks)  # the same again: vectors from the cache
            floor, literals = floor_calls(space, tenant, asks)
            counts = dict(users_by_count)
            run = {
                "round": round_number,
                "users": name,
                "user_rows_median": sorted(counts[u] for u, _ in asks)[len(asks) // 2],
                "first": first,
                "repeated": repeated,
                "floor": floor,
                "vector_recall@10": vector_recall_at_10(space, tenant, asks, literals),
                "load_average": f"{load_before} -> {load_average()}",
                "cached_queries": len(query_vectors),
            }
            runs.append(run)
            print_run(run)
    return runs


def print_run(run: dict) -> None:
    rows = []
    for label in ("first", "repeated", "floor"):
        r = run[label]
        w = r["wall_ms"]
        rows.append(
            [
                label,
                r["calls"],
                ",".join(str(n) for n in r.get("statements", [1])),
                w["p50"],
                w["p95"],
                w["p99"],
                r["cpu_ms"],
                r["pg_cpu_ms"],
            ]
        )
    title = (
        f"round {run['round']}, {run['users']} users (median {run['user_rows_median']:,} rows), "
        f"vector recall@10 {run['vector_recall@10']}, load {run['load_average']}"
    )
    benchlib.print_table(
        ["call", "calls", "statements", "p50 ms", "p95 ms", "p99 ms", "CPU ms/call", "PG CPU ms/call"], rows, title
    )
    f = run["floor"]
    print(
        f"  floor parts: encode p50/p95 {f['encode_ms']['p50']}/{f['encode_ms']['p95']} ms, "
        f"SQL p50/p95 {f['sql_ms']['p50']}/{f['sql_ms']['p95']} ms, this process's CPU for the SQL alone "
        f"{f['sql_cpu_ms']} ms/call (the floor of a cached query vector)",
        flush=True,
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--pool", type=int, default=20_000, help="distinct facts embedded with the local model")
    parser.add_argument("--noise", type=float, default=0.015, help="Gaussian noise per dimension")
    parser.add_argument("--queries", type=int, default=100, help="distinct questions per user set and round")
    parser.add_argument("--rounds", type=int, default=2, help="repeats of the whole measurement")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument(
        "--keyword-pool",
        type=int,
        default=None,
        help="an experiment: recall's KEYWORD_POOL (matches scored per keyword list) set to this for the run",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    benchlib.setup_django()
    from sessions_app.services.apikeys import tenant_get_or_create

    tenant = tenant_get_or_create(name=f"bench-recall-local-{args.records}")
    print(f"Recall end to end at {args.records:,} records, local model; {benchlib.database_description()}")
    space = LocalSpace()
    data = recall_dense.generate(tenant, args.records, args.users, args.pool, args.noise, args.seed, space)
    print(f"  data: {data}", flush=True)
    if args.generate_only:
        return 0
    users_by_count = benchlib.users_by_record_count(tenant)
    print(f"  {len(users_by_count):,} users; heaviest {users_by_count[0][1]:,} rows", flush=True)
    if args.keyword_pool:
        from memory_app.selectors import recall as recall_selector

        recall_selector.KEYWORD_POOL = args.keyword_pool
        print(f"  experiment: KEYWORD_POOL = {args.keyword_pool}")
    runs = measure(space, tenant, users_by_count, args)
    worst = max(max(run["first"]["wall_ms"]["p95"], run["repeated"]["wall_ms"]["p95"]) for run in runs)
    print(
        f"\ntarget p95 < {TARGET_P95_MS} ms (first and repeated): worst p95 {worst} ms -> "
        f"{'met' if worst < TARGET_P95_MS else 'NOT met'}"
    )
    path = benchlib.write_results(
        f"recall-local-{args.records}" + (f"-pool{args.keyword_pool}" if args.keyword_pool else ""),
        {
            "records": args.records,
            "keyword_pool": args.keyword_pool,
            "data": data,
            "database": benchlib.server_version(),
            "runs": runs,
            "machine": benchlib.machine(),
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
