#!/usr/bin/env python
"""The Celery broker: trivial tasks per second through each broker, and how fast a backlog of embedding tasks
drains compared with the embedding model's own time for the same texts.

    .venv/bin/python bench/broker.py                       # 3,000 trivial tasks, 5,000 embedding tasks
    .venv/bin/python bench/broker.py --tasks 1000 --embed-tasks 1000
    .venv/bin/python bench/broker.py --skip-embed

Trivial tasks: a real worker (subprocess, as in the Procfile: prefork, concurrency 2, prefetch 1, acks_late)
consumes a queue `bench`; this process publishes N `celery.accumulate` tasks (Celery's built-in no-op) through
one producer and waits until the queue and the broker's unacknowledged set are empty. tasks/s = N ÷ seconds
from the first publish to empty. Brokers, measured in the same run: the embedded Valkey (the default), Redis at
--redis-url (db 13 of the local server unless given; skipped when it does not answer), and the old default,
kombu's file-system transport (fewer tasks: it does about one a second).

Embedding backlog: --embed-tasks tasks of `embed_messages` with 2 messages each (what completed turns queue),
published to the `embedding` queue of the embedded broker before its worker starts (the Procfile's `embedder`
line: one process); the drain is timed from the worker's first vector to the last. Twice: as it runs (a task
takes the ids of the embed_messages tasks waiting behind it, up to ACE_EMBEDDER_BATCH = 128), and one task at
a time (ACE_EMBEDDER_BATCH=2 in the worker). Baseline in the same run: the same texts embedded in this process
by the same embedder (default: the offline all-MiniLM-L6-v2), model loaded, in batches of 128 and of 2.
Messages are made once in the bench database (tenant `bench-broker`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import benchlib

QUEUE = "bench"


def worker(env: dict, queues: str, concurrency: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "aceproject", "worker", "-Q", queues, "-c", str(concurrency),
         "-l", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=benchlib.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def use_broker(url: str, options: dict) -> None:
    """Point this process's Celery app at another broker (what tests/conftest.py does)."""
    from kombu import pools

    from aceproject.celery import app

    app.conf.update(broker_url=url, broker_write_url=url, broker_read_url=url, broker_transport_options=options)
    # Read from the Django settings under the CELERY_ namespace, that key wins over the one above.
    app.conf.update(CELERY_BROKER_TRANSPORT_OPTIONS=options)
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


def waiting(conn, queue: str, unacked_before: int = 0) -> int:
    """Messages in the queue plus those taken but not acknowledged since the start (Redis keeps them in
    `unacked`; others' leftovers, such as a killed worker's, are not ours to wait for)."""
    channel = conn.default_channel
    count = channel._size(queue)
    client = getattr(channel, "client", None)
    if client is not None:
        count += max(0, client.zcard(channel.unacked_index_key) - unacked_before)
    return count


def unacked(conn) -> int:
    client = getattr(conn.default_channel, "client", None)
    return client.zcard(conn.default_channel.unacked_index_key) if client is not None else 0


def trivial(name: str, url: str, options: dict, tasks: int, env: dict) -> dict:
    from aceproject.celery import app

    use_broker(url, options)
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)
        channel = conn.default_channel
        channel.queue_declare(QUEUE)
        channel.queue_purge(QUEUE)
    proc = worker({**env, "CELERY_BROKER_URL": url} if url else env, QUEUE, 2)
    try:
        with app.connection_for_write() as conn:
            before = unacked(conn)
            # Warm-up: the worker is up when it has drained 4 tasks.
            for _ in range(4):
                app.send_task("celery.accumulate", args=[1], queue=QUEUE, connection=conn)
            deadline = time.monotonic() + 120
            while waiting(conn, QUEUE, before) and time.monotonic() < deadline:
                time.sleep(0.05)
            start = time.perf_counter()
            with app.producer_or_acquire() as producer:
                for i in range(tasks):
                    app.send_task("celery.accumulate", args=[i], queue=QUEUE, producer=producer)
            published = time.perf_counter() - start
            while waiting(conn, QUEUE, before):
                time.sleep(0.01)
                if time.perf_counter() - start > 3600:
                    raise RuntimeError(f"{name}: the queue did not drain within an hour")
            elapsed = time.perf_counter() - start
    finally:
        proc.terminate()
        proc.wait(30)
    return {
        "broker": name,
        "tasks": tasks,
        "publish_per_s": round(tasks / published),
        "seconds": round(elapsed, 2),
        "tasks_per_s": round(tasks / elapsed, 1),
    }


def bench_messages(count: int) -> list:
    """`count` user/assistant messages of the bench tenant, made once (no tasks queued while making them)."""
    import random

    from django.conf import settings

    from sessions_app.models import Message, Session, Tenant
    from sessions_app.services.messages import messages_append

    tenant, _ = Tenant.objects.get_or_create(name="bench-broker")
    ids = list(
        Message.objects.filter(tenant=tenant, session__name="bench-broker").order_by("seq").values_list("pk", flat=True)
    )
    if len(ids) >= count:
        return ids[:count]
    settings.ACE_EMBED_MESSAGES = False  # this process queues the tasks itself
    rng = random.Random(5)
    session = Session.objects.create(tenant=tenant, user_id="bench", name="bench-broker", tool="chat")
    for start in range(0, count, 500):
        items = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": benchlib.prose(rng, 150, 900)}
            for i in range(start, min(count, start + 500))
        ]
        messages_append(tenant=tenant, session_id=session.pk, items=items)
    settings.ACE_EMBED_MESSAGES = True
    return bench_messages(count)


def embed_texts(embedder, texts: list[str], batch: int) -> float:
    start = time.perf_counter()
    for chunk in range(0, len(texts), batch):
        embedder.embed(texts[chunk : chunk + batch])
    return time.perf_counter() - start


def drain(ids: list, env: dict) -> dict:
    """Queue one embed_messages task per 2 messages, start the embedder worker, time first vector to last."""
    from django.conf import settings

    from aceproject.celery import app
    from memory_app.models import MessageEmbedding

    MessageEmbedding.objects.filter(message_id__in=ids).delete()
    use_broker(settings.CELERY_BROKER_URL, settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("embedding")
        with app.producer_or_acquire() as producer:
            for i in range(0, len(ids), 2):
                app.send_task(
                    "memory_app.tasks.embed_messages", args=[[str(pk) for pk in ids[i : i + 2]]], producer=producer
                )
    launched = time.perf_counter()
    proc = worker(env, "embedding", 1)
    try:
        first, done = None, 0
        while done < len(ids):
            done = MessageEmbedding.objects.filter(message_id__in=ids).count()
            if done and first is None:
                first = time.perf_counter()
            if time.perf_counter() - launched > 3600:
                raise RuntimeError("the embedding backlog did not drain within an hour")
            time.sleep(0.2)
        end = time.perf_counter()
    finally:
        proc.terminate()
        proc.wait(30)
    return {"worker_start_seconds": round(first - launched, 2), "seconds": round(end - first, 2)}


def embedding_backlog(tasks: int, env: dict) -> dict:
    """Raw model time (batches of ACE_EMBEDDER_BATCH, and of 2 as one task per turn would), then the backlog
    drained by the embedder worker one task at a time (ACE_EMBEDDER_BATCH=2 in the worker: no task takes its
    neighbours') and as it runs by default (a task takes the ids of those waiting behind it)."""
    from django.conf import settings

    from memory_app.embedders import get_embedder
    from sessions_app.models import Message

    ids = bench_messages(tasks * 2)
    texts = list(Message.objects.filter(pk__in=ids).values_list("content", flat=True))
    embedder = get_embedder()
    embedder.embed(["warm up"])  # the model loads once
    # Alternated, so that the machine's load drifts over both the raw figures and the drains.
    raw = embed_texts(embedder, texts, settings.ACE_EMBEDDER_BATCH)
    coalesced = drain(ids, env)
    raw_pairs = embed_texts(embedder, texts, 2)
    one_by_one = drain(ids, {**env, "ACE_EMBEDDER_BATCH": "2"})
    texts_count = len(ids)
    return {
        "embedder": embedder.label,
        "tasks": tasks,
        "texts": texts_count,
        "rows": [
            ["raw: the model in this process, batches of 128", texts_count, round(raw, 2)],
            ["raw: the model in this process, batches of 2", texts_count, round(raw_pairs, 2)],
            ["backlog drained, a task takes those waiting (default)", texts_count, coalesced["seconds"]],
            ["backlog drained, one task (2 texts) at a time", texts_count, one_by_one["seconds"]],
        ],
        "worker_start_seconds": coalesced["worker_start_seconds"],
        "drain_vs_raw": round(coalesced["seconds"] / raw, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=3000, help="trivial tasks per broker")
    parser.add_argument("--fs-tasks", type=int, default=30, help="trivial tasks through the file-system broker")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"))
    parser.add_argument("--embed-tasks", type=int, default=5000)
    parser.add_argument("--skip-embed", action="store_true")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    os.environ.pop("CELERY_BROKER_URL", None)  # the default: the embedded broker
    benchlib.setup_django()
    from django.conf import settings

    from aceproject.data_folder import filesystem_broker_options, make_broker_folders

    env = {**os.environ, "ACE_DATA_DIR": str(settings.ACE_DATA_DIR)}
    env.pop("CELERY_BROKER_URL", None)
    embedded = (settings.CELERY_BROKER_URL, settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    rows = [trivial("embedded Valkey (default)", "", {}, args.tasks, env) | {"url": embedded[0]}]
    use_broker(*embedded)
    try:
        import redis

        redis.Redis.from_url(args.redis_url, socket_connect_timeout=0.5).ping()
        rows.append(trivial("Redis server", args.redis_url, {}, args.tasks, env) | {"url": args.redis_url})
    except Exception as error:  # noqa: BLE001
        print(f"Redis at {args.redis_url} skipped: {error}")
    fs_options = filesystem_broker_options(settings.ACE_DATA_DIR)  # where the worker's settings put it
    make_broker_folders(fs_options)
    rows.append(
        trivial("file system (old default)", "filesystem://localhost/", fs_options, args.fs_tasks, env)
        | {"url": "filesystem://"}
    )
    use_broker(*embedded)
    benchlib.print_table(
        ["broker", "tasks", "published/s", "seconds", "tasks/s"],
        [[r["broker"], r["tasks"], r["publish_per_s"], r["seconds"], r["tasks_per_s"]] for r in rows],
        title="Trivial tasks, one worker (prefork, concurrency 2, prefetch 1, acks_late)",
    )
    result = {"machine": benchlib.machine(), "code": benchlib.code_version(), "trivial": rows}
    if not args.skip_embed:
        backlog = embedding_backlog(args.embed_tasks, env)
        result["embedding_backlog"] = backlog
        benchlib.print_table(
            ["what", "texts", "seconds", "texts/s"],
            [[what, n, seconds, round(n / seconds, 1)] for what, n, seconds in backlog["rows"]],
            title=f"Embedding backlog: {backlog['tasks']} embed_messages tasks × 2 texts ({backlog['embedder']}); "
            f"worker start to first vector {backlog['worker_start_seconds']} s; "
            f"drained ÷ raw = {backlog['drain_vs_raw']}",
        )
    print(f"Results: {benchlib.write_results('broker', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
