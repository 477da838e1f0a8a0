#!/usr/bin/env python
"""Statistics, message lists, search and the admin changelists at 1M messages, against full scans.

    .venv/bin/python bench/stats_admin.py                       # 1,000,000 messages
    .venv/bin/python bench/stats_admin.py --messages 20000      # a quick check

Data: a tenant `bench-stats-<N>` with N messages written through the real message service
(`sessions_app.services.messages.messages_append`, batches of 1000, a few processes in parallel), so every
counter (Session, Conversation, LlmRequest, UsageHourly) is the one the application maintains. One session
holds 10% of the messages; the rest are sessions of 1000 messages, spread over 90 days, 5 tools, 40 users,
4 models. A re-run reuses the data when the tenant already has N messages (it completes a partial set).

Timing: in-process with django.test.Client (the whole Django stack: middleware, auth, DRF or the admin,
templates; no network, no gunicorn), p50/p95 over --runs runs after --warmup runs, with warm caches.
The API calls use a Bearer key of the tenant; the admin calls a superuser logged in with force_login.

Baseline: the scans the maintained counters replace, as raw SQL on the same connection, timed the same
way (fewer runs: they are slow): the session's counters computed from its messages, grouped usage
computed from all the tenant's messages by day / model / session, and the `COUNT(*)` that Django's
default admin paginator runs on every changelist page.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TARGET_MS = 100
TOOLS = ["claude-code", "qwen-code", "openclaw", "chat-web", "feishu-bot"]
USERS = [f"user{n:02d}" for n in range(40)]
RARE_WORD = "flamegraph"
COMMON_WORD = "database"
RARE_ZH = "火焰图"
COMMON_ZH = "数据库"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the data set (default 1M)")
    parser.add_argument("--session-size", type=int, default=1000, help="messages per ordinary session")
    parser.add_argument("--big-share", type=float, default=0.10, help="share of messages in the big session")
    parser.add_argument("--batch", type=int, default=1000, help="messages per messages_append call")
    parser.add_argument("--procs", type=int, default=2, help="processes generating data (default 2)")
    parser.add_argument("--runs", type=int, default=50, help="timed runs per endpoint (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    parser.add_argument("--scan-runs", type=int, default=10, help="timed runs per baseline scan (default 10)")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument(
        "--explain", action="store_true", help=f"EXPLAIN ANALYZE the slowest SQL of requests over {TARGET_MS} ms"
    )
    parser.add_argument("--name", default=None, help="results file name (default stats_admin-<N>)")
    args = parser.parse_args()
    args.name = args.name or f"stats_admin-{args.messages}"
    return args


# -- data ------------------------------------------------------------------------------------------------
def session_plan(args) -> list[dict]:
    """Deterministic: the same N always gives the same sessions, names, sizes and content seeds."""
    big = int(args.messages * args.big_share)
    sizes = [big] if big else []
    rest = args.messages - big
    while rest > 0:
        sizes.append(min(args.session_size, rest))
        rest -= sizes[-1]
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    span = timedelta(days=90)
    plan = []
    for index, size in enumerate(sizes):
        start = now - span + span * (index / len(sizes)) if index else now - span
        plan.append(
            {
                "index": index,
                "name": f"bench-stats {index:05d}" + (" (big)" if index == 0 and big else ""),
                "size": size,
                "tool": TOOLS[index % len(TOOLS)],
                "user_id": USERS[(index * 7) % len(USERS)],
                # Most sessions use one model; every fourth switches between all of them.
                "model": None if index % 4 == 3 else benchlib.MODELS[index % len(benchlib.MODELS)],
                "start": start.isoformat(),
            }
        )
    return plan


def tenant_name(args) -> str:
    return f"bench-stats-{args.messages}"


def fill_session(tenant_name_: str, item: dict, batch: int) -> int:
    """Worker process: append the missing messages of one planned session through messages_append."""
    benchlib.setup_django(migrate=False)
    from django.db import connections
    from django.utils.dateparse import parse_datetime

    from sessions_app.models import Session, Tenant
    from sessions_app.services.messages import messages_append
    from sessions_app.services.sessions import session_create

    tenant = Tenant.objects.get(name=tenant_name_)
    session = Session.objects.filter(tenant=tenant, name=item["name"]).first()
    if session is None:
        session = session_create(
            tenant=tenant,
            name=item["name"],
            tool=item["tool"],
            user_id=item["user_id"],
            started_at=datetime.fromisoformat(item["start"]),
        )
    stream = benchlib.MessageStream(
        seed=100_000 + item["index"],
        prefix=f"s{item['index']}",
        start=datetime.fromisoformat(item["start"]),
        model=item["model"],
    )
    done = session.messages
    if done:
        stream.take(done)  # the same stream: skip what is stored (external_id would also de-duplicate)
    written = 0
    while done + written < item["size"]:
        items = stream.take(min(batch, item["size"] - done - written))
        for message in items:
            message["created_at"] = parse_datetime(message["created_at"])
        written += messages_append(tenant=tenant, session_id=session.pk, items=items).created
    connections.close_all()
    return written


def ensure_data(args) -> dict:
    from django.db import connections
    from django.db.models import Sum

    from sessions_app.models import Session, Tenant

    tenant, _ = Tenant.objects.get_or_create(name=tenant_name(args))
    stored = Session.objects.filter(tenant=tenant).aggregate(n=Sum("messages"))["n"] or 0
    plan = session_plan(args)
    info = {"tenant": tenant.name, "sessions": len(plan), "generated": False}
    if stored >= args.messages:
        print(f"Reusing {stored:,} messages of tenant {tenant.name} ({len(plan)} sessions).")
        info["generation_seconds"] = None
        return info
    existing = {s.name: s.messages for s in Session.objects.filter(tenant=tenant)}
    todo = [item for item in plan if existing.get(item["name"], 0) < item["size"]]
    missing = sum(item["size"] - existing.get(item["name"], 0) for item in todo)
    print(
        f"Generating {missing:,} messages ({stored:,} stored) through messages_append: {len(todo)} sessions, "
        f"batches of {args.batch}, {args.procs} processes…"
    )
    connections.close_all()
    start = time.perf_counter()
    written, last_report = 0, start
    # The big session first: it is the longest single task.
    with ProcessPoolExecutor(max_workers=args.procs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(fill_session, tenant.name, item, args.batch) for item in todo]
        for future in as_completed(futures):
            written += future.result()
            now = time.perf_counter()
            if now - last_report > 15:
                print(f"  {written:,}/{missing:,} in {now - start:.0f}s ({written / (now - start):,.0f} msgs/s)")
                last_report = now
    seconds = time.perf_counter() - start
    print(f"  generated {written:,} messages in {seconds:.0f}s ({written / seconds:,.0f} msgs/s)")
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE")
    info.update({"generated": True, "generation_seconds": round(seconds, 1), "generated_messages": written})
    return info


# -- timing ----------------------------------------------------------------------------------------------
def time_calls(call, *, runs: int, warmup: int) -> tuple[list[float], object]:
    result = None
    for _ in range(warmup):
        result = call()
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return seconds, result


class Bench:
    def __init__(self, args):
        self.args = args
        self.rows: list[dict] = []

    def http(self, label: str, client, url: str, *, group: str, expect_json=True) -> object:
        from django.db import connection

        def call():
            return client.get(url)

        response = client.get(url)
        if response.status_code != 200:
            print(f"  {label}: HTTP {response.status_code} — skipped ({response.content[:200]!r})")
            self.rows.append({"group": group, "label": label, "url": url, "status": response.status_code})
            return None
        statements = []  # (seconds, sql, params), by a wrapper: each request resets connection.queries

        def count(execute, sql, params, many, context):
            start = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                statements.append((time.perf_counter() - start, sql, params))

        with connection.execute_wrapper(count):
            client.get(url)
        seconds, response = time_calls(call, runs=self.args.runs, warmup=self.args.warmup)
        summary = benchlib.summary_ms(seconds)
        slowest = max(statements, key=lambda s: s[0]) if statements else (0.0, "", None)
        self.rows.append(
            {
                "group": group,
                "label": label,
                "url": url,
                "status": 200,
                "queries": len(statements),
                **summary,
                "slowest_sql_ms": round(slowest[0] * 1000, 2),
                "slowest_sql": slowest[1],
                "slowest_params": [str(p) for p in slowest[2]] if slowest[2] else [],
                "_slowest": slowest,
            }
        )
        return json.loads(response.content) if expect_json else response

    def scan(self, label: str, sql: str, params: list, *, group: str) -> None:
        from django.db import connection

        def call():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall()

        seconds, _ = time_calls(call, runs=self.args.scan_runs, warmup=1)
        self.rows.append(
            {"group": group, "label": label, "sql": " ".join(sql.split()), "queries": 1, **benchlib.summary_ms(seconds)}
        )


def explain_slow(rows: list[dict]) -> None:
    from django.db import connection

    for row in rows:
        if row.get("group") == "baseline" or row.get("p50_ms", 0) < TARGET_MS or not row.get("_slowest"):
            continue
        seconds, sql, params = row["_slowest"]
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
            plan = "\n".join(r[0] for r in cursor.fetchall())
        row["slowest_plan"] = plan
        print(f"\n{row['label'].strip()} — slowest statement {seconds * 1000:.0f} ms:\n{sql}\n{plan}")


COUNTERS_SQL = """
    count(*) AS messages,
    count(*) FILTER (WHERE role = 'user') AS message_user,
    count(*) FILTER (WHERE role = 'assistant') AS message_assistant,
    count(*) FILTER (WHERE role = 'toolResult') AS message_toolresult,
    count(*) FILTER (WHERE role = 'error') AS message_error,
    count(DISTINCT request_id) FILTER (WHERE request_id <> '')
      + count(*) FILTER (WHERE request_id = '' AND auth_type <> '') AS requests,
    count(DISTINCT conversation_id) AS conversations,
    sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_tokens), sum(total_tokens)
"""


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from django.conf import settings
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from sessions_app.models import Message, Session, Tenant
    from sessions_app.services.apikeys import apikey_create

    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    data = ensure_data(args)
    if args.generate_only:
        return 0
    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS.append("testserver")

    tenant = Tenant.objects.get(name=tenant_name(args))
    big = Session.objects.filter(tenant=tenant).order_by("-messages").first()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sessions_app_message")
        table_rows = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM sessions_app_usagehourly WHERE tenant_id = %s", [tenant.pk])
        hourly_rows = cursor.fetchone()[0]
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('sessions_app_message'))")
        table_size = cursor.fetchone()[0]
    sessions = Session.objects.filter(tenant=tenant).count()
    print(
        f"Tenant {tenant.name}: {sessions} sessions, big session {big.messages:,} messages, "
        f"{hourly_rows:,} hourly roll-up rows; message table {table_rows:,} rows ({table_size})."
    )
    print(f"Timing in-process with django.test.Client: {args.runs} runs after {args.warmup} warm-up runs…")

    key = apikey_create(tenant_name=tenant.name, name="bench").plain_key
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    bench = Bench(args)

    # -- API: statistics -------------------------------------------------------------------------------
    stats = bench.http("GET /sessions/{big}/stats/", api, f"/api/v1/sessions/{big.pk}/stats/", group="stats")
    for group_by in ("day", "model", "session", "tool", "user_id"):
        bench.http(f"GET /stats/?group_by={group_by}", api, f"/api/v1/stats/?group_by={group_by}", group="stats")

    # -- API: message lists and search -----------------------------------------------------------------
    url = f"/api/v1/sessions/{big.pk}/messages/?page_size=100"
    first = bench.http("GET /sessions/{big}/messages/ page 1", api, url, group="lists")
    if first and first.get("next"):
        bench.http("  … page 2 via the next cursor", api, first["next"], group="lists")
    middle = f"/api/v1/sessions/{big.pk}/messages/?page_size=100&after_seq={big.messages // 2}"
    bench.http("  … middle (?after_seq=N/2)", api, middle, group="lists")
    for word in (RARE_WORD, COMMON_WORD, RARE_ZH, COMMON_ZH):
        bench.http(f"GET /messages/?q={word}", api, f"/api/v1/messages/?q={word}", group="search")
    bench.http(
        f"GET /sessions/{{big}}/messages/?q={COMMON_WORD}",
        api,
        f"/api/v1/sessions/{big.pk}/messages/?q={COMMON_WORD}",
        group="search",
    )

    # -- admin ------------------------------------------------------------------------------------------
    admin_state = "measured"
    if not admin.site.is_registered(Message):
        admin_state = "pending: Message is not registered in the admin yet"
        print(f"  admin: {admin_state}")
    else:
        user_model = get_user_model()
        user = user_model.objects.filter(username="bench-admin").first()
        if user is None:
            user = user_model.objects.create_superuser("bench-admin", "bench@example.invalid", None)
        staff = Client()
        staff.force_login(user)
        message_admin = admin.site._registry[Message]
        base = "/admin/sessions_app/message/"

        def page(label: str, url: str) -> None:
            bench.http(label, staff, url, group="admin", expect_json=False)

        page("admin message changelist", base)
        filters = {f if isinstance(f, str) else getattr(f, "parameter_name", None) for f in message_admin.list_filter}
        filters |= {f[0] for f in message_admin.list_filter if isinstance(f, tuple)}
        if "role" in filters:
            page("  ?role__exact=assistant", base + "?role__exact=assistant")
        for name in sorted(f for f in filters if f):
            if "model" in name:
                page(f"  ?{name}={benchlib.MODELS[0]}", f"{base}?{name}={benchlib.MODELS[0]}")
            elif "tool" in name:
                page(f"  ?{name}=claude-code", f"{base}?{name}=claude-code")
            elif "session" in name:
                page(f"  ?{name}={{big}}", f"{base}?{name}={big.pk}")
        if message_admin.search_fields:
            for word in (RARE_WORD, COMMON_WORD, COMMON_ZH):
                page(f"  ?q={word}", f"{base}?q={word}")
        if admin.site.is_registered(Session):
            sbase = "/admin/sessions_app/session/"
            page("admin session changelist", sbase)
            page("  ?q=big", sbase + "?q=big")

    # -- baseline: the scans the counters replace --------------------------------------------------------
    print(f"Baseline scans: {args.scan_runs} runs after 1 warm-up run…")
    bench.scan(
        "scan: the big session's counters",
        f"SELECT {COUNTERS_SQL} FROM sessions_app_message WHERE session_id = %s",
        [big.pk],
        group="baseline",
    )
    bench.scan(
        "scan: the big session, grouped by role",
        "SELECT role, count(*), sum(input_tokens), sum(output_tokens), sum(total_tokens) "
        "FROM sessions_app_message WHERE session_id = %s GROUP BY role",
        [big.pk],
        group="baseline",
    )
    for key_sql, label in (
        ("date_trunc('day', created_at AT TIME ZONE 'UTC')", "day"),
        ("model", "model"),
    ):
        bench.scan(
            f"scan: tenant usage grouped by {label}",
            f"SELECT {key_sql} AS key, {COUNTERS_SQL} FROM sessions_app_message WHERE tenant_id = %s "
            "GROUP BY 1 ORDER BY 1",
            [tenant.pk],
            group="baseline",
        )
    bench.scan(
        "scan: tenant usage grouped by session (top 100)",
        f"SELECT session_id, {COUNTERS_SQL} FROM sessions_app_message WHERE tenant_id = %s "
        "GROUP BY 1 ORDER BY sum(total_tokens) DESC NULLS LAST LIMIT 100",
        [tenant.pk],
        group="baseline",
    )
    bench.scan(
        "scan: SELECT count(*) FROM message (default admin paginator)",
        "SELECT count(*) FROM sessions_app_message",
        [],
        group="baseline",
    )

    # -- output ----------------------------------------------------------------------------------------
    table = []
    for row in bench.rows:
        if row.get("status", 200) != 200:
            table.append([row["group"], row["label"], f"HTTP {row['status']}", "", "", "", ""])
            continue
        flag = "" if row["group"] == "baseline" else ("ok" if row["p95_ms"] < TARGET_MS else "SLOW")
        slowest = f"{row['slowest_sql_ms']:.1f}" if "slowest_sql_ms" in row else ""
        table.append(
            [row["group"], row["label"], f"{row['p50_ms']:.1f}", f"{row['p95_ms']:.1f}", row["queries"], slowest, flag]
        )
    benchlib.print_table(
        ["group", "request", "p50 ms", "p95 ms", "queries", "slowest SQL ms", f"<{TARGET_MS} ms"],
        table,
        title=f"{tenant.name}: {data['sessions']} sessions; message table {table_rows:,} rows ({table_size})",
    )
    by_label = {row["label"]: row for row in bench.rows if "p50_ms" in row}
    savings = []
    for endpoint, scan in (
        ("GET /sessions/{big}/stats/", "scan: the big session's counters"),
        ("GET /stats/?group_by=day", "scan: tenant usage grouped by day"),
        ("GET /stats/?group_by=model", "scan: tenant usage grouped by model"),
        ("GET /stats/?group_by=session", "scan: tenant usage grouped by session (top 100)"),
    ):
        if endpoint in by_label and scan in by_label:
            factor = by_label[scan]["p50_ms"] / by_label[endpoint]["p50_ms"]
            savings.append({"endpoint": endpoint, "scan": scan, "scan_over_endpoint_p50": round(factor, 1)})
            print(f"  {endpoint}: the scan alone is {factor:,.0f}× slower (p50)")
    if stats:
        print(f"  big session counters: {stats}")
    if args.explain:
        explain_slow(bench.rows)
    for row in bench.rows:
        row.pop("_slowest", None)
    print(f"  admin: {admin_state}")

    path = benchlib.write_results(
        args.name,
        {
            "config": {k: v for k, v in vars(args).items() if k != "name"},
            "database": benchlib.database_description(),
            "server": benchlib.server_version(),
            "machine": benchlib.machine(),
            "timing": "in-process django.test.Client; p50/p95 over runs after warm-up; scans: raw SQL",
            "data": {
                **data,
                "big_session_messages": big.messages,
                "sessions": sessions,
                "usage_hourly_rows": hourly_rows,
                "message_table_rows": table_rows,
                "message_table_size": table_size,
            },
            "admin": admin_state,
            "results": bench.rows,
            "counters_vs_scan": savings,
            "target_ms": TARGET_MS,
        },
    )
    print(f"\nWritten: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
