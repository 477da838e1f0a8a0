"""The mixed load of bench/load.py through two web hosts against one PostgreSQL through PgBouncer, next to one host
on the same server in the same run (issue 34).

Everything runs on this machine, on loopback (tests/support/hosts.py builds it as tests/test_many_hosts.py does):

- a PostgreSQL server of its own on a TCP port (the embedded package's PostgreSQL 18 with pgvector), and Debian's
  PgBouncer in transaction mode in front of it (`--pool-size`, default 20);
- Redis as the broker (a database of its own, `--redis`);
- hosts: every Procfile process (web, gateway, worker, webhooks, embedder; beat on the first) with its own
  ACE_DATA_DIR, ports and node names, the default embedder, `DEBUG=false`.

1. Seed (bench/load.py's seed: a tenant, 20 sessions of 10 users with 200 messages each) and migrate, directly.
2. **One host**, straight to PostgreSQL (the single-host layout): warm up, wait for every vector, then locust at
   `--rate` tasks a second for `--duration` seconds.
3. **Two hosts** through PgBouncer: the same warm-up, then two locust runs at once, each at half the rate against
   its own host (a load balancer's even split), for the same duration.

Each phase reports every request kind (count, failures, p50/p95), the messages the API acknowledged against the
rows stored (none lost, none twice), and the CPU per request by kind of process: web (gunicorn's workers), the
workers (worker, webhooks, embedder, beat), PostgreSQL (its postmaster and every backend, those that ended
included) and PgBouncer.

    .venv/bin/python bench/many_hosts.py                          # ~8 minutes: 2 tasks/s, 120 s a phase
    .venv/bin/python bench/many_hosts.py --rate 1 --duration 60   # quicker
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

sys.path.insert(0, str(benchlib.PROJECT_DIR))
from tests.support.hosts import Host, PgBouncer, TcpPostgres, server_folder  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
SECRET_KEY = "bench-many-hosts-secret-key-shared-by-every-host-0123456789"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rate", type=float, default=2.0, help="tasks per second in all (default 2: what one host held)"
    )
    parser.add_argument("--duration", type=int, default=120, help="seconds of each phase (default 120)")
    parser.add_argument("--warmup-seconds", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=20, help="PgBouncer's default_pool_size")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="the broker (emptied first)")
    parser.add_argument("--keep", action="store_true", help="keep the servers' folder (logs)")
    return parser.parse_args()


class Meter:
    """CPU ticks by kind of process, over a phase."""

    def __init__(self, hosts: list[Host], server: TcpPostgres, pooler: PgBouncer | None):
        self.pids: dict[str, list[int]] = {"web": [], "workers": [], "gateway": []}
        for host in hosts:
            for role, process in host.processes:
                kind = "web" if role == "web" else "gateway" if role == "gateway" else "workers"
                self.pids[kind].append(process.pid)
        self.pids["postgres"] = [int((server.data / "postmaster.pid").read_text().split()[0])]
        if pooler is not None and pooler.process is not None:
            self.pids["pgbouncer"] = [pooler.process.pid]

    def snapshot(self) -> dict[str, int]:
        return {kind: sum(benchlib.process_ticks(pid) for pid in pids) for kind, pids in self.pids.items()}


def message_count(tenant) -> int:
    from sessions_app.models import Message

    return Message.objects.filter(tenant=tenant).count()


def phase(name: str, hosts: list[Host], server, pooler, data: dict, args, out: Path) -> dict:
    import load

    for host in hosts:
        host.wait_ready()
        (out / host.name).mkdir(exist_ok=True)
        (out / f"{host.name}-warm").mkdir(exist_ok=True)
    with ThreadPoolExecutor(len(hosts)) as pool:  # warm-up: caches, models, connections
        list(pool.map(lambda h: load.run_locust(h.url, data, 1, args.warmup_seconds, out / f"{h.name}-warm"), hosts))
    load.wait_for_vectors(data["tenant"])
    meter = Meter(hosts, server, pooler)
    before_rows, before_cpu = message_count(data["tenant"]), meter.snapshot()
    rate = args.rate / len(hosts)
    with ThreadPoolExecutor(len(hosts)) as pool:
        runs = list(pool.map(lambda h: load.run_locust(h.url, data, rate, args.duration, out / h.name), hosts))
    after_cpu = meter.snapshot()
    time.sleep(2)  # the last responses' rows are committed before their answers; nothing is pending
    stored = message_count(data["tenant"]) - before_rows
    acknowledged = sum(
        10 * (run["ingest: 10 messages"]["requests"] - run["ingest: 10 messages"]["failures"])
        + 2 * (run["turn: start"]["requests"] - run["turn: start"]["failures"])
        for run in runs
    )
    requests = sum(run["Aggregated"]["requests"] for run in runs)
    failures = sum(run["Aggregated"]["failures"] for run in runs)
    cpu = {kind: (after_cpu[kind] - before_cpu[kind]) / TICK * 1000 / max(1, requests) for kind in after_cpu}
    print(f"\n{name}: {requests} requests, {failures} failures; messages acknowledged {acknowledged}, stored {stored}")
    rows = []
    for kind in [n for n in runs[0] if not n.startswith("_") and n != "Aggregated"] + ["Aggregated"]:
        count = sum(run[kind]["requests"] for run in runs if kind in run)
        p50 = max(run[kind]["p50"] for run in runs if kind in run)
        p95 = max(run[kind]["p95"] for run in runs if kind in run)
        fails = sum(run[kind]["failures"] for run in runs if kind in run)
        rows.append([kind, count, fails, f"{p50:.0f}", f"{p95:.0f}"])
    benchlib.print_table(["request", "count", "failures", "p50 ms (worst host)", "p95 ms (worst host)"], rows)
    for run in runs:
        if run["_failures"].count("\n") > 1:
            print("Failures:\n" + run["_failures"])
    return {
        "requests": requests,
        "failures": failures,
        "acknowledged": acknowledged,
        "stored": stored,
        "cpu_ms_per_request": {kind: round(value, 2) for kind, value in cpu.items()},
        "p95_ms": max(run["Aggregated"]["p95"] for run in runs),
        "server_connections": server.backends("ace"),
    }


def main() -> int:
    args = parse_args()
    import redis

    redis.Redis.from_url(args.redis).flushdb()
    folder = server_folder("ace-bench-many-hosts-")
    out = Path(tempfile.mkdtemp(prefix="ace-many-hosts-locust-"))
    results: dict = {"rate_tasks_per_s": args.rate, "duration_s": args.duration, "pool_size": args.pool_size}
    try:
        with TcpPostgres(folder / "postgres") as server:
            direct = server.create_database("ace")
            os.environ["DATABASE_URL"] = direct
            os.environ["SECRET_KEY"] = SECRET_KEY
            os.environ.pop("CELERY_BROKER_URL", None)
            benchlib.setup_django()  # migrates, straight to the server
            import load

            print(f"Database: PostgreSQL on 127.0.0.1:{server.port} — {benchlib.server_version()}; broker {args.redis}")
            data = load.seed()
            env = {
                "DATABASE_URL": direct,
                "CELERY_BROKER_URL": args.redis,
                "SECRET_KEY": SECRET_KEY,  # every host the same (sessions, signed cookies, encrypted secrets)
                "ACE_EMBEDDER": os.environ.get("ACE_EMBEDDER", "local"),
                "ACE_EMBEDDER_PRELOAD": "true",
                "DEBUG": "false",
                "WEB_CONCURRENCY": "3",
            }
            roles = ("web", "gateway", "worker", "webhooks", "embedder")
            with Host("single", env=env, roles=(*roles, "beat")) as single:
                results["one host, direct"] = phase("One host, straight to PostgreSQL", [single], server, None, data,
                                                    args, out)  # fmt: skip
            with PgBouncer(folder / "pgbouncer", server, "ace", pool_size=args.pool_size) as pooler:
                pooled = {**env, "DATABASE_URL": pooler.url(), "ACE_DB_PREPARED": "false", "WEB_CONCURRENCY": "2"}
                with (
                    Host("host1", env=pooled, roles=(*roles, "beat")) as one,
                    Host("host2", env=pooled, roles=roles) as two,
                ):
                    results["two hosts, PgBouncer"] = phase("Two hosts through PgBouncer", [one, two], server, pooler,
                                                            data, args, out)  # fmt: skip
            from django.db import connections

            connections.close_all()
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    kinds = ["web", "gateway", "workers", "postgres", "pgbouncer"]
    rows = []
    for name in ("one host, direct", "two hosts, PgBouncer"):
        figures = results[name]
        cpu = figures["cpu_ms_per_request"]
        rows.append([name, figures["requests"], figures["failures"], f"{figures['acknowledged']}/{figures['stored']}",
                     f"{figures['p95_ms']:.0f}",
                     *[f"{cpu[k]:.1f}" if k in cpu else "" for k in kinds]])  # fmt: skip
    benchlib.print_table(
        [
            "layout",
            "requests",
            "failures",
            "messages acknowledged/stored",
            "p95 ms",
            *[f"CPU ms/req {k}" for k in kinds],
        ],  # fmt: skip
        rows,
        title=f"{args.rate:g} tasks/s in all, {args.duration}s a phase",
    )
    ok = all(
        results[n]["failures"] == 0 and results[n]["acknowledged"] == results[n]["stored"]
        for n in ("one host, direct", "two hosts, PgBouncer")
    )
    # Stored = acknowledged exactly: a lost row makes it fewer, a row stored twice (a retry, a task run twice) more.
    print(f"0 errors, 0 lost or duplicated rows: {'met' if ok else 'NOT met'}")
    print(f"Results: {benchlib.write_results('many_hosts', {**results, **benchlib.code_version()})}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
