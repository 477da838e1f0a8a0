#!/usr/bin/env python
"""Recall over one user's message vectors on both sides of ACE_RECALL_EXACT_UP_TO (2,000): the product's
nearest-messages query as recall runs it (sign-bit shortlist), the same forced exact, and the ground truth of
bench/recall.py (index scans off: every distance), with recall@10 against it; then POST /api/v1/recall/ end to end.

    .venv/bin/python bench/recall_messages.py                         # users of 3,000 and 10,000 messages
    .venv/bin/python bench/recall_messages.py --sizes 3000,10000,30000 --queries 40

Data: a tenant `bench-recall-messages` with one user per size (`messages-<n>`) holding n short messages
(alternating user and assistant turns, sessions of 2,500, written by the message service) and their vectors from
the `hash` embedder (written with COPY), beside 20,000 messages of other users. A re-run reuses them. No HNSW
index is built (a user's own rows are read through the btree index or shortlisted; bench/recall.py measures HNSW).

Variants, timed on Django's connection inside recall's transaction settings (`RECALL_SETTINGS`), p50/p95 over
--queries questions:
- `shortlist`: `_vector_scores` as recall calls it (messages, with their places): counted, then the nearest
  ACE_RECALL_SHORTLIST (400) by Hamming distance of the sign bits, ranked exactly;
- `exact`: the same with ACE_RECALL_EXACT_UP_TO above the user's rows: every distance, through the btree index;
- `truth`: the exact query with index scans off (bench/recall.py's `exact`): the ground truth.
recall@10 = the share of the truth's top 10 (ties at the 10th distance count) a variant returns in its first 10.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TENANT = "bench-recall-messages"
OTHERS = 20_000
PLACES = ["Hangzhou", "Lisbon", "Kyoto", "Chengdu", "Berlin", "Austin", "Lyon", "Xiamen", "Oslo", "Hanoi", "Quito"]
THINGS = ["museum", "tea house", "night market", "bookshop", "temple", "harbour", "garden", "jazz bar", "bakery"]
DOINGS = ["visited", "photographed", "recommended", "skipped", "booked", "found", "missed", "loved", "reviewed"]
WITH = ["my sister", "the kids", "Max the dog", "a colleague", "alone", "old friends", "my parents"]


def sentence(n: int) -> str:
    return (
        f"{DOINGS[n % 9].capitalize()} the {THINGS[(n // 9) % 9]} in {PLACES[(n // 81) % 11]} "
        f"with {WITH[(n // 7) % 7]}, note {n}"
    )


def question(n: int) -> str:
    return f"Which {THINGS[n % 9]} in {PLACES[(n * 5) % 11]} did I go to with {WITH[(n * 3) % 7]}?"


def ensure_user(tenant, user_id: str, count: int) -> None:
    """`count` messages of `user_id`, with vectors (adds what a previous run left missing)."""
    from django.db import connection

    from memory_app.embedders import get_embedder
    from memory_app.models import MessageEmbedding
    from sessions_app.models import Message, Session
    from sessions_app.services.messages import messages_append

    have = Message.objects.filter(tenant=tenant, session__user_id=user_id).count()
    if have >= count:
        return
    print(f"  writing {count - have} messages of {user_id}...", flush=True)
    embedder, start = get_embedder(), datetime(2026, 1, 1, tzinfo=UTC)
    for first in range(have, count, 2500):
        session = Session.objects.create(tenant=tenant, user_id=user_id, name=f"{user_id} {first}", tool="chat")
        texts = [sentence(n) for n in range(first, min(first + 2500, count))]
        stored = []
        for at in range(0, len(texts), 1000):
            items = [
                {
                    "role": ("user", "assistant")[(at + i) % 2],
                    "content": text,
                    "created_at": start + timedelta(seconds=first + at + i),
                }
                for i, text in enumerate(texts[at : at + 1000])
            ]
            stored += messages_append(tenant=tenant, session_id=session.pk, items=items).messages
        vectors = embedder.embed([m.content for m in stored])
        columns = "message_id, tenant_id, session_id, user_id, created_at, embedding, embedding_key"
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY {MessageEmbedding._meta.db_table} ({columns}) FROM STDIN") as copy,
        ):
            for message, vector in zip(stored, vectors, strict=True):
                literal = "[" + ",".join(repr(x) for x in vector) + "]"
                copy.write_row((message.pk, tenant.pk, session.pk, user_id, message.created_at, literal, embedder.key))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_session, sessions_app_message, memory_app_messageembedding")


def nearest(tenant, user_id: str, vector: list[float], variant: str) -> tuple[float, list[float]]:
    """(seconds, the distances of the first 10) of one variant's nearest-messages query."""
    from django.conf import settings
    from django.db import connection, transaction

    from memory_app.embedders import get_embedder
    from memory_app.query_vectors import vector_literal
    from memory_app.selectors.recall import RECALL_SETTINGS, _vector_scores

    embedder = get_embedder()
    where = "tenant_id = %s AND user_id = %s"
    saved = settings.ACE_RECALL_EXACT_UP_TO
    settings.ACE_RECALL_EXACT_UP_TO = saved if variant == "shortlist" else 10**9
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(RECALL_SETTINGS)
            if variant == "truth":
                cursor.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_seqscan = on")
            began = time.perf_counter()
            rows = _vector_scores(
                "memory_app_messageembedding",
                where,
                [tenant.pk, user_id],
                vector_literal(vector),
                embedder.dimensions,
                embedder.key,
                places=True,
            )
            elapsed = time.perf_counter() - began
    finally:
        settings.ACE_RECALL_EXACT_UP_TO = saved
    return elapsed, [round(1.0 - similarity, 6) for _, similarity, _ in rows[:10]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="3000,10000", help="message vectors of the timed users")
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    benchlib.setup_django()
    from django.conf import settings

    settings.ACE_EMBEDDER, settings.ACE_EMBEDDER_DIMENSIONS = "hash", None
    from memory_app import embeddings
    from memory_app.embedders import get_embedder
    from sessions_app.services.apikeys import apikey_create

    get_embedder.cache_clear()
    embedder = get_embedder()
    embeddings._indexed.add((embedder.key, embedder.dimensions))  # no HNSW index (see the docstring)
    created = apikey_create(tenant_name=TENANT)
    tenant, client = created.api_key.tenant, benchlib.InProcessClient(created.plain_key)
    for n in range(4):
        ensure_user(tenant, f"other-{n}", OTHERS // 4)
    for size in sizes:
        ensure_user(tenant, f"messages-{size}", size)

    questions = [question(n) for n in range(args.queries)]
    vectors = embedder.embed(questions)
    rows, results = [], {}
    for size in sizes:
        user = f"messages-{size}"
        truths = [nearest(tenant, user, v, "truth") for v in vectors]
        for v in vectors[:3]:  # warm the caches
            for variant in ("shortlist", "exact"):
                nearest(tenant, user, v, variant)
        result = {}
        for variant in ("shortlist", "exact", "truth"):
            timings, found = [], []
            for vector, (_, truth) in zip(vectors, truths, strict=True):
                elapsed, distances = nearest(tenant, user, vector, variant)
                timings.append(elapsed)
                found.append(sum(1 for d in distances if d <= truth[-1]) / len(truth))
            result[variant] = {**benchlib.summary_ms(timings), "recall_at_10": round(sum(found) / len(found), 3)}
        api = []
        for q in questions:
            began = time.perf_counter()
            client.call("post", "/api/v1/recall/", {"query": q, "user_id": user}, 200)
            api.append(time.perf_counter() - began)
        result["api"] = benchlib.summary_ms(api)
        results[size] = result
        for variant in ("shortlist", "exact", "truth"):
            r = result[variant]
            rows.append([f"{size:,}", variant, r["p50_ms"], r["p95_ms"], f"{r['recall_at_10']:.3f}"])
        rows.append([f"{size:,}", "POST /recall/", result["api"]["p50_ms"], result["api"]["p95_ms"], ""])
    benchlib.print_table(
        ["messages", "query", "p50 ms", "p95 ms", "recall@10"],
        rows,
        title=f"Nearest messages of one user ({benchlib.database_description()}, {args.queries} questions)",
    )
    print(f"results: {benchlib.write_results('recall_messages', {'sizes': sizes, 'results': results})}")


if __name__ == "__main__":
    main()
