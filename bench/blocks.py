#!/usr/bin/env python
"""A heavy user's 5-hour blocks: `GET /api/v1/usage/blocks/` (in-process, Django's test client: key, validation, the
plan, the anchor's read, the entries near the window, the blocks, pricing, the response) for a user with ~50,000 LLM
requests over 120 days, among other users' ~1.5M messages, against a plain exact scan in the same run: every entry
the user ever had read (the same two index scans, unbounded), every block computed, those of the window chosen —
what a tool that reads the whole history (ccusage reads every log file) does. Both answers are checked equal.

    .venv/bin/python bench/blocks.py --quick     # 10,000 requests for the user, 100,000 for the others
    .venv/bin/python bench/blocks.py             # 50,000 requests for the user, 500,000 for the others
    .venv/bin/python bench/blocks.py --explain   # and the plans of the entries' two queries

The data is made once per size (SQL generate_series into the ledger's tables) and reused; --regenerate remakes it.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import benchlib

DAYS = 120
HEAVY = "heavy-user"
MACHINES = ("laptop", "workstation")
PLAN_TABLE = "bench_blocks_plan"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=50_000, help="the heavy user's requests (default 50,000)")
    parser.add_argument("--others", type=int, default=500_000, help="the other users' requests (default 500,000)")
    parser.add_argument("--users", type=int, default=200, help="other users (default 200)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="10,000 and 100,000 requests, 10 runs")
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.others, args.runs = 10_000, 100_000, 10
    return args


# -- data -------------------------------------------------------------------------------------------------------
def plan_sessions(*, user: str, requests: int, now: datetime, rng: random.Random, recent: bool) -> list[dict]:
    """A coding agent's sessions: most days 2–6 sessions from 08:00–14:00 UTC on, one request every 20–90 s;
    a few round-the-clock runs (no 5-hour pause for a day or more); the last one running until now."""
    sessions, total = [], 0
    while total < requests:
        day = now - timedelta(days=rng.randrange(DAYS))
        marathon = rng.random() < 0.01
        size = min(rng.randint(1500, 3000) if marathon else rng.randint(30, 250), requests - total)
        step = rng.uniform(40, 90) if marathon else rng.uniform(20, 90)
        start = day.replace(hour=rng.randint(8, 14), minute=rng.randint(0, 59), second=0, microsecond=0)
        if start + timedelta(seconds=step * size) > now:
            start = now - timedelta(seconds=step * size + 600)
        sessions.append({"start": start, "size": size, "step": step})
        total += size
    if recent:  # the user is at work now: a session whose last request is a few minutes old
        sessions[-1]["start"] = now - timedelta(seconds=sessions[-1]["step"] * sessions[-1]["size"] + 300)
    return [
        {
            "id": uuid.UUID(int=rng.getrandbits(128)),
            "user_id": user,
            "machine": rng.choice(MACHINES),
            **session,
            "last": session["start"] + timedelta(seconds=session["step"] * (session["size"] - 1)),
        }
        for session in sessions
    ]


def _copy(cursor, table: str, columns: list[str], rows) -> None:
    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(benchlib.copy_field(v) for v in row) + "\n")
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(buffer.getvalue())


SESSION_COLUMNS = [
    "id", "tenant_id", "name", "tool", "agent_session_id", "user_id", "app", "project", "machine", "metadata",
    "started_at", "created_at", "updated_at", "last_message_at", "last_seq", "conversations", "state_version",
    "requests", "messages", "message_user", "message_assistant", "message_toolresult", "message_error",
    "message_system", "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens",
]  # fmt: skip

CALLS_TABLE = "bench_blocks_calls"
# Every call of the plan, numbered in its session; one in a hundred is a chat turn's answer: usage outside any request.
CALLS_SQL = f"""
CREATE UNLOGGED TABLE {CALLS_TABLE} AS
SELECT gen_random_uuid() AS id, p.session_id, g.i AS n, random() < 0.01 AS turn,
       CASE WHEN random() < 0.8 THEN 'claude-sonnet-4-5-20250929' ELSE 'claude-haiku-4-5-20251001' END AS model,
       t.input, t.output, t.cache_read, t.cache_write, p.started_at + (g.i - 1) * p.step * interval '1 second' AS at
FROM {PLAN_TABLE} p CROSS JOIN LATERAL generate_series(1, p.size) AS g(i)
CROSS JOIN LATERAL (SELECT 3 + (random() * 400)::int AS input, 20 + (random() * 2000)::int AS output,
                           (random() * 80000)::int AS cache_read, (random() * 4000)::int AS cache_write) t
"""
REQUESTS_SQL = f"""
INSERT INTO sessions_app_llmrequest (id, tenant_id, session_id, request_id, auth_type, model, input_tokens,
    output_tokens, cache_read_tokens, cache_creation_tokens, total_tokens, created_at)
SELECT id, %(tenant)s, session_id, 'req_' || n, '', model, input, output, cache_read, cache_write, input + output, at
FROM {CALLS_TABLE} WHERE NOT turn
"""
# Per call: the prompt or tool result that led to it, and its answer with the call's tokens (a request's, or a turn's
# own with the calls it reports).
MESSAGES_SQL = f"""
INSERT INTO sessions_app_message (id, tenant_id, session_id, llm_request_id, seq, role, content, thinking,
    tool_name, auth_type, request_id, model, finish_reason, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, total_tokens, api_calls, feishu_conversation_id, metadata, thinking_mode, created_at,
    received_at)
SELECT gen_random_uuid(), %(tenant)s, c.session_id, CASE WHEN m.k = 2 AND NOT c.turn THEN c.id END,
       2 * c.n - 2 + m.k,
       CASE WHEN m.k = 2 THEN 'assistant' WHEN c.n %% 6 = 1 THEN 'user' ELSE 'toolResult' END,
       'x', '', '', '', CASE WHEN m.k = 2 AND NOT c.turn THEN 'req_' || c.n ELSE '' END,
       CASE WHEN m.k = 2 THEN c.model ELSE '' END, '',
       CASE WHEN m.k = 2 THEN c.input END, CASE WHEN m.k = 2 THEN c.output END,
       CASE WHEN m.k = 2 THEN c.cache_read END, CASE WHEN m.k = 2 THEN c.cache_write END,
       CASE WHEN m.k = 2 THEN c.input + c.output END, CASE WHEN m.k = 2 AND c.turn THEN 1 END,
       '', '{{}}', '', c.at - (2 - m.k) * interval '1 second', c.at
FROM {CALLS_TABLE} c CROSS JOIN (VALUES (1), (2)) AS m(k)
"""


def ensure_data(args) -> dict:
    from django.db import connection, transaction

    from sessions_app.models import LlmRequest, Session, Tenant

    name = f"bench-blocks-{args.requests}-{args.others}"
    tenant, _ = Tenant.objects.get_or_create(name=name)
    heavy = LlmRequest.objects.filter(tenant=tenant, session__user_id=HEAVY)
    have = heavy.count()
    newest = heavy.order_by("-created_at").values_list("created_at", flat=True).first()
    fresh = newest is not None and datetime.now(UTC) - newest < timedelta(hours=2)
    if have and fresh and not args.regenerate:
        print(f"Reusing tenant {name} ({have:,} requests of {HEAVY}).")
        return {"tenant": tenant, "generated": False}
    if have and not fresh:
        print("The data is more than 2 hours old: made again so that the heavy user has an active block.")

    rng = random.Random(args.requests)
    now = datetime.now(UTC)
    plan = plan_sessions(user=HEAVY, requests=args.requests, now=now, rng=rng, recent=True)
    per_user = max(args.others // args.users, 1)
    for index in range(args.users):
        plan += plan_sessions(user=f"dev{index:03d}", requests=per_user, now=now, rng=rng, recent=index % 3 == 0)
    print(f"Generating {args.requests:,} + {args.others:,} requests in {len(plan):,} sessions for {name}…")
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        if have:
            # Deleting requests checks, one by one, that no message names them: on an index made for the purpose.
            cursor.execute("CREATE INDEX bench_blocks_llm_request ON sessions_app_message (llm_request_id)")
            for table in ("sessions_app_message", "sessions_app_llmrequest"):
                cursor.execute(f"DELETE FROM {table} WHERE tenant_id = %s", [tenant.pk])
            cursor.execute("DROP INDEX bench_blocks_llm_request")
        Session.objects.filter(tenant=tenant).delete()
        rows = (
            [s["id"], tenant.pk, f"bench {s['start']:%m-%d %H:%M}", "claude-code", str(s["id"]), s["user_id"], "",
             "", s["machine"], "{}", s["start"].isoformat(), now.isoformat(), now.isoformat(), s["last"].isoformat(),
             *([0] * 15)]
            for s in plan
        )  # fmt: skip
        _copy(cursor.cursor, "sessions_app_session", SESSION_COLUMNS, rows)
        cursor.execute(f"DROP TABLE IF EXISTS {PLAN_TABLE}")
        cursor.execute(
            f"CREATE UNLOGGED TABLE {PLAN_TABLE} (session_id uuid, size int, started_at timestamptz, step float8)"
        )
        _copy(
            cursor.cursor,
            PLAN_TABLE,
            ["session_id", "size", "started_at", "step"],
            ([s["id"], s["size"], s["start"].isoformat(), s["step"]] for s in plan),
        )
        cursor.execute("SELECT setseed(0.32)")
        cursor.execute(f"DROP TABLE IF EXISTS {CALLS_TABLE}")
        for label, sql in (("calls", CALLS_SQL), ("requests", REQUESTS_SQL), ("messages", MESSAGES_SQL)):
            step = time.perf_counter()
            cursor.execute(sql, {"tenant": tenant.pk})
            print(f"  {label}: {cursor.rowcount:,} rows in {time.perf_counter() - step:.1f} s")
        cursor.execute(f"DROP TABLE {CALLS_TABLE}")
        cursor.execute(f"DROP TABLE {PLAN_TABLE}")
    with connection.cursor() as cursor:
        for table in ("sessions_app_session", "sessions_app_llmrequest", "sessions_app_message"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    print(f"  generated in {time.perf_counter() - started:.1f} s")
    return {"tenant": tenant, "generated": True}


# -- timing -----------------------------------------------------------------------------------------------------
def timed(call, *, runs: int, warmup: int) -> tuple[list[float], object]:
    result = None
    for _ in range(warmup):
        result = call()
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return seconds, result


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from sessions_app.models import LlmRequest
    from sessions_app.pricing import PriceBook
    from sessions_app.selectors.blocks import BlockScope, price_blocks, scope_blocks, session_blocks
    from sessions_app.services.apikeys import apikey_create

    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    data = ensure_data(args)
    tenant = data["tenant"]
    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS.append("testserver")
    heavy_requests = LlmRequest.objects.filter(tenant=tenant, session__user_id=HEAVY).count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'sessions_app_message'")
        message_rows = cursor.fetchone()[0]
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'sessions_app_llmrequest'")
        request_rows = cursor.fetchone()[0]
    heavy_sessions = tenant.sessions.filter(user_id=HEAVY).count()
    described = (
        f"{HEAVY}: {heavy_requests:,} requests in {heavy_sessions:,} sessions over {DAYS} days; tables: "
        f"~{message_rows:,} messages, ~{request_rows:,} requests"
    )
    print(described)

    key = apikey_create(tenant_name=tenant.name, name="bench-blocks").plain_key
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    book = PriceBook.load()
    now = datetime.now(UTC)
    scope = BlockScope(tenant_id=tenant.pk, user_id=HEAVY)

    def exact_scan(since, until=None):
        """Every entry of the user, every block, those overlapping the window, priced."""
        blocks = session_blocks(scope.entries(lower=None), now=now)
        chosen = [b for b in blocks if b.end > since and (until is None or b.start < until)]
        price_blocks(chosen, book=book)
        return chosen

    rows, checks = [], []
    for label, days in (("3 days (the default)", 3), ("7 days", 7), ("30 days", 30)):
        since = now - timedelta(days=days)
        query = f"?user_id={HEAVY}" + ("" if days == 3 else f"&since={since.isoformat().replace('+00:00', 'Z')}")

        def endpoint(query=query):
            response = client.get(f"/api/v1/usage/blocks/{query}")
            assert response.status_code == 200, response.content[:300]
            return response

        endpoint_s, _ = timed(endpoint, runs=args.runs, warmup=args.warmup)
        scan_s, scanned = timed(lambda s=since: exact_scan(s), runs=max(args.runs // 4, 3), warmup=1)
        ours = scope_blocks(scope, since=since, until=None, now=now, book=book)
        same = [(b.id, b.entries, tuple(b.tokens), b.cost.usd, b.is_active) for b in ours] == [
            (b.id, b.entries, tuple(b.tokens), b.cost.usd, b.is_active) for b in scanned
        ]
        checks.append((label, same, len(ours), sum(b.entries for b in ours)))
        for what, seconds in (("GET /api/v1/usage/blocks/", endpoint_s), ("exact scan (every entry)", scan_s)):
            rows.append(
                {
                    "window": label,
                    "what": what,
                    "p50_ms": statistics.median(seconds) * 1000,
                    "p95_ms": benchlib.percentile(seconds, 95) * 1000,
                    "runs": len(seconds),
                }
            )
    machine_s, _ = timed(
        lambda: client.get(f"/api/v1/usage/blocks/?user_id={HEAVY}&machine=laptop"), runs=args.runs, warmup=1
    )
    rows.append(
        {
            "window": "3 days, machine=laptop",
            "what": "GET /api/v1/usage/blocks/",
            "p50_ms": statistics.median(machine_s) * 1000,
            "p95_ms": benchlib.percentile(machine_s, 95) * 1000,
            "runs": len(machine_s),
        }
    )
    all_entries = len(scope.entries(lower=None))

    benchlib.print_table(
        ["window", "what", "p50 ms", "p95 ms", "runs"],
        [[r["window"], r["what"], f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}", r["runs"]] for r in rows],
        title=described,
    )
    for label, same, blocks, entries in checks:
        verdict = "equal" if same else "DIFFERENT"
        print(f"Check, {label}: {blocks} blocks, {entries:,} of {all_entries:,} entries; the exact scan's: {verdict}")
    if args.explain:
        since = now - timedelta(days=3)
        requests, unrequested = scope._sources(lower=since, upper=None)
        for queryset in (requests.order_by("created_at"), unrequested.order_by("created_at")):
            print(queryset.explain(analyze=True, buffers=True))
    path = benchlib.write_results(
        f"blocks-{args.requests}-{args.others}",
        {
            "data": described,
            "generated": data["generated"],
            "rows": rows,
            "checks": [{"window": c[0], "equal": c[1], "blocks": c[2], "entries": c[3]} for c in checks],
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
        },
    )
    print(f"Results: {path}")
    return 0 if all(c[1] for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
