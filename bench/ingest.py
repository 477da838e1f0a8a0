#!/usr/bin/env python
"""Bulk message ingest through the real HTTP API, against raw COPY of the same rows.

    .venv/bin/python bench/ingest.py            # 100k messages per side
    .venv/bin/python bench/ingest.py --quick    # 20k messages per side
    .venv/bin/python bench/ingest.py --profile  # also: where a 500-message request spends its time

API side: `gunicorn aceproject.wsgi` (sync workers, as in the Procfile) on a free loopback port; N client
threads, each posting batches of 500 pre-encoded messages to its own session with
`POST /api/v1/sessions/{id}/messages/`, over http.client (keep-alive where the server allows it).

Baseline: the same rows (same columns, same content, same seq) written with psycopg 3
`COPY sessions_app_message (...) FROM STDIN`, 500 rows per COPY, one transaction per COPY, by the same
number of threads, each to its own fresh session, with the COPY text built before the clock starts. It
writes the message table only: no conversations, no LLM requests, no counters (conversation_id and
llm_request_id are NULL), no validation and no response. It is the floor cost of storing the rows,
indexes and the generated search vector included; the API does all of that plus the bookkeeping.

The two sides alternate in rounds (COPY, API, COPY, API, …) so that table growth, autovacuum and
checkpoints fall on both. Throughput = messages written / wall-clock seconds of the side's rounds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TENANT = "bench-ingest"
TARGET_RATIO = 0.25


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000, help="messages per side (default 100000)")
    parser.add_argument("--quick", action="store_true", help="20000 messages per side")
    parser.add_argument("--batch", type=int, default=500, help="messages per request / per COPY (default 500)")
    parser.add_argument("--threads", type=int, default=4, help="concurrent clients (default 4)")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating COPY/API rounds (default 2)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="then profile one request in-process")
    parser.add_argument("--profile-only", action="store_true", help="only the in-process profile")
    parser.add_argument("--keep", action="store_true", help="keep the written rows (default: delete them)")
    parser.add_argument("--name", default=None, help="results file name (default ingest or ingest-quick)")
    args = parser.parse_args()
    if args.quick:
        args.messages = 20_000
    args.name = args.name or ("ingest-quick" if args.quick else "ingest")
    return args


# -- data ------------------------------------------------------------------------------------------------
def make_batches(args, thread: int) -> list[list[dict]]:
    """The messages of one client thread, in batches. The same seed gives the same content on both sides."""
    per_thread = args.messages // args.threads
    stream = benchlib.MessageStream(
        seed=args.seed * 1000 + thread,
        prefix=f"t{thread}",
        start=datetime.now(UTC) - timedelta(days=3),
    )
    batches = []
    remaining = per_thread
    while remaining > 0:
        size = min(args.batch, remaining)
        batches.append(stream.take(size))
        remaining -= size
    return batches


def cleanup(tenant) -> None:
    """Delete everything the ingest benchmark wrote for its tenant (earlier runs included).

    Dependents are deleted first, by hand. The foreign-key triggers are switched off for this transaction
    when the role may do so: message.llm_request_id has no index, so each deleted LLM request would
    otherwise cost a sequential scan of the whole message table (see bench/README.md).
    """
    from django.db import connection, transaction

    statements = [
        "UPDATE sessions_app_session SET current_conversation_id = NULL WHERE tenant_id = %s",
        "DELETE FROM sessions_app_message WHERE tenant_id = %s",
        "DELETE FROM sessions_app_llmrequest WHERE tenant_id = %s",
        "DELETE FROM sessions_app_conversation WHERE tenant_id = %s",
        "DELETE FROM sessions_app_stateversion WHERE tenant_id = %s",
        "DELETE FROM sessions_app_usagehourly WHERE tenant_id = %s",
        "DELETE FROM sessions_app_session WHERE tenant_id = %s",
    ]
    start = time.perf_counter()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            try:
                with transaction.atomic():
                    cursor.execute("SET LOCAL session_replication_role = replica")
            except Exception:  # noqa: BLE001 - not a superuser: keep the triggers, only slower
                pass
            for sql in statements:
                cursor.execute(sql, [tenant.pk])
    except Exception as error:  # noqa: BLE001 - e.g. a new table referencing messages
        print(f"  (could not delete earlier bench rows: {error}; they stay, results are unaffected)")
    elapsed = time.perf_counter() - start
    if elapsed > 5:
        print(f"  (deleting the bench rows took {elapsed:.0f}s)")


# -- the two sides -----------------------------------------------------------------------------------------
class Side:
    def __init__(self, name: str):
        self.name = name
        self.seconds = 0.0
        self.messages = 0
        self.latencies: list[float] = []
        self.errors: list[str] = []

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


def run_threads(side: Side, target, per_thread_args: list[tuple]) -> None:
    """Start one thread per client, release them together, and add the wall-clock time to `side`."""
    barrier = threading.Barrier(len(per_thread_args) + 1)
    lock = threading.Lock()

    def wrapper(*a):
        try:
            latencies, written = target(barrier, *a)
            with lock:
                side.latencies += latencies
                side.messages += written
        except Exception as error:  # noqa: BLE001
            with lock:
                side.errors.append(repr(error))
            barrier.abort()  # never leave the others (or the main thread) waiting

    threads = [threading.Thread(target=wrapper, args=a) for a in per_thread_args]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    side.seconds += time.perf_counter() - start


def api_client(barrier, port: int, key: str, session_id, bodies: list[tuple[int, bytes]]):
    path = f"/api/v1/sessions/{session_id}/messages/"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    latencies, written = [], 0
    barrier.wait()
    for count, body in bodies:
        start = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        latencies.append(time.perf_counter() - start)
        if response.status != 201:
            raise RuntimeError(f"POST {path} → {response.status}: {data[:300]!r}")
        written += count
    conn.close()
    return latencies, written


def copy_client(barrier, chunks: list[tuple[int, bytes]]):
    conn = benchlib.psycopg_connect()
    latencies, written = [], 0
    barrier.wait()
    for count, data in chunks:
        start = time.perf_counter()
        with conn.cursor() as cursor, cursor.copy(benchlib.COPY_MESSAGES_SQL) as copy:
            copy.write(data)
        conn.commit()
        latencies.append(time.perf_counter() - start)
        written += count
    conn.close()
    return latencies, written


# -- profile -------------------------------------------------------------------------------------------
def profile_request(tenant, key: str, args) -> dict:
    """Where one POST of a batch spends its time, in-process (no HTTP): parse, validate, append, output."""
    import cProfile
    import io
    import pstats

    from django.db import connection, reset_queries
    from django.test import Client
    from rest_framework.renderers import JSONRenderer

    from sessions_app.api.serializers import MessageBatchSerializer, MessageSerializer
    from sessions_app.services.messages import messages_append
    from sessions_app.services.sessions import session_create

    session = session_create(tenant=tenant, name="bench profile", tool="claude-code", user_id="bench-profile")
    stream = benchlib.MessageStream(seed=99, prefix="p", start=datetime.now(UTC) - timedelta(days=1))
    runs = 6
    parts = {"json.loads": [], "validate (MessageBatchSerializer)": [], "messages_append": []}
    parts |= {"  of which waiting for PostgreSQL": [], "output (MessageSerializer)": [], "render (JSONRenderer)": []}
    queries = []

    class DbWait:
        """Time spent blocked on the database (every psycopg round trip: queries, COPY, commit)."""

        def __init__(self):
            self.seconds, self.statements = 0.0, 0

        def wait(self, original):
            def timed(conn, *a, **k):
                start = time.perf_counter()
                try:
                    return original(conn, *a, **k)
                finally:
                    self.seconds += time.perf_counter() - start

            return timed

        def __call__(self, execute, sql, params, many, context):  # Django's execute_wrapper: statements
            self.statements += 1
            return execute(sql, params, many, context)

    import psycopg

    original_wait = psycopg.Connection.wait

    for run in range(runs):
        body = json.dumps(stream.take(args.batch)).encode()
        t0 = time.perf_counter()
        data = json.loads(body)
        t1 = time.perf_counter()
        batch = MessageBatchSerializer(data=data)
        assert batch.is_valid(), batch.errors
        t2 = time.perf_counter()
        timer = DbWait()
        psycopg.Connection.wait = timer.wait(original_wait)
        try:
            with connection.execute_wrapper(timer):
                result = messages_append(tenant=tenant, session_id=session.pk, items=batch.validated_data)
        finally:
            psycopg.Connection.wait = original_wait
        t3 = time.perf_counter()
        out = MessageSerializer(result.messages, many=True).data
        t4 = time.perf_counter()
        JSONRenderer().render(out)
        t5 = time.perf_counter()
        if run == 0:
            continue  # warm-up
        parts["json.loads"].append(t1 - t0)
        parts["validate (MessageBatchSerializer)"].append(t2 - t1)
        parts["messages_append"].append(t3 - t2)
        parts["  of which waiting for PostgreSQL"].append(timer.seconds)
        parts["output (MessageSerializer)"].append(t4 - t3)
        parts["render (JSONRenderer)"].append(t5 - t4)
        queries.append(timer.statements)

    # The whole request through Django (middleware, auth, view), in-process, under cProfile.
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    url = f"/api/v1/sessions/{session.pk}/messages/"
    whole = []
    profiler = cProfile.Profile()
    for run in range(runs):
        body = json.dumps(stream.take(args.batch))
        reset_queries()
        start = time.perf_counter()
        if run == runs - 1:
            profiler.enable()
        response = client.post(url, data=body, content_type="application/json")
        if run == runs - 1:
            profiler.disable()
        whole.append(time.perf_counter() - start)
        assert response.status_code == 201, response.content[:300]
    stream_out = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream_out)
    stats.sort_stats("tottime").print_stats(25)
    tottime_top = stream_out.getvalue()
    stream_out = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream_out)
    stats.sort_stats("cumulative").print_stats(40)
    cumulative_top = stream_out.getvalue()

    floor = copy_floor(tenant, args, stream, runs)

    rows = []
    med = {name: benchlib.percentile(values, 50) * 1000 for name, values in parts.items()}
    total = sum(v for k, v in med.items() if not k.startswith(" "))
    for name, value in med.items():
        rows.append([name, f"{value:.1f}", f"{100 * value / total:.0f}%"])
    rows.append(["sum of parts", f"{total:.1f}", "100%"])
    whole_ms = benchlib.percentile(whole[1:-1], 50) * 1000  # neither the first nor the profiled run
    rows.append(["whole request in-process (Client)", f"{whole_ms:.1f}", ""])
    benchlib.print_table(
        [f"step (median of {runs - 1} batches of {args.batch})", "ms", "share"],
        rows,
        title="Where a POST of one batch spends its time (in-process, no HTTP)",
    )
    print(f"  SQL statements per append through Django (COPY not counted): {queries[0] if queries else '?'}")
    benchlib.print_table(
        [f"raw COPY of {args.batch} such rows, one connection, into", "ms"],
        [[name, f"{ms:.1f}"] for name, ms in floor.items()],
        title="What the database floor is made of (the same rows, COPY, median)",
    )
    print("\ncProfile of one whole request, top functions by own time:")
    print("\n".join(tottime_top.splitlines()[:45]))
    return {
        "median_ms": {k.strip(): round(v, 2) for k, v in med.items()},
        "whole_request_ms": round(whole_ms, 2),
        "sql_statements_per_append": queries[0] if queries else None,
        "raw_copy_of_one_batch_ms": {name: round(ms, 2) for name, ms in floor.items()},
        "cprofile_tottime": tottime_top,
        "cprofile_cumulative": cumulative_top,
    }


def copy_floor(tenant, args, stream, runs: int) -> dict[str, float]:
    """COPY of one batch into the real table, and into scratch tables with less of what it has."""
    from sessions_app.services.sessions import session_create

    session = session_create(tenant=tenant, name="bench profile copy", tool="claude-code", user_id="bench-profile")
    targets = {
        "sessions_app_message (the baseline)": None,
        "same columns, generated search_vector, no index": "INCLUDING DEFAULTS INCLUDING GENERATED",
        "same columns, no search_vector computed, no index": "INCLUDING DEFAULTS",
    }
    floor = {}
    with benchlib.psycopg_connect() as raw:
        for n, (name, like) in enumerate(targets.items()):
            table = "sessions_app_message" if like is None else f"bench_scratch_{n}"
            if like:
                raw.execute(f"DROP TABLE IF EXISTS {table}")
                raw.execute(f"CREATE TABLE {table} (LIKE sessions_app_message {like})")  # WAL-logged, like the real one
                raw.commit()
            times = []
            for run in range(runs):
                data = benchlib.copy_rows(
                    stream.take(args.batch),
                    tenant_id=tenant.pk,
                    session_id=session.pk,
                    first_seq=(n * runs + run) * args.batch + 1,
                    received_at=datetime.now(UTC).isoformat(),
                )
                sql = benchlib.COPY_MESSAGES_SQL.replace("sessions_app_message", table, 1)
                start = time.perf_counter()
                with raw.cursor() as cursor, cursor.copy(sql) as copy:
                    copy.write(data)
                raw.commit()
                times.append(time.perf_counter() - start)
            if like:
                raw.execute(f"DROP TABLE {table}")
                raw.commit()
            floor[name] = benchlib.percentile(times[1:], 50) * 1000
    return floor


# -- main ------------------------------------------------------------------------------------------------
def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from django.db import connection

    from sessions_app.models import Tenant
    from sessions_app.services.apikeys import apikey_create
    from sessions_app.services.sessions import session_create

    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    key = apikey_create(tenant_name=TENANT, name="bench").plain_key
    tenant = Tenant.objects.get(name=TENANT)
    cleanup(tenant)
    results: dict = {
        "config": {k: v for k, v in vars(args).items() if k not in ("name",)},
        "database": benchlib.database_description(),
        "server": benchlib.server_version(),
        "machine": benchlib.machine(),
    }

    if args.profile_only:
        results["profile"] = profile_request(tenant, key, args)
        if not args.keep:
            cleanup(tenant)
        path = benchlib.write_results(args.name + "-profile", results)
        print(f"\nWritten: {path}")
        return 0

    print(
        f"Preparing {args.messages} messages per side: {args.threads} threads × batches of {args.batch}, "
        f"{args.rounds} alternating rounds…"
    )
    prep_start = time.perf_counter()
    per_thread_batches = [make_batches(args, t) for t in range(args.threads)]
    sample = [m for batches in per_thread_batches for batch in batches for m in batch]
    roles = {r: sum(1 for m in sample if m["role"] == r) for r in ("user", "assistant", "toolResult")}
    avg_chars = sum(len(m.get("content", "")) for m in sample) / len(sample)
    with_tools = sum(1 for m in sample if m.get("tool_calls"))
    del sample

    def new_session(label: str, thread: int):
        return session_create(tenant=tenant, name=f"bench {label} {thread}", tool="claude-code", user_id=f"u{thread}")

    api_sessions = [new_session("api", t) for t in range(args.threads)]
    copy_sessions = [new_session("copy", t) for t in range(args.threads)]
    received_at = datetime.now(UTC).isoformat()
    api_bodies, copy_chunks = [], []
    for t, batches in enumerate(per_thread_batches):
        api_bodies.append([(len(b), json.dumps(b, ensure_ascii=False).encode()) for b in batches])
        chunks, seq = [], 1
        for b in batches:
            data = benchlib.copy_rows(
                b, tenant_id=tenant.pk, session_id=copy_sessions[t].pk, first_seq=seq, received_at=received_at
            )
            chunks.append((len(b), data))
            seq += len(b)
        copy_chunks.append(chunks)
    body_bytes = sum(len(body) for bodies in api_bodies for _, body in bodies)
    print(
        f"  prepared in {time.perf_counter() - prep_start:.1f}s: roles {roles}, {with_tools} with tool_calls, "
        f"average content {avg_chars:.0f} chars, {body_bytes / 1e6:.0f} MB of JSON"
    )

    gunicorn = benchlib.Gunicorn(workers=args.workers, log_path=benchlib.RESULTS_DIR / f"{args.name}-gunicorn.log")
    api, copy = Side("API"), Side("COPY")
    try:
        gunicorn.start()
        print(f"gunicorn aceproject.wsgi on 127.0.0.1:{gunicorn.port}, {args.workers} sync workers")

        # Warm-up, not counted: every worker imports, connects and serves a few requests; COPY connects.
        warm_stream = benchlib.MessageStream(seed=1, prefix="w", start=datetime.now(UTC) - timedelta(days=4))
        warm = Side("warm-up")
        warm_sessions = [new_session("warm", t) for t in range(args.threads)]
        warm_bodies = [
            [(100, json.dumps(warm_stream.take(100)).encode()) for _ in range(3)] for _ in range(args.threads)
        ]
        warm_args = [(gunicorn.port, key, s.pk, b) for s, b in zip(warm_sessions, warm_bodies, strict=True)]
        run_threads(warm, api_client, warm_args)
        if warm.errors:
            raise RuntimeError(f"warm-up failed: {warm.errors[0]}")

        rounds = max(1, args.rounds)
        for r in range(rounds):

            def part(items, r=r):
                n = len(items)
                return items[r * n // rounds : (r + 1) * n // rounds]

            run_threads(copy, copy_client, [(part(chunks),) for chunks in copy_chunks])
            run_threads(
                api,
                api_client,
                [(gunicorn.port, key, s.pk, part(bodies)) for s, bodies in zip(api_sessions, api_bodies, strict=True)],
            )
            print(
                f"  round {r + 1}/{rounds}: COPY {copy.messages} msgs in {copy.seconds:.1f}s, "
                f"API {api.messages} msgs in {api.seconds:.1f}s (cumulative)"
            )
            if api.errors or copy.errors:
                break
    finally:
        gunicorn.stop()

    for side in (api, copy):
        if side.errors:
            print(f"{side.name} errors: {side.errors[:3]}")
    # The API sessions hold exactly what was posted, and their counters agree.
    for s in api_sessions:
        s.refresh_from_db()
    stored_api = sum(s.messages for s in api_sessions)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sessions_app_message WHERE session_id = ANY(%s)", [[s.pk for s in copy_sessions]]
        )
        stored_copy = cursor.fetchone()[0]
    check = "ok" if stored_api == api.messages and stored_copy == copy.messages else "MISMATCH"

    ratio = api.rate / copy.rate if copy.rate else 0.0
    rows = []
    for side in (api, copy):
        summary = benchlib.summary_ms(side.latencies)
        rows.append(
            [
                side.name,
                side.messages,
                f"{side.seconds:.2f}",
                f"{side.rate:,.0f}",
                f"{summary['p50_ms']:.0f}",
                f"{summary['p95_ms']:.0f}",
            ]
        )
    benchlib.print_table(
        ["side", "messages", "seconds", "msgs/s", "batch p50 ms", "batch p95 ms"],
        rows,
        title=f"Ingest: {args.threads} concurrent clients, batches of {args.batch}",
    )
    verdict = "meets" if ratio >= TARGET_RATIO else "BELOW"
    print(f"\nAPI / COPY = {ratio:.1%}  ({verdict} the target of {TARGET_RATIO:.0%})   stored rows check: {check}")

    results["results"] = {
        side.name: {
            "messages": side.messages,
            "seconds": round(side.seconds, 3),
            "messages_per_second": round(side.rate, 1),
            "batch_latency": benchlib.summary_ms(side.latencies),
            "errors": side.errors[:5],
        }
        for side in (api, copy)
    }
    results["ratio_api_to_copy"] = round(ratio, 4)
    results["target_ratio"] = TARGET_RATIO
    results["stored_rows_check"] = check
    results["data"] = {"roles": roles, "with_tool_calls": with_tools, "avg_content_chars": round(avg_chars)}

    if args.profile:
        results["profile"] = profile_request(tenant, key, args)

    if not args.keep:
        cleanup(tenant)
    path = benchlib.write_results(args.name, results)
    print(f"\nWritten: {path}")
    return 1 if api.errors or copy.errors else 0


if __name__ == "__main__":
    sys.exit(main())
