"""Load held: mixed traffic for ten minutes at the highest rate whose p95 stays under 200 ms with no error.

The whole deployment runs as `scripts/up` runs it: every process of the `Procfile` (web, worker, beat) on the
bench database, on the default embedded broker unless CELERY_BROKER_URL is set. locust (bench/locustfile.py)
plays a team's clients on loopback: streamed chat turns, transcript batches, recall and context lookups, usage
statistics and an auditor on the usage dashboard.

1. Seed: a fresh tenant, 20 sessions of 10 users with 200 messages each, an API key and a staff user.
2. Warm up (not counted): every web process loads the embedder and fills its caches.
3. Baseline in the same run: the same mix from one client at one task a second (unloaded latencies).
4. Step up the rate, 60 s a step, until p95 passes 200 ms or a request fails; the highest step that held is
   the rate.
5. Hold that rate for `--duration` seconds (600 by default) and report every request kind: count, failures,
   p50/p95/p99. Then check that every message the API acknowledged is in the database.

    .venv/bin/python bench/load.py                    # about 20 minutes
    .venv/bin/python bench/load.py --rate 8 --duration 120   # one run at a given rate, no search

Task rates are tasks per second; a task is one to five HTTP requests (a turn is five).
"""

from __future__ import annotations

import argparse
import csv
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

P95_LIMIT_MS = 200.0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=600, help="seconds at the chosen rate (default 600)")
    parser.add_argument("--rate", type=float, help="skip the search: hold this many tasks per second")
    parser.add_argument("--steps", default="2,3,4,5,6,8,10,12,15,18,22", help="rates tried, tasks/s")
    parser.add_argument("--step-seconds", type=int, default=45)
    parser.add_argument("--warmup-seconds", type=int, default=30)
    parser.add_argument("--baseline-seconds", type=int, default=60)
    return parser.parse_args()


# -- seed ------------------------------------------------------------------------------------------------------
def seed() -> dict:
    from django.contrib.auth import get_user_model
    from django.urls import reverse

    from sessions_app.services.apikeys import apikey_create, tenant_get_or_create
    from sessions_app.services.messages import messages_append
    from sessions_app.services.sessions import session_create

    name = f"bench-load-{datetime.now(UTC):%Y%m%d%H%M%S}"
    tenant = tenant_get_or_create(name=name)
    key = apikey_create(tenant_name=name, name="bench/load.py").plain_key
    password = secrets.token_urlsafe(12)
    username = f"bench-load-{secrets.token_hex(3)}"
    get_user_model().objects.create_superuser(username=username, email="", password=password)
    sessions, users = [], []
    start = datetime.now(UTC) - timedelta(days=3)
    for i in range(20):
        user_id = f"user-{i % 10}"
        session = session_create(tenant=tenant, name=f"load {i}", tool="chat", user_id=user_id)
        items = []
        for n in range(200):
            role = "user" if n % 2 == 0 else "assistant"
            item = {
                "role": role,
                "content": f"{benchlib.EN_SENTENCES[(i + n) % len(benchlib.EN_SENTENCES)]} "
                f"{benchlib.ZH_SENTENCES[(i * 7 + n) % len(benchlib.ZH_SENTENCES)]}",
                "created_at": start + timedelta(minutes=n),
                "external_id": uuid.uuid4().hex,
            }
            if role == "assistant":
                item.update(model="qwen3-coder-plus", input_tokens=1000 + n, output_tokens=100 + n)
            items.append(item)
        messages_append(tenant=tenant, session_id=session.pk, items=items)
        sessions.append(str(session.pk))
        users.append(user_id)
    return {
        "tenant": tenant,
        "key": key,
        "admin": f"{username}:{password}",
        "sessions": sessions,
        "users": users,
        "dashboard": reverse("admin:sessions_app_usage_dashboard"),
    }


def wait_for_vectors(tenant, timeout: float = 900) -> float:
    """Wait until every message of the tenant has its vector (the embedder has drained the seed's backlog), so
    that the baseline and the steps start from the steady state. Returns the seconds waited."""
    from memory_app.models import MessageEmbedding
    from sessions_app.models import Message

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        pending = (
            Message.objects.filter(tenant=tenant).count()
            - MessageEmbedding.objects.filter(message__tenant=tenant).count()
        )
        if pending <= 0:
            break
        time.sleep(2)
    return time.monotonic() - start


def message_count(tenant) -> int:
    from sessions_app.models import Message

    return Message.objects.filter(tenant=tenant).count()


# -- the deployment: every Procfile process -----------------------------------------------------------------
class Deployment:
    def __init__(self, port: int, log_dir: Path):
        self.port = port
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self) -> None:
        env = {**os.environ, "ACE_PORT": str(self.port), "DEBUG": "false", "PYTHONUNBUFFERED": "1"}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        for line in (benchlib.PROJECT_DIR / "Procfile").read_text().splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, command = line.split(":", 1)
            log = open(self.log_dir / f"{name.strip()}.log", "w")  # noqa: SIM115 - closed with the process
            self.processes[name.strip()] = subprocess.Popen(
                ["bash", "-c", "exec " + command.strip()],
                cwd=benchlib.PROJECT_DIR,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait_healthy()

    def wait_healthy(self, timeout: float = 90) -> None:
        import http.client

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}; see {self.log_dir / name}.log")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the web process did not answer /healthz within {timeout}s")

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


# -- locust runs ---------------------------------------------------------------------------------------------
def run_locust(host: str, data: dict, rate: float, seconds: int, out: Path) -> dict[str, dict]:
    """`rate` tasks a second for `seconds`; returns locust's figures per request name (and "Aggregated")."""
    per_user = 0.5
    users = max(1, round(rate / per_user))
    env = {
        **os.environ,
        "ACE_LOAD_KEY": data["key"],
        "ACE_LOAD_SESSIONS": ",".join(data["sessions"]),
        "ACE_LOAD_USERS": ",".join(data["users"]),
        "ACE_LOAD_ADMIN": data["admin"],
        "ACE_LOAD_DASHBOARD": data["dashboard"],
        "ACE_LOAD_RATE_PER_USER": str(rate / users),
    }
    prefix = out / f"rate-{rate:g}-{seconds}s"
    command = [
        str(Path(sys.executable).with_name("locust")),
        "-f", str(benchlib.BENCH_DIR / "locustfile.py"),
        "--headless", "--only-summary", "--loglevel", "WARNING",
        "--users", str(users), "--spawn-rate", str(users),
        "--run-time", f"{seconds}s", "--stop-timeout", "10",
        "--host", host, "--csv", str(prefix),
    ]  # fmt: skip
    with open(f"{prefix}.log", "w") as log:
        subprocess.run(command, env=env, check=False, stdout=log, stderr=subprocess.STDOUT)

    def number(text: str) -> float:
        return float(text) if text not in ("", "N/A") else 0.0

    figures = {}
    with open(f"{prefix}_stats.csv") as handle:
        for row in csv.DictReader(handle):
            figures[row["Name"]] = {
                "requests": int(row["Request Count"]),
                "failures": int(row["Failure Count"]),
                "rps": number(row["Requests/s"]),
                "p50": number(row["50%"]),
                "p95": number(row["95%"]),
                "p99": number(row["99%"]),
                "max": number(row["Max Response Time"]),
            }
    failures = Path(f"{prefix}_failures.csv")
    figures["_failures"] = failures.read_text() if failures.exists() else ""
    return figures


def held(figures: dict) -> bool:
    total = figures["Aggregated"]
    return total["failures"] == 0 and total["p95"] < P95_LIMIT_MS


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    from django.conf import settings

    print(f"Broker: {settings.CELERY_BROKER_URL.split('@')[-1]}")
    data = seed()
    seeded = message_count(data["tenant"])
    out = Path(tempfile.mkdtemp(prefix="ace-load-"))
    deployment = Deployment(benchlib.free_port(), out)
    host = f"http://127.0.0.1:{deployment.port}"
    results: dict = {"seeded_messages": seeded, "runs": {}}
    try:
        deployment.start()
        print(f"Deployment up on {host} (logs in {out}); warming up for {args.warmup_seconds}s")
        run_locust(host, data, 2, args.warmup_seconds, out)
        waited = wait_for_vectors(data["tenant"])
        print(f"Every message has its vector ({waited:.0f} s after the warm-up)")
        baseline = run_locust(host, data, 1, args.baseline_seconds, out)
        results["runs"]["baseline 1 task/s"] = baseline
        print(f"Baseline (1 task/s): p50 {baseline['Aggregated']['p50']:.0f} ms, "
              f"p95 {baseline['Aggregated']['p95']:.0f} ms")  # fmt: skip
        rate = args.rate
        if rate is None:
            rate = 0.0
            for step in [float(s) for s in args.steps.split(",")]:
                figures = run_locust(host, data, step, args.step_seconds, out)
                results["runs"][f"step {step:g} tasks/s"] = figures
                total = figures["Aggregated"]
                print(f"  {step:>5g} tasks/s: {total['rps']:.1f} req/s, p95 {total['p95']:.0f} ms, "
                      f"{total['failures']} failures")  # fmt: skip
                if not held(figures):
                    break
                rate = step
            if not rate:
                print("No step held; nothing more to measure.")
                return 1
        print(f"Holding {rate:g} tasks/s for {args.duration}s …")
        before = message_count(data["tenant"])
        final = run_locust(host, data, rate, args.duration, out)
        results["runs"][f"held {rate:g} tasks/s"] = final
    finally:
        deployment.stop()

    names = [n for n in final if not n.startswith("_") and n != "Aggregated"] + ["Aggregated"]
    rows = []
    for name in names:
        f, b = final[name], baseline.get(name, {})
        rows.append([name, f["requests"], f["failures"], f"{f['rps']:.1f}", f"{f['p50']:.0f}", f"{f['p95']:.0f}",
                     f"{f['p99']:.0f}", f"{b.get('p50', 0):.0f}", f"{b.get('p95', 0):.0f}"])  # fmt: skip
    benchlib.print_table(
        ["request", "count", "failures", "req/s", "p50 ms", "p95 ms", "p99 ms", "unloaded p50", "unloaded p95"],
        rows,
        title=f"{args.duration}s at {rate:g} tasks/s (p95 limit {P95_LIMIT_MS:.0f} ms)",
    )
    acknowledged = 10 * (final["ingest: 10 messages"]["requests"] - final["ingest: 10 messages"]["failures"])
    acknowledged += 2 * (final["turn: start"]["requests"] - final["turn: start"]["failures"])
    stored = message_count(data["tenant"]) - before
    print(f"Messages acknowledged in the held run: {acknowledged}; stored: {stored} "
          f"({'none lost' if stored == acknowledged else 'MISMATCH'})")  # fmt: skip
    if final["_failures"].count("\n") > 1:
        print("Failures:\n" + final["_failures"])
    results.update(rate_tasks_per_s=rate, acknowledged=acknowledged, stored=stored, held=held(final))
    print(f"Results: {benchlib.write_results('load', {**results, **benchlib.code_version()})}")
    return 0 if held(final) and stored == acknowledged else 1


if __name__ == "__main__":
    sys.exit(main())
