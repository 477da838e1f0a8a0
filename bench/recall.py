#!/usr/bin/env python
"""Recall latency over many records with a user filter: HNSW against exact search in the same run, the
index's recall@10 against exact, end-to-end POST /api/v1/recall/, and embedding throughput per provider.

    .venv/bin/python bench/recall.py                      # 100,000 records
    .venv/bin/python bench/recall.py --records 1000000    # 1M (generation + index build: several minutes)

Data: a tenant `bench-recall-<N>` with N valid records (type fact) spread over --users users with a skewed
distribution (user = ⌊users · u³⌋, u uniform: the heaviest user holds ~4.6% of the rows, most hold a few
dozen), content = a synthetic everyday fact (names, places, numbers, English or Chinese) and its vector from
the `hash` embedder (384 dimensions), written with COPY by this process while --procs processes compute the
vectors. A re-run reuses the rows already there (and completes a partial set). The HNSW index of the hash
key (memory_app.embeddings.ensure_vector_index) is dropped before a bulk load and rebuilt after it.
The index covers every record with that key in the database, other tenants included: its size is reported.

Timed, with psycopg on one connection (the database part only: execute + fetch), p50/p95 over --queries
queries per user set ("heaviest": the 20 users with most rows; "random": users drawn uniformly):

- `app`: memory_app.selectors.recall._vector_ids's SQL as it runs (tenant + user + valid filter, LIMIT 50,
  `hnsw.iterative_scan = relaxed_order`, `hnsw.ef_search = 100`), plan left to PostgreSQL: for a user with
  few rows it reads them through the btree index and sorts them (exact); for a heavy user it may walk HNSW;
- `hnsw`: the same query with the filter written so that no btree index can serve it (`tenant_id::text`,
  `user_id || ''`) and sequential/bitmap scans off: HNSW with iterative scan, always;
- `exact`: the same query as `app` with `enable_indexscan = off`: the user's rows (bitmap scan of the btree
  index or a sequential scan) with exact distances, sorted. The ground truth.

recall@10 = the share of the exact top 10 (ties at the 10th distance count as equal) that a variant returns
in its first 10. Then: POST /api/v1/recall/ (records only) in-process with django.test.Client, and embedding
throughput of `hash`, `local` and (when ACE_EMBEDDER_BASE_URL is set) `openai`.
Targets: p95 < 20 ms for the database part at 1M records, with index recall@10 ≥ 0.95.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
import uuid
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TARGET_P95_MS = 20
TARGET_RECALL = 0.95
CHUNK = 10_000
CANDIDATES = 50

NAMES = [
    "Anna", "Ben", "Chloe", "Daniel", "Emma", "Felix", "Grace", "Hugo", "Isla", "Jack", "Kiran", "Lena", "Mateo",
    "Nora", "Oscar", "Priya", "Quinn", "Rosa", "Sam", "Tara", "Umar", "Vera", "Wei", "Xiaoyu", "Yusuf", "Zoe",
    "李娜", "王芳", "张伟", "刘洋", "陈静", "杨帆",
]  # fmt: skip
ACTIVITIES = [
    "started learning the piano", "adopted a rescue cat", "ran a half marathon", "moved to a new flat",
    "switched jobs to a bakery", "planted tomatoes on the balcony", "booked a trip", "joined a book club",
    "took a pottery class", "bought a second-hand bike", "sprained an ankle", "passed the driving test",
    "started a vegetable garden", "organised a birthday dinner", "fixed the kitchen sink", "visited grandparents",
    "learned to make dumplings", "signed up for a photography course", "painted the living room",
    "went hiking in the mountains", "got promoted to team lead", "started therapy", "sold the old car",
]  # fmt: skip
PLACES = [
    "Lisbon", "Kyoto", "Toronto", "Hangzhou", "Chengdu", "Berlin", "Nairobi", "Lima", "Oslo", "Seoul",
    "Melbourne", "Austin", "Porto", "Dublin", "Hanoi", "Marseille", "Cape Town", "Vancouver",
]  # fmt: skip
DETAILS = [
    "it cost {n} dollars", "it took {n} weeks", "with {n} friends", "on day {n} of the plan", "after {n} tries",
    "at {n} in the morning", "for about {n} hours", "the budget was {n} euros",
]  # fmt: skip
ZH_ACTIVITIES = ["开始学吉他", "养了一只猫", "搬到了新家", "参加了读书会", "去爬山了", "学会了包饺子", "换了新工作"]
ZH_PLACES = ["杭州", "成都", "上海", "北京", "西安", "厦门", "苏州"]


def fact(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return (
            f"{rng.choice(NAMES)}{rng.choice(['上周', '昨天', '去年', '这个月'])}在{rng.choice(ZH_PLACES)}"
            f"{rng.choice(ZH_ACTIVITIES)}，花了{rng.randint(2, 900)}元。"
        )
    detail = rng.choice(DETAILS).format(n=rng.randint(2, 900))
    return f"{rng.choice(NAMES)} {rng.choice(ACTIVITIES)} in {rng.choice(PLACES)}; {detail}."


def row_of(i: int, users: int) -> tuple[str, str]:
    """The user and content of row i (deterministic, independent of N: 100k is a prefix of 1M)."""
    rng = random.Random(i * 7919 + 17)
    return f"user{int(users * rng.random() ** 3):05d}", fact(rng)


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join("0" if x == 0.0 else f"{x:.6g}" for x in vector) + "]"


def copy_chunk(args: tuple) -> bytes:
    """COPY text of rows [start, stop) (in a worker process: the hash embedder is pure Python)."""
    start, stop, users, tenant_id, key, dims, created = args
    from memory_app.embedders.hash import HashEmbedder

    embedder = HashEmbedder(dims)
    rows = [row_of(i, users) for i in range(start, stop)]
    vectors = embedder.embed([content for _, content in rows])
    out = []
    for i, ((user, content), vector) in enumerate(zip(rows, vectors, strict=True), start=start):
        row_id = uuid.UUID(bytes=hashlib.md5(f"{tenant_id}:{i}".encode()).digest())
        fields = (
            str(row_id), tenant_id, user, "", "fact", content, "{}", "1.0", "t", "bench", "1", created, created, "",
            _vector_literal(vector), key,
        )  # fmt: skip
        out.append("\t".join(benchlib.copy_field(v) for v in fields))
    return ("\n".join(out) + "\n").encode()


COPY_SQL = (
    "COPY memory_app_record (id, tenant_id, user_id, namespace, type, content, fields, confidence, valid, strategy, "
    "revision, created_at, updated_at, invalidated_reason, embedding, embedding_key) FROM STDIN"
)


def index_name(key: str) -> str:
    return f"record_hnsw_{hashlib.sha1(key.encode()).hexdigest()[:12]}"


def generate(tenant, n: int, users: int, procs: int) -> dict:
    from django.db import connection

    from memory_app import embeddings
    from memory_app.embedders.hash import HashEmbedder
    from memory_app.models import Record

    embedder = HashEmbedder()
    have = Record.objects.filter(tenant=tenant, embedding_key=embedder.key).count()
    info = {"existing": have, "generated": 0, "generate_seconds": 0.0, "index_build_seconds": None}
    if have >= n:
        print(f"  reusing {have:,} records of {tenant.name}")
    else:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {index_name(embedder.key)}")  # rebuilt after the bulk load
        embeddings._indexed.clear()
        created = benchlib.iso(benchlib.datetime.now(benchlib.UTC))
        tasks = [
            (start, min(start + CHUNK, n), users, str(tenant.pk), embedder.key, embedder.dimensions, created)
            for start in range(have, n, CHUNK)
        ]
        print(f"  generating {n - have:,} records ({procs} processes compute hash vectors, COPY here)...")
        begin = time.perf_counter()
        with benchlib.psycopg_connect() as conn, get_context("spawn").Pool(procs) as pool:
            for done, payload in enumerate(pool.imap(copy_chunk, tasks), start=1):
                with conn.cursor() as cursor, cursor.copy(COPY_SQL) as copy:
                    copy.write(payload)
                conn.commit()
                if done % 10 == 0 or done == len(tasks):
                    rate = (done * CHUNK) / (time.perf_counter() - begin)
                    print(f"    {min(have + done * CHUNK, n):,} / {n:,} ({rate:,.0f} rows/s)", flush=True)
        info["generated"] = n - have
        info["generate_seconds"] = round(time.perf_counter() - begin, 1)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_app_record")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [index_name(embedder.key)])
        exists = cursor.fetchone() is not None
        if not exists:
            print("  building the HNSW index...", flush=True)
            cursor.execute("SET maintenance_work_mem = '6GB'")
            cursor.execute("SET max_parallel_maintenance_workers = 1")
            begin = time.perf_counter()
            embeddings._indexed.clear()
            embeddings.ensure_vector_index(embedder)
            info["index_build_seconds"] = round(time.perf_counter() - begin, 1)
            cursor.execute("RESET maintenance_work_mem")
            print(f"  index built in {info['index_build_seconds']} s")
        cursor.execute("SELECT count(*) FROM memory_app_record WHERE embedding_key = %s", [embedder.key])
        info["index_rows"] = cursor.fetchone()[0]
        cursor.execute("SELECT pg_size_pretty(pg_relation_size(%s::regclass))", [index_name(embedder.key)])
        info["index_size"] = cursor.fetchone()[0]
    return info


# -- the timed queries -----------------------------------------------------------------------------------
def _sql(variant: str, dims: int) -> str:
    if variant == "hnsw":
        where = "tenant_id::text = %s AND user_id || '' = %s AND valid::int = 1"
    else:
        where = "tenant_id = %s AND user_id = %s AND valid"
    return (
        f"SELECT id, distance FROM (SELECT id, (embedding::vector({dims})) <=> %s::vector({dims}) AS distance "
        f"FROM memory_app_record WHERE embedding_key = %s AND {where} "
        f"ORDER BY (embedding::vector({dims})) <=> %s::vector({dims}) LIMIT {CANDIDATES}) AS nearest ORDER BY distance"
    )


SETTINGS = {
    "app": "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = 100",
    "hnsw": "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = 100; "
    "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off",
    "exact": "SET LOCAL enable_indexscan = off",
}


APP_WHERE = "tenant_id = %s AND user_id = %s AND valid"


def query(conn, variant: str, dims: int, key: str, tenant_id: str, user: str, literal: str, explain=False):
    """(seconds, [(id, distance)…]) of one variant; for `app`, the product's own two queries
    (memory_app.selectors.recall.count_sql, then vector_sql with or without the sign-bit shortlist), timed together."""
    from django.conf import settings

    from memory_app.selectors.recall import count_sql, vector_sql

    tenant_param = str(tenant_id)
    with conn.transaction(), conn.cursor() as cursor:
        if variant == "app":
            start = time.perf_counter()
            cursor.execute(count_sql("memory_app_record", APP_WHERE), [key, tenant_param, user])
            shortlist = cursor.fetchone()[0] > settings.ACE_RECALL_EXACT_UP_TO
            sql = vector_sql("memory_app_record", APP_WHERE, dims, shortlist=shortlist)
            if shortlist:
                params = [key, tenant_param, user, literal, literal]
            else:
                cursor.execute(SETTINGS["app"])
                params = [literal, key, tenant_param, user, literal]
            if explain:
                cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
                return json.dumps(cursor.fetchone()[0]), shortlist
            cursor.execute(sql, params)
            ids = [str(r[0]) for r in cursor.fetchall()]
            seconds = time.perf_counter() - start
            cursor.execute(  # the distances, for recall@10 (not timed)
                f"SELECT id::text, (embedding::vector({dims})) <=> %s::vector({dims}) FROM memory_app_record "
                "WHERE id = ANY(%s::uuid[])",
                [literal, ids],
            )
            distance = dict(cursor.fetchall())
            return seconds, [(i, float(distance[i])) for i in ids]
        cursor.execute(SETTINGS[variant])
        sql = _sql(variant, dims)
        params = [literal, key, tenant_param, user, literal]
        start = time.perf_counter()
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        return time.perf_counter() - start, [(str(r[0]), float(r[1])) for r in rows]


def recall_at_10(found: list[tuple[str, float]], exact: list[tuple[str, float]]) -> float | None:
    if not exact:
        return None
    want = min(10, len(exact))
    cutoff = exact[want - 1][1] + 1e-6  # ties at the 10th distance are equally right
    exact_ids = {i for i, d in exact if d <= cutoff}
    got = sum(1 for i, d in found[:10] if i in exact_ids or d <= cutoff - 2e-6)
    return min(1.0, got / want)


def time_queries(
    tenant, users_by_count: list[tuple[str, int]], n_queries: int, warmup: int, seed: int, embedder=None
) -> dict:
    """`embedder`: anything with .key, .dimensions and .embed(texts) (default: the hash embedder)."""
    from memory_app.embedders.hash import HashEmbedder

    embedder = embedder or HashEmbedder()
    rng = random.Random(seed)
    heaviest = users_by_count[:20]
    sets = {
        "heaviest": [heaviest[i % len(heaviest)] for i in range(n_queries)],
        "random": [rng.choice(users_by_count) for _ in range(n_queries)],
    }
    out = {}
    with benchlib.psycopg_connect(autocommit=True) as conn:
        for name, users in sets.items():
            queries = [(user, count, _vector_literal(embedder.embed([fact(rng)])[0])) for user, count in users]
            for user, _, literal in queries[:warmup]:
                for variant in ("app", "exact"):  # the forced HNSW walk is timed last, cold or not
                    query(conn, variant, embedder.dimensions, embedder.key, tenant.pk, user, literal)
            times = {v: [] for v in SETTINGS}
            recalls = {"app": [], "hnsw": []}
            short = {"app": 0, "hnsw": 0}
            app_uses_hnsw = app_shortlists = 0
            # One variant at a time over all queries: a forced HNSW walk reads hundreds of MB and would evict
            # the pages the next variant's query needs, timing cache misses that steady traffic does not have.
            found = {variant: [] for variant in SETTINGS}
            for variant in ("app", "exact", "hnsw"):
                for user, _, literal in queries:
                    seconds, rows = query(conn, variant, embedder.dimensions, embedder.key, tenant.pk, user, literal)
                    times[variant].append(seconds)
                    found[variant].append(rows)
            for i, (user, count, literal) in enumerate(queries):
                results = {variant: found[variant][i] for variant in SETTINGS}
                for variant in ("app", "hnsw"):
                    r = recall_at_10(results[variant], results["exact"])
                    if r is not None:
                        recalls[variant].append(r)
                    if len(results[variant]) < min(CANDIDATES, count):
                        short[variant] += 1
                plan, shortlisted = query(
                    conn, "app", embedder.dimensions, embedder.key, tenant.pk, user, literal, explain=True
                )
                app_uses_hnsw += "record_hnsw_" in plan
                app_shortlists += shortlisted
            counts = sorted(c for _, c in users)
            out[name] = {
                "queries": len(queries),
                "user_rows_median": counts[len(counts) // 2],
                "user_rows_max": counts[-1],
                "app_plan_uses_hnsw": app_uses_hnsw,
                "app_shortlist": app_shortlists,
                **{f"{v}_ms": benchlib.summary_ms(times[v]) for v in SETTINGS},
                **{
                    f"{v}_recall@10": round(sum(recalls[v]) / len(recalls[v]), 4) if recalls[v] else None
                    for v in recalls
                },
                **{f"{v}_fewer_than_asked": short[v] for v in short},
            }
    return out


def end_to_end(tenant, users_by_count, n_queries: int, seed: int) -> dict:
    from django.conf import settings
    from django.test import Client

    from memory_app.embedders import get_embedder
    from sessions_app.services.apikeys import apikey_create

    settings.ACE_EMBEDDER, settings.ACE_EMBEDDER_DIMENSIONS = "hash", None
    get_embedder.cache_clear()
    key = apikey_create(tenant_name=tenant.name, name="bench/recall.py").plain_key
    client, rng = Client(), random.Random(seed + 1)
    out = {}
    for name, pool in (("heaviest", users_by_count[:20]), ("random", users_by_count)):
        times = []
        for i in range(n_queries + 5):
            user = pool[i % len(pool)][0] if name == "heaviest" else rng.choice(pool)[0]
            body = {"query": fact(rng), "user_id": user, "top_k": 10, "include_messages": False}
            start = time.perf_counter()
            response = client.post(
                "/api/v1/recall/",
                data=json.dumps(body),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {key}",
            )
            elapsed = time.perf_counter() - start
            assert response.status_code == 200, response.content[:300]
            if i >= 5:
                times.append(elapsed)
        out[name] = benchlib.summary_ms(times)
    return out


def embedding_throughput(seed: int) -> dict:
    from django.conf import settings

    from memory_app.embedders import EmbedderError
    from memory_app.embedders.hash import HashEmbedder

    rng = random.Random(seed + 2)
    texts = [fact(rng) for _ in range(4000)]
    out = {}
    embedder = HashEmbedder()
    start = time.perf_counter()
    embedder.embed(texts)
    out["hash"] = {"texts": len(texts), "texts_per_s": round(len(texts) / (time.perf_counter() - start))}
    try:
        from memory_app.embedders.local import LocalEmbedder

        local = LocalEmbedder()
        local.embed(texts[:16])  # load the model first
        sample = texts[:1024]
        start = time.perf_counter()
        local.embed(sample)
        out["local"] = {
            "texts": len(sample),
            "texts_per_s": round(len(sample) / (time.perf_counter() - start)),
            "key": local.key,
        }
    except (EmbedderError, ImportError) as error:
        out["local"] = {"skipped": str(error)}
    if getattr(settings, "ACE_EMBEDDER_BASE_URL", ""):
        from memory_app.embedders import _embedder_for

        try:
            remote = _embedder_for(
                "openai",
                settings.ACE_EMBEDDER_MODEL,
                settings.ACE_EMBEDDER_BASE_URL,
                settings.ACE_EMBEDDER_API_KEY,
                settings.ACE_EMBEDDER_DIMENSIONS,
                settings.ACE_EMBEDDER_TIMEOUT,
                settings.ACE_EMBEDDER_BATCH,
            )
            sample = texts[:512]
            start = time.perf_counter()
            remote.embed(sample)
            out["openai"] = {"texts": len(sample), "texts_per_s": round(len(sample) / (time.perf_counter() - start))}
        except EmbedderError as error:
            out["openai"] = {"skipped": str(error)}
    else:
        out["openai"] = {"skipped": "ACE_EMBEDDER_BASE_URL is not set"}
    return out


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100, help="timed queries per user set (default 100)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--procs", type=int, default=2, help="processes computing vectors (default 2)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--no-embedders", action="store_true", help="skip the embedding throughput")
    parser.add_argument("--name", default=None, help="results name (default recall-<N>)")
    return parser.parse_args()


def print_database_part(db: dict, title: str) -> None:
    """The table of time_queries' results: per user set and variant, latency, recall@10, plan counts."""
    rows = []
    for name, r in db.items():
        for variant in SETTINGS:
            recall = r.get(f"{variant}_recall@10")
            rows.append(
                [
                    f"{name} (median {r['user_rows_median']:,} rows)",
                    variant,
                    r[f"{variant}_ms"]["p50_ms"],
                    r[f"{variant}_ms"]["p95_ms"],
                    "1 (truth)" if variant == "exact" else f"{recall:.3f}",
                    r.get(f"{variant}_fewer_than_asked", ""),
                    f"{r['app_shortlist']}/{r['queries']} · {r['app_plan_uses_hnsw']}/{r['queries']}"
                    if variant == "app"
                    else "",
                ]
            )
    benchlib.print_table(
        ["users", "query", "p50 ms", "p95 ms", "recall@10", "short", "shortlist · HNSW"], rows, title=title
    )


def main() -> int:
    args = parse_args()
    benchlib.setup_django()

    from sessions_app.services.apikeys import tenant_get_or_create

    tenant = tenant_get_or_create(name=f"bench-recall-{args.records}")
    print(f"Recall at {args.records:,} records over {args.users:,} users; {benchlib.database_description()}")
    data = generate(tenant, args.records, args.users, args.procs)
    if args.generate_only:
        return 0
    users_by_count = benchlib.users_by_record_count(tenant)
    print(f"  {len(users_by_count):,} users; heaviest {users_by_count[0][1]:,} rows, index {data['index_size']}")
    db = time_queries(tenant, users_by_count, args.queries, args.warmup, args.seed)
    print_database_part(
        db, f"Database part ({args.records:,} records in the tenant, {data['index_rows']:,} in the index)"
    )
    e2e = end_to_end(tenant, users_by_count, args.queries // 2, args.seed)
    benchlib.print_table(
        ["users", "p50 ms", "p95 ms"],
        [[name, s["p50_ms"], s["p95_ms"]] for name, s in e2e.items()],
        title="POST /api/v1/recall/ in-process (hash embedder, records only, top_k 10)",
    )
    throughput = {} if args.no_embedders else embedding_throughput(args.seed)
    if throughput:
        benchlib.print_table(
            ["embedder", "texts/s", "note"],
            [[k, v.get("texts_per_s", ""), v.get("skipped", v.get("key", ""))] for k, v in throughput.items()],
            title="Embedding throughput (one process)",
        )
    worst_p95 = max(r["app_ms"]["p95_ms"] for r in db.values())
    worst_recall = min(r["app_recall@10"] for r in db.values())
    met = worst_p95 < TARGET_P95_MS and worst_recall >= TARGET_RECALL
    print(
        f"\ntarget: app p95 < {TARGET_P95_MS} ms and recall@10 >= {TARGET_RECALL}: worst p95 {worst_p95} ms, worst "
        f"recall@10 {worst_recall:.3f} -> {'met' if met else 'NOT met'}"
        + ("" if args.records >= 1_000_000 else " (the target is for 1M records)")
    )
    name = args.name or f"recall-{args.records}"
    path = benchlib.write_results(
        name,
        {
            "records": args.records,
            "users": args.users,
            "database": benchlib.server_version(),
            "data": data,
            "database_part": db,
            "end_to_end": e2e,
            "embedding_throughput": throughput,
            "machine": benchlib.machine(),
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
