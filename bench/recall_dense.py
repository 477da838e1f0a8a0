#!/usr/bin/env python
"""Recall latency at 1M records with DENSE vectors: the same queries as bench/recall.py, on vectors shaped like
the local model's.

    .venv/bin/python bench/recall_dense.py                    # 1,000,000 records (generation + HNSW build: minutes)
    .venv/bin/python bench/recall_dense.py --records 100000

Why: bench/recall.py uses the `hash` embedder (the only one fast enough for a million rows here), whose sparse
lexical vectors are nearly equidistant from one another — an HNSW graph over them is a poor one, so its HNSW
figures say little about a real model. Here every record gets a vector in all-MiniLM-L6-v2's space: a pool of
--pool distinct synthetic facts is embedded with the local model, and record i takes the vector of pool text
(i mod pool, shuffled) plus Gaussian noise (σ = --noise per dimension, ≈ cosine 0.95 to its text), normalised —
a million distinct, realistically clustered points. Queries are fresh facts embedded with the same model.
Rows, users (skewed, same as bench/recall.py) and the three variants (`app`, forced `hnsw`, `exact`) and their
recall@10 are as in bench/recall.py; the vectors live under their own embedder key
(`bench-dense/all-MiniLM-L6-v2+noise`) with its own partial HNSW index, written with binary COPY.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import recall  # noqa: E402

KEY = "bench-dense/all-MiniLM-L6-v2+noise"


class DenseSpace:
    """Looks like an embedder to recall.time_queries: the query side embeds with the local model."""

    key = KEY
    dimensions = 384

    def __init__(self):
        from memory_app.embedders.local import LocalEmbedder

        self.model = LocalEmbedder()

    def embed(self, texts):
        return self.model.embed(texts)


def generate(tenant, n: int, users: int, pool: int, noise: float, seed: int, space) -> dict:
    """N records of `tenant` in `space` (anything with .key, .dimensions and .embed(texts): the vectors' key)."""
    import numpy as np
    from django.db import connection
    from pgvector.psycopg import register_vector

    from memory_app import embeddings
    from memory_app.models import Record

    key = space.key
    have = Record.objects.filter(tenant=tenant, embedding_key=key).count()
    info = {"existing": have, "generated": 0}
    index = f"record_hnsw_{hashlib.sha1(key.encode()).hexdigest()[:12]}"
    if have < n:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {index}")
        embeddings._indexed.clear()
        rng = __import__("random").Random(seed)
        texts = list(dict.fromkeys(recall.fact(rng) for _ in range(pool * 2)))[:pool]
        print(f"  embedding a pool of {len(texts):,} facts with the local model...", flush=True)
        begin = time.perf_counter()
        base = np.asarray(space.embed(texts), dtype=np.float32)
        info["pool_seconds"] = round(time.perf_counter() - begin, 1)
        order = np.random.default_rng(seed).permutation(len(texts))
        created = benchlib.datetime.now(benchlib.UTC)
        print(f"  writing {n - have:,} records (binary COPY)...", flush=True)
        begin = time.perf_counter()
        columns = (
            "id, tenant_id, user_id, namespace, type, content, fields, confidence, valid, strategy, revision, "
            "created_at, updated_at, invalidated_reason, embedding, embedding_key"
        )
        types = [
            "uuid", "uuid", "varchar", "varchar", "varchar", "text", "jsonb", "float8", "bool", "varchar", "int4",
            "timestamptz", "timestamptz", "varchar", "vector", "varchar",
        ]  # fmt: skip
        chunk = 20_000
        with benchlib.psycopg_connect() as conn:
            register_vector(conn)
            for start in range(have, n, chunk):
                stop = min(start + chunk, n)
                noise_rng = np.random.default_rng(seed * 1_000_003 + start)
                picks = order[np.arange(start, stop) % len(texts)]
                vectors = base[picks] + noise_rng.normal(0.0, noise, size=(stop - start, base.shape[1])).astype(
                    np.float32
                )
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                with (
                    conn.cursor() as cursor,
                    cursor.copy(f"COPY memory_app_record ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
                ):
                    copy.set_types(types)
                    for offset, i in enumerate(range(start, stop)):
                        user, _ = recall.row_of(i, users)
                        row_id = uuid.UUID(bytes=hashlib.md5(f"dense:{tenant.pk}:{i}".encode()).digest())
                        copy.write_row(
                            (
                                row_id,
                                tenant.pk,
                                user,
                                "",
                                "fact",
                                texts[picks[offset]],
                                "{}",
                                1.0,
                                True,
                                "bench",
                                1,
                                created,
                                created,
                                "",
                                vectors[offset],
                                key,
                            )  # fmt: skip
                        )
                conn.commit()
                if (stop - have) % 100_000 == 0 or stop == n:
                    print(
                        f"    {stop:,} / {n:,} ({(stop - have) / (time.perf_counter() - begin):,.0f} rows/s)",
                        flush=True,
                    )
        info["generated"] = n - have
        info["generate_seconds"] = round(time.perf_counter() - begin, 1)
        with connection.cursor() as cursor:
            # As autovacuum would, in time: the visibility map lets the recall's covering indexes be read alone.
            cursor.execute("VACUUM (ANALYZE) memory_app_record")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [index])
        if cursor.fetchone() is None:
            print("  building the HNSW index...", flush=True)
            cursor.execute("SET maintenance_work_mem = '6GB'")
            begin = time.perf_counter()
            embeddings._indexed.clear()
            embeddings.ensure_vector_index(space)
            info["index_build_seconds"] = round(time.perf_counter() - begin, 1)
            cursor.execute("RESET maintenance_work_mem")
            print(f"  index built in {info['index_build_seconds']} s", flush=True)
        cursor.execute("SELECT pg_size_pretty(pg_relation_size(%s::regclass))", [index])
        info["index_size"] = cursor.fetchone()[0]
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--pool", type=int, default=5_000, help="distinct texts embedded with the local model")
    parser.add_argument("--noise", type=float, default=0.015, help="Gaussian noise per dimension")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args()
    benchlib.setup_django()

    from sessions_app.services.apikeys import tenant_get_or_create

    tenant = tenant_get_or_create(name=f"bench-recall-dense-{args.records}")
    print(f"Dense recall at {args.records:,} records over {args.users:,} users; {benchlib.database_description()}")
    space = DenseSpace()
    data = generate(tenant, args.records, args.users, args.pool, args.noise, args.seed, space)
    if args.generate_only:
        return 0
    users_by_count = benchlib.users_by_record_count(tenant)
    print(f"  {len(users_by_count):,} users; heaviest {users_by_count[0][1]:,} rows, index {data['index_size']}")
    db = recall.time_queries(tenant, users_by_count, args.queries, args.warmup, args.seed, embedder=space)
    recall.print_database_part(db, f"Database part, dense vectors ({args.records:,} records)")
    worst_p95 = max(r["app_ms"]["p95_ms"] for r in db.values())
    worst_recall = min(r["app_recall@10"] for r in db.values())
    met = worst_p95 < recall.TARGET_P95_MS and worst_recall >= recall.TARGET_RECALL
    print(
        f"\ntarget: worst app p95 {worst_p95} ms, worst recall@10 {worst_recall:.3f} -> {'met' if met else 'NOT met'}"
    )
    path = benchlib.write_results(
        f"recall-dense-{args.records}",
        {"records": args.records, "data": data, "database_part": db, "machine": benchlib.machine()},
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
