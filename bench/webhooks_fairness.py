#!/usr/bin/env python
"""Webhooks, one tenant against another: how long a quiet tenant's delivery takes while a slow tenant's backlog
waits, against the same with no backlog (the baseline, measured in the same run).

    .venv/bin/python bench/webhooks_fairness.py                   # 100 slow webhooks x 21 events, as the probe
    .venv/bin/python bench/webhooks_fairness.py --concurrency 2 --events 5

The issue's probe: a tenant with 100 webhooks to a receiver that never answers in time fires 21 events (2,100
deliveries); another tenant's one delivery waited over 600 s. Here: a real worker (subprocess, the Procfile's
`webhooks` line: prefork, --concurrency, the `webhooks` queue) on Redis (db 4 of the local server unless
CELERY_BROKER_URL is set; else the embedded broker); two real HTTP receivers in threads of this process: the slow
one answers after --slow-seconds (longer than ACE_WEBHOOKS_TIMEOUT_SECONDS, so every attempt times out), the quiet
one at once. Retries are pushed out of the run (ACE_WEBHOOKS_RETRY_BASE_SECONDS=3600) and the circuit breaker is
off (ACE_WEBHOOKS_BREAKER_FAILURES=1000), so what is measured is the fair share alone; with the breaker on
(the default, 5 failures) the slow webhooks stop taking turns after their fifth failure.

Latency: from just before the quiet tenant's event is published (the delivery's commit and its turn queued) to the
quiet receiver having it. --samples events, one after the other, first with no backlog (baseline), then while the
slow tenant's backlog is pending (its first attempts under way).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import benchlib


class Receiver:
    def __init__(self, delay: float):
        self.count = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.count += 1
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender stopped waiting

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def quiet_latencies(quiet_tenant, receiver: Receiver, samples: int) -> list[float]:
    from webhooks_app.services.deliveries import events_publish

    latencies = []
    for i in range(samples):
        before = receiver.count
        start = time.perf_counter()
        events_publish(tenant_id=quiet_tenant.pk, event="record.created", data={"sample": i})
        while receiver.count == before:
            if time.perf_counter() - start > 900:
                raise RuntimeError("the quiet tenant's delivery did not arrive within 900 s")
            time.sleep(0.005)
        latencies.append(time.perf_counter() - start)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--webhooks", type=int, default=100, help="the slow tenant's webhooks (at most 100)")
    parser.add_argument("--events", type=int, default=21, help="events the slow tenant fires")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=4, help="processes of the webhooks worker")
    parser.add_argument("--tenant-concurrency", type=int, default=2, help="ACE_WEBHOOKS_TENANT_CONCURRENCY")
    parser.add_argument("--timeout", type=float, default=2.0, help="ACE_WEBHOOKS_TIMEOUT_SECONDS")
    parser.add_argument("--slow-seconds", type=float, default=10.0, help="the slow receiver's answer time")
    args = parser.parse_args()
    os.environ.update(
        ACE_EMBEDDER="hash",
        ACE_EMBEDDER_PRELOAD="false",
        ACE_WEBHOOKS_ALLOW_PRIVATE="true",
        ACE_OUTBOUND_ALLOW="127.0.0.1,::1",
        ACE_WEBHOOKS_TIMEOUT_SECONDS=str(args.timeout),
        ACE_WEBHOOKS_RETRY_BASE_SECONDS="3600",
        ACE_WEBHOOKS_BREAKER_FAILURES="1000",
        ACE_WEBHOOKS_TENANT_CONCURRENCY=str(args.tenant_concurrency),
    )
    if "CELERY_BROKER_URL" not in os.environ:
        try:
            import redis

            redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=0.5).ping()
            os.environ["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/4"
        except Exception:  # noqa: BLE001 - no Redis: the embedded broker
            pass
    benchlib.setup_django()
    from django.conf import settings

    from aceproject.celery import app
    from sessions_app.models import Tenant
    from webhooks_app.models import DeliveryStatus, WebhookDelivery
    from webhooks_app.services.deliveries import events_publish
    from webhooks_app.services.webhooks import webhook_create

    stamp = int(time.time())
    slow_tenant = Tenant.objects.create(name=f"bench-webhooks-slow-{stamp}")
    quiet_tenant = Tenant.objects.create(name=f"bench-webhooks-quiet-{stamp}")
    slow, quiet = Receiver(args.slow_seconds), Receiver(0)
    for _ in range(args.webhooks):
        webhook_create(tenant=slow_tenant, url=slow.url, events=["record.created"], actor="bench")
    webhook_create(tenant=quiet_tenant, url=quiet.url, events=["record.created"], actor="bench")
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("webhooks")  # turns a previous run left
    print(f"Webhooks fairness on {benchlib.database_description()}; broker {settings.CELERY_BROKER_URL}; worker "
          f"concurrency {args.concurrency}, {args.tenant_concurrency} attempts per tenant at once; timeout "
          f"{args.timeout:g} s, slow receiver {args.slow_seconds:g} s")  # fmt: skip

    env = {**os.environ, "ACE_DATA_DIR": str(settings.ACE_DATA_DIR)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "aceproject", "worker", "--queues", "webhooks", "--concurrency",
         str(args.concurrency), "-l", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=benchlib.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        quiet_latencies(quiet_tenant, quiet, 2)  # the worker is up and its processes warm
        baseline = quiet_latencies(quiet_tenant, quiet, args.samples)
        for i in range(args.events):
            events_publish(tenant_id=slow_tenant.pk, event="record.created", data={"event": i})
        backlog = WebhookDelivery.objects.filter(tenant=slow_tenant, status=DeliveryStatus.PENDING)
        queued = backlog.count()
        while slow.count == 0:
            time.sleep(0.01)
        loaded = quiet_latencies(quiet_tenant, quiet, args.samples)
        still_pending = backlog.count()
        in_flight_max = 0
        for _ in range(50):  # the slow tenant's attempts under way, sampled over a second
            in_flight_max = max(in_flight_max, backlog.filter(claimed_until__gt=time_now()).count())
            time.sleep(0.02)
    finally:
        worker.terminate()
        worker.wait(30)
        WebhookDelivery.objects.filter(tenant=slow_tenant, status=DeliveryStatus.PENDING).update(
            status=DeliveryStatus.FAILED, next_attempt_at=None, claimed_until=None, error="bench: left undone"
        )
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge("webhooks")

    base, load = benchlib.summary_ms(baseline), benchlib.summary_ms(loaded)
    benchlib.print_table(
        ["quiet tenant's delivery", "p50 ms", "p95 ms", "max ms"],
        [
            ["no backlog (baseline)", base["p50_ms"], base["p95_ms"], round(max(baseline) * 1000, 2)],
            [f"slow tenant's backlog of {queued:,}", load["p50_ms"], load["p95_ms"], round(max(loaded) * 1000, 2)],
        ],
        title=f"{args.samples} deliveries each; the slow tenant still had {still_pending:,} pending after them, "
        f"at most {in_flight_max} of its attempts under way at once",
    )
    result = {
        "args": vars(args),
        "baseline_ms": base,
        "with_backlog_ms": load,
        "backlog_queued": queued,
        "backlog_pending_after": still_pending,
        "slow_tenant_in_flight_max": in_flight_max,
    }
    print(f"results: {benchlib.write_results('webhooks_fairness', result)}")
    return 0


def time_now():
    from django.utils import timezone

    return timezone.now()


if __name__ == "__main__":
    raise SystemExit(main())
