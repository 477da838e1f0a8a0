#!/usr/bin/env python
"""What budgets add to a message write: `POST /api/v1/sessions/{id}/messages/` (one assistant message with tokens,
in-process through Django's test client: routing, middleware, key, validation, the hard-limit check, the message
service, the response) in a tenant with no budget, and in one with 10 active budgets that all cover the writes
(tenant, user and project scopes; tokens and USD; day, week, month and rolling windows; none over its limit).

    .venv/bin/python bench/budgets.py --quick     # 1,000 writes per side and round
    .venv/bin/python bench/budgets.py             # 3,000 writes per side and round

The sides alternate in rounds (none, ten, none, ten) in the same run, so table growth falls on both.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import benchlib

SCOPES = [("tenant", ""), ("user_id", "bench-user"), ("project", "bench-project")]
PERIODS = [("day", None), ("week", None), ("month", None), ("rolling", 5)]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1,000 writes per side and round")
    return parser.parse_args()


def make_budgets(tenant, count: int) -> None:
    from sessions_app.services.budgets import budget_create

    for index in range(count):
        scope, value = SCOPES[index % len(SCOPES)]
        period, window = PERIODS[index % len(PERIODS)]
        unit = "usd" if index % 2 else "tokens"
        budget_create(
            tenant=tenant,
            actor="bench",
            name=f"bench {index}",
            scope=scope,
            scope_value=value,
            unit=unit,
            limit=10**9 if unit == "usd" else 10**15,
            period=period,
            window_hours=window,
        )


def write_side(key: str, session_id, writes: int) -> list[float]:
    from django.test import Client

    client = Client()
    url = f"/api/v1/sessions/{session_id}/messages/"
    seconds = []
    for index in range(writes):
        body = {
            "role": "assistant", "content": f"answer {index}", "model": "claude-sonnet-4-5",
            "input_tokens": 1200, "output_tokens": 300, "total_tokens": 1500, "auth_type": "api_key",
        }  # fmt: skip
        started = time.perf_counter()
        response = client.post(
            url, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="127.0.0.1"
        )
        seconds.append(time.perf_counter() - started)
        assert response.status_code == 201, response.content[:300]
    return seconds


def main() -> None:
    args = parse_args()
    if args.quick:
        args.writes = 1000
    benchlib.setup_django()
    from sessions_app.models import BudgetUsage
    from sessions_app.services.apikeys import apikey_create
    from sessions_app.services.sessions import session_create

    run = uuid.uuid4().hex[:8]
    sides = {}
    for name, budgets in (("no budget", 0), ("10 budgets", 10)):
        created = apikey_create(tenant_name=f"bench-budgets-{run}-{budgets}")
        tenant = created.api_key.tenant
        make_budgets(tenant, budgets)
        session = session_create(tenant=tenant, user_id="bench-user", project="bench-project", tool="bench")
        sides[name] = (created.plain_key, session.pk, tenant)
        write_side(created.plain_key, session.pk, 50)  # warm: imports, connections, the session's first rows
    timings: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, (key, session_id, _) in sides.items():
            timings[name].extend(write_side(key, session_id, args.writes))
    tenant_with_budgets = sides["10 budgets"][2]
    assert BudgetUsage.objects.filter(budget__tenant=tenant_with_budgets).exists()
    rows, results = [], {}
    for name, seconds in timings.items():
        summary = benchlib.summary_ms(seconds)
        per_second = len(seconds) / sum(seconds)
        results[name] = {"writes": len(seconds), "writes_per_second": per_second, **summary}
        rows.append(
            [name, f"{len(seconds):,}", f"{per_second:,.0f}", f"{statistics.median(seconds) * 1000:.2f}",
             f"{benchlib.percentile(seconds, 95) * 1000:.2f}"]
        )  # fmt: skip
    headers = ["side", "writes", "writes/s", "p50 ms", "p95 ms"]
    benchlib.print_table(headers, rows, title=benchlib.database_description())
    none, ten = (statistics.median(timings[name]) for name in sides)
    print(f"\n10 budgets add {(ten - none) * 1000:.2f} ms per write at the median ({ten / none - 1:+.0%})")
    path = benchlib.write_results(
        "budgets", {"sides": results, "machine": benchlib.machine(), "code": benchlib.code_version()}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
