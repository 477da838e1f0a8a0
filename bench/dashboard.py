#!/usr/bin/env python
"""The usage dashboard and the grouped statistics at 10M messages, against scans of those messages.

    .venv/bin/python bench/dashboard.py                        # 10,000,000 messages
    .venv/bin/python bench/dashboard.py --messages 200000      # a quick check

Data (what the dashboard reads, made directly, not through the message service): a tenant
`bench-dashboard-<N>` whose N messages are spread over 90 days, 50 users, 20 projects, 4 tools and 15
models. Python plans the sessions (deterministic: a seed per N): each user works on 2–4 projects with
one main tool, sessions start in working hours and hold ~200 messages (a log-normal spread, 10–4000),
one main model and, in a third of them, a second (a sub-agent's cheaper model). PostgreSQL then writes:

- the session rows (COPY);
- the messages, into an UNLOGGED scratch table `bench_dashboard_message` (session, seq, created_at, role,
  model, tokens; no content), made with generate_series: conversations of user → (assistant →
  toolResult)* → assistant, ~1% of answers errors, 10–40 s apart;
- from those messages, with the counting rules of the message service (every answer and error one
  request, a conversation per user message, a session with its first message): the hourly roll-ups
  (`UsageHourly`), the sessions' usage by model (`SessionModelUsage`) and the session counters.

That is what `messages_append` would have maintained for the same messages: the tests check the service
against a recount (tests/sessions_app/test_usage_analytics.py), and the 1M-message benchmark
(bench/stats_admin.py) writes through the service. Writing 10M messages through it, with their content
and search index, would take about an hour on this 2-core machine; the dashboard never reads them.
A re-run reuses the data when the tenant already has N messages (`--regenerate` rebuilds it).

Timing: each query of the dashboard (the selectors it calls, in-process), the whole dashboard page and a
CSV export (django.test.Client, a superuser), and each grouping of GET /api/v1/stats/ (Bearer key):
p50/p95 over --runs runs after --warmup runs. Every SQL statement a page runs is timed too.

Baseline, in the same run: the same figures computed by scanning the scratch message table (joined to
the sessions for tool, user and project) — the cost of a dashboard without roll-ups. The scratch table
is narrow (no content, no search vector), so the real message table would scan slower still. The
roll-ups' figures are checked against the scan's: equal, or the run fails.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TARGET_MS = 200
DAYS = 90
TOOLS = ["claude-code", "qwen-code", "openclaw", "codex"]
# Per tool: its main models (most used first) and the cheaper model its sub-agents use.
TOOL_MODELS = {
    "claude-code": (
        ["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-opus-4-5-20251101"],
        "claude-haiku-4-5-20251001",
    ),
    "qwen-code": (["qwen3-coder-plus", "qwen3-max", "qwen-plus"], "qwen3-coder-flash"),
    "openclaw": (["claude-sonnet-4-5-20250929", "gpt-5", "gemini-2.5-pro", "qwen-max"], "gemini-2.5-flash"),
    "codex": (["gpt-5-codex", "gpt-5", "o4-mini"], "gpt-5-mini"),
}
USERS = [f"dev{n:02d}" for n in range(50)]
PROJECTS = [f"project-{n:02d}" for n in range(20)]
SCRATCH = "bench_dashboard_message"
BREAKDOWNS = ["day", "tool", "model", "user_id", "project"]
PLAN = "bench_dashboard_plan"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000_000, help="messages in the data set (default 10M)")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per query or page (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    parser.add_argument("--scan-runs", type=int, default=3, help="timed runs per baseline scan (default 3)")
    parser.add_argument("--regenerate", action="store_true", help="drop the tenant's data and make it again")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--explain", action="store_true", help=f"EXPLAIN ANALYZE statements over {TARGET_MS // 4} ms")
    parser.add_argument("--name", default=None, help="results file name (default dashboard-<N>)")
    args = parser.parse_args()
    args.name = args.name or f"dashboard-{args.messages}"
    return args


# -- data ------------------------------------------------------------------------------------------------
def plan_sessions(messages: int, now: datetime) -> list[dict]:
    """Sessions whose sizes add up to `messages`, deterministic for a given N."""
    rng = random.Random(messages)
    start = now - timedelta(days=DAYS)
    # Users differ: a few heavy ones (Zipf-like weights), each with 2–4 projects and a main tool.
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(USERS))]
    habits = {
        user: {
            "projects": rng.sample(PROJECTS, rng.randint(2, 4)),
            "tool": TOOLS[rng.choices(range(len(TOOLS)), weights=[5, 3, 2, 2])[0]],
            "offset_h": rng.choice([0, 1, 8, -5]),  # where they work: UTC, Europe, China, America
        }
        for user in USERS
    }
    plan, total = [], 0
    while total < messages:
        user = rng.choices(USERS, weights=weights)[0]
        habit = habits[user]
        tool = habit["tool"] if rng.random() < 0.8 else rng.choice(TOOLS)
        mains, sub = TOOL_MODELS[tool]
        size = min(max(int(rng.lognormvariate(math.log(150), 0.9)), 10), 4000, messages - total)
        step = rng.uniform(10, 40)
        day = start + timedelta(days=rng.randrange(DAYS))
        begins = day.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(
            hours=(9 - habit["offset_h"]) % 24 + rng.uniform(0, 9)
        )
        if begins + timedelta(seconds=step * size) > now:
            begins = now - timedelta(seconds=step * size + 3600)
        plan.append(
            {
                "id": uuid.UUID(int=rng.getrandbits(128)),
                "user_id": user,
                "project": rng.choice(habit["projects"]),
                "tool": tool,
                "size": size,
                "started_at": begins,
                "step": step,
                "cycle": rng.choice([2, 4, 6, 8, 8, 10, 12]),
                "model_a": mains[0] if rng.random() < 0.7 else rng.choice(mains),
                "model_b": sub,
                "share_b": 0.25 if rng.random() < 0.33 else 0.0,
            }
        )
        total += size
    return plan


def _copy(cursor, table: str, columns: list[str], rows) -> None:
    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(benchlib.copy_field(v) for v in row) + "\n")
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(buffer.getvalue())


GENERATE_SQL = f"""
CREATE UNLOGGED TABLE {SCRATCH} AS
SELECT session_id, seq, created_at, role,
       CASE WHEN role IN ('assistant', 'error')
            THEN CASE WHEN random() < share_b THEN model_b ELSE model_a END ELSE '' END AS model,
       CASE WHEN role = 'assistant' THEN 200 + (random() * 30000)::int ELSE 0 END AS input_tokens,
       CASE WHEN role = 'assistant' THEN 20 + (random() * 2000)::int ELSE 0 END AS output_tokens,
       CASE WHEN role = 'assistant' AND random() < 0.7 THEN (random() * 100000)::int ELSE 0 END AS cache_read_tokens,
       CASE WHEN role = 'assistant' AND random() < 0.3 THEN (random() * 5000)::int ELSE 0 END AS cache_creation_tokens
FROM (
    SELECT p.session_id, p.model_a, p.model_b, p.share_b, g.seq,
           p.started_at + (g.seq - 1) * p.step * interval '1 second' AS created_at,
           CASE WHEN mod(g.seq - 1, p.cycle) = 0 THEN 'user'
                WHEN mod(mod(g.seq - 1, p.cycle), 2) = 1 OR mod(g.seq - 1, p.cycle) = p.cycle - 1
                THEN CASE WHEN random() < 0.01 THEN 'error' ELSE 'assistant' END
                ELSE 'toolResult' END AS role
    FROM {PLAN} p CROSS JOIN LATERAL generate_series(1, p.size) AS g(seq)
) AS m
"""

# The measures these data have none of (no 1-hour writes, long prompts or reported costs): 0 in every counter
# (the columns have no database default). The 5-minute writes are all the writes.
UNUSED_MEASURES = (
    "cache_creation_1h_tokens",
    "long_context_input_tokens",
    "long_context_output_tokens",
    "long_context_cache_read_tokens",
    "long_context_cache_creation_tokens",
    "long_context_cache_creation_1h_tokens",
    "reported_cost_nano_usd",
    "reported_cost_requests",
)
_UNUSED = ", ".join(UNUSED_MEASURES)
_ZEROS = ", ".join(["0"] * len(UNUSED_MEASURES))

ROLLUP_SQL = f"""
INSERT INTO sessions_app_usagehourly (
    tenant_id, hour, tool, user_id, project, model, requests, messages, message_user, message_assistant,
    message_toolresult, message_error, message_system, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, total_tokens, conversations, sessions, cache_creation_5m_tokens, {_UNUSED})
SELECT %(tenant)s, date_trunc('hour', m.created_at, 'UTC'), p.tool, p.user_id, p.project, m.model,
       count(*) FILTER (WHERE m.role IN ('assistant', 'error')), count(*),
       count(*) FILTER (WHERE m.role = 'user'), count(*) FILTER (WHERE m.role = 'assistant'),
       count(*) FILTER (WHERE m.role = 'toolResult'), count(*) FILTER (WHERE m.role = 'error'), 0,
       sum(m.input_tokens), sum(m.output_tokens), sum(m.cache_read_tokens), sum(m.cache_creation_tokens),
       sum(m.input_tokens + m.output_tokens),
       count(*) FILTER (WHERE m.role = 'user'), count(*) FILTER (WHERE m.seq = 1), sum(m.cache_creation_tokens),
       {_ZEROS}
FROM {SCRATCH} m JOIN {PLAN} p USING (session_id)
GROUP BY 2, 3, 4, 5, 6
"""

_DAY_COUNTERS = (
    "requests, messages, message_user, message_assistant, message_toolresult, message_error, message_system, "
    "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, total_tokens, conversations, sessions, "
    f"cache_creation_5m_tokens, {_UNUSED}"
)
DAILY_SQL = f"""
INSERT INTO sessions_app_usagedaily (tenant_id, day, tool, user_id, project, model, {_DAY_COUNTERS})
SELECT tenant_id, (hour AT TIME ZONE 'UTC')::date, tool, user_id, project, model,
       {", ".join(f"sum({c})" for c in _DAY_COUNTERS.split(", "))}
FROM sessions_app_usagehourly
WHERE tenant_id = %(tenant)s
GROUP BY 1, 2, 3, 4, 5, 6
"""

SESSION_MODEL_SQL = f"""
INSERT INTO sessions_app_sessionmodelusage (
    tenant_id, session_id, model, day, requests, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, cache_creation_5m_tokens, total_tokens, {_UNUSED})
SELECT %(tenant)s, session_id, model, (created_at AT TIME ZONE 'UTC')::date, count(*), sum(input_tokens),
       sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_tokens), sum(cache_creation_tokens),
       sum(input_tokens + output_tokens), {_ZEROS}
FROM {SCRATCH}
WHERE role IN ('assistant', 'error')
GROUP BY session_id, model, 4
"""

SESSION_COUNTERS_SQL = f"""
UPDATE sessions_app_session s SET
    requests = c.requests, messages = c.messages, message_user = c.message_user,
    message_assistant = c.message_assistant, message_toolresult = c.message_toolresult,
    message_error = c.message_error, input_tokens = c.input_tokens, output_tokens = c.output_tokens,
    cache_read_tokens = c.cache_read_tokens, cache_creation_tokens = c.cache_creation_tokens,
    cache_creation_5m_tokens = c.cache_creation_tokens,
    total_tokens = c.total_tokens, conversations = c.message_user, last_seq = c.messages,
    last_message_at = c.last_message_at, ended_at = c.last_message_at
FROM (
    SELECT session_id, count(*) FILTER (WHERE role IN ('assistant', 'error')) AS requests, count(*) AS messages,
           count(*) FILTER (WHERE role = 'user') AS message_user,
           count(*) FILTER (WHERE role = 'assistant') AS message_assistant,
           count(*) FILTER (WHERE role = 'toolResult') AS message_toolresult,
           count(*) FILTER (WHERE role = 'error') AS message_error,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           sum(cache_read_tokens) AS cache_read_tokens, sum(cache_creation_tokens) AS cache_creation_tokens,
           sum(input_tokens + output_tokens) AS total_tokens, max(created_at) AS last_message_at
    FROM {SCRATCH} GROUP BY session_id
) AS c
WHERE s.id = c.session_id
"""


def tenant_name(args) -> str:
    return f"bench-dashboard-{args.messages}"


def drop_tenant_data(cursor, tenant_id) -> None:
    for table in (
        "sessions_app_usagehourly",
        "sessions_app_usagedaily",
        "sessions_app_sessionmodelusage",
        "sessions_app_session",
    ):
        cursor.execute(f"DELETE FROM {table} WHERE tenant_id = %s", [tenant_id])
    cursor.execute(f"DROP TABLE IF EXISTS {SCRATCH}")
    cursor.execute(f"DROP TABLE IF EXISTS {PLAN}")


def ensure_data(args) -> dict:
    from django.db import connection, transaction
    from django.db.models import Sum

    from sessions_app.models import Session, Tenant

    tenant, _ = Tenant.objects.get_or_create(name=tenant_name(args))
    stored = Session.objects.filter(tenant=tenant).aggregate(n=Sum("messages"))["n"] or 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [SCRATCH])
        scratch = cursor.fetchone()[0]
        if scratch:
            cursor.execute(f"SELECT tenant_id FROM {PLAN} LIMIT 1")
            row = cursor.fetchone()
            scratch = row is not None and row[0] == tenant.pk
    if stored == args.messages and scratch and not args.regenerate:
        print(f"Reusing {stored:,} messages of tenant {tenant.name} and the scratch table {SCRATCH}.")
        return {"tenant": tenant.name, "generated": False}

    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    steps = {}
    t0 = time.perf_counter()
    plan = plan_sessions(args.messages, now)
    print(f"Generating {args.messages:,} messages in {len(plan):,} sessions for tenant {tenant.name}…")
    with transaction.atomic(), connection.cursor() as cursor:
        drop_tenant_data(cursor, tenant.pk)
        _copy(
            cursor.cursor,
            "sessions_app_session",
            [
                "id",
                "tenant_id",
                "name",
                "tool",
                "agent_session_id",
                "user_id",
                "app",
                "project",
                "machine",
                "metadata",
                "started_at",
                "created_at",
                "updated_at",
                "last_seq",
                "conversations",
                "state_version",
                "requests",
                "messages",
                "message_user",
                "message_assistant",
                "message_toolresult",
                "message_error",
                "message_system",
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_creation_tokens",
                "total_tokens",
                "cache_creation_5m_tokens",
                *UNUSED_MEASURES,
            ],
            (
                [
                    s["id"],
                    tenant.pk,
                    f"{s['project']} {s['started_at']:%m-%d %H:%M}",
                    s["tool"],
                    str(s["id"]),
                    s["user_id"],
                    "",
                    s["project"],
                    "",
                    "{}",
                    s["started_at"].isoformat(),
                    now.isoformat(),
                    now.isoformat(),
                    *([0] * (15 + 1 + len(UNUSED_MEASURES))),
                ]
                for s in plan
            ),
        )
        cursor.execute(
            f"CREATE UNLOGGED TABLE {PLAN} (session_id uuid PRIMARY KEY, tenant_id uuid, tool text, user_id text, "
            "project text, size int, started_at timestamptz, step float8, cycle int, model_a text, model_b text, "
            "share_b float8)"
        )
        _copy(
            cursor.cursor,
            PLAN,
            [
                "session_id",
                "tenant_id",
                "tool",
                "user_id",
                "project",
                "size",
                "started_at",
                "step",
                "cycle",
                "model_a",
                "model_b",
                "share_b",
            ],
            (
                [
                    s["id"],
                    tenant.pk,
                    s["tool"],
                    s["user_id"],
                    s["project"],
                    s["size"],
                    s["started_at"].isoformat(),
                    s["step"],
                    s["cycle"],
                    s["model_a"],
                    s["model_b"],
                    s["share_b"],
                ]
                for s in plan
            ),
        )
        steps["sessions_and_plan_s"] = round(time.perf_counter() - t0, 1)
        for label, sql in (
            ("messages_s", GENERATE_SQL),
            ("rollups_s", ROLLUP_SQL),
            ("daily_rollups_s", DAILY_SQL),
            ("session_model_usage_s", SESSION_MODEL_SQL),
            ("session_counters_s", SESSION_COUNTERS_SQL),
        ):
            start = time.perf_counter()
            cursor.execute("SELECT setseed(0.42)")
            cursor.execute(sql, {"tenant": tenant.pk})
            steps[label] = round(time.perf_counter() - start, 1)
            print(f"  {label.removesuffix('_s')}: {steps[label]} s")
        cursor.execute(f"CREATE INDEX ON {SCRATCH} (created_at)")
    with connection.cursor() as cursor:
        for table in (
            "sessions_app_session",
            "sessions_app_usagehourly",
            "sessions_app_usagedaily",
            "sessions_app_sessionmodelusage",
            SCRATCH,
            PLAN,
        ):
            cursor.execute(f"VACUUM ANALYZE {table}")
    steps["total_s"] = round(time.perf_counter() - t0, 1)
    print(f"  generated in {steps['total_s']} s")
    return {"tenant": tenant.name, "generated": True, "generation": steps}


# -- timing ----------------------------------------------------------------------------------------------
def timed(call, *, runs: int, warmup: int):
    result = None
    for _ in range(warmup):
        result = call()
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return seconds, result


class Statements:
    """Times every SQL statement run inside a block, grouped by its position in the block's run."""

    def __init__(self):
        self.runs: list[list[tuple[float, str, object]]] = []

    def __call__(self, execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.runs[-1].append((time.perf_counter() - start, sql, params))

    def run(self, call):
        from django.db import connection

        self.runs.append([])
        with connection.execute_wrapper(self):
            return call()

    def per_statement(self) -> list[dict]:
        """p50/p95 of each statement position (runs that ran the same number of statements)."""
        count = max(len(r) for r in self.runs)
        runs = [r for r in self.runs if len(r) == count]
        out = []
        for i in range(count):
            seconds = [r[i][0] for r in runs]
            sql = runs[-1][i][1]
            out.append({**benchlib.summary_ms(seconds), "sql": " ".join(sql.split())[:300], "_stmt": runs[-1][i]})
        return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.rows: list[dict] = []

    def call(self, group: str, label: str, call, *, statements: bool = True) -> object:
        recorder = Statements()
        seconds, result = timed(lambda: recorder.run(call), runs=self.args.runs, warmup=self.args.warmup)
        row = {"group": group, "label": label, **benchlib.summary_ms(seconds)}
        if statements:
            stmts = recorder.per_statement()
            row["queries"] = len(stmts)
            slowest = max(stmts, key=lambda s: s["p95_ms"]) if stmts else None
            row["slowest_sql_p95_ms"] = slowest["p95_ms"] if slowest else 0
            row["slowest_sql"] = slowest["sql"] if slowest else ""
            row["statements"] = [{k: v for k, v in s.items() if k != "_stmt"} for s in stmts]
            row["_stmts"] = stmts
        self.rows.append(row)
        return result

    def http(self, group: str, label: str, client, url: str) -> object:
        def get():
            response = client.get(url)
            if hasattr(response, "streaming_content"):
                body = b"".join(response.streaming_content)
            else:
                body = response.content
            assert response.status_code == 200, (url, response.status_code, body[:300])
            return response, body

        response, body = self.call(group, label, get)
        self.rows[-1]["bytes"] = len(body)
        return response

    def scan(self, label: str, sql: str, params) -> list:
        from django.db import connection

        def call():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall()

        seconds, result = timed(call, runs=self.args.scan_runs, warmup=1)
        self.rows.append({"group": "baseline", "label": label, "queries": 1, **benchlib.summary_ms(seconds)})
        return result


SCAN_FIELDS = """
    count(*) FILTER (WHERE m.role IN ('assistant', 'error')) AS requests, count(*) AS messages,
    count(*) FILTER (WHERE m.role = 'user') AS conversations, count(*) FILTER (WHERE m.seq = 1) AS sessions,
    sum(m.input_tokens) AS input_tokens, sum(m.output_tokens) AS output_tokens,
    sum(m.cache_read_tokens) AS cache_read_tokens, sum(m.cache_creation_tokens) AS cache_creation_tokens
"""


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from sessions_app.models import Session, Tenant, UsageHourly
    from sessions_app.pricing import PriceBook
    from sessions_app.selectors.usage import (
        UsageFilter,
        top_sessions_by_cost,
        top_sessions_by_tokens,
        usage_breakdowns,
        usage_grouped,
    )
    from sessions_app.services.apikeys import apikey_create

    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    data = ensure_data(args)
    if args.generate_only:
        return 0
    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS.append("testserver")

    tenant = Tenant.objects.get(name=tenant_name(args))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), min(created_at), max(created_at) FROM {SCRATCH}")
        messages, first, last = cursor.fetchone()
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('sessions_app_usagehourly'))")
        rollup_size = cursor.fetchone()[0]
    hourly_rows = UsageHourly.objects.filter(tenant=tenant).count()
    sessions = Session.objects.filter(tenant=tenant).count()
    described = (
        f"{messages:,} messages ({first:%Y-%m-%d} to {last:%Y-%m-%d}), {sessions:,} sessions, "
        f"{hourly_rows:,} hourly roll-up rows ({rollup_size} table)"
    )
    print(f"Tenant {tenant.name}: {described}")
    print(f"Timing: {args.runs} runs after {args.warmup} warm-up runs; scans {args.scan_runs} runs…")
    load_before = os.getloadavg()

    today = datetime.now(UTC).date()
    day = datetime.min.time().replace(tzinfo=UTC)
    until = datetime.combine(today + timedelta(days=1), day)
    windows = {
        "30 days": datetime.combine(today - timedelta(days=29), day),
        "90 days": datetime.combine(today - timedelta(days=DAYS + 1), day),
    }
    heavy_user = UsageHourly.objects.filter(tenant=tenant).values("user_id").order_by("user_id").first()["user_id"]
    book = PriceBook.load()
    bench = Bench(args)

    # -- the dashboard's queries, one by one (what the page runs, in-process) ------------------------------
    for window, since in windows.items():
        for filter_label, extra in (
            ("", {}),
            (f" user={heavy_user}", {"user_id": heavy_user}),
            (" project=project-03", {"project": "project-03"}),
        ):
            if filter_label and window != "90 days":
                continue
            usage = UsageFilter(tenant=tenant, since=since, until=until, **extra)
            for group_by in ("day", "tool", "model", "user_id", "project"):
                bench.call(
                    "dashboard query",
                    f"{window}{filter_label}: usage by {group_by}",
                    lambda g=group_by, u=usage: usage_grouped(
                        tenant=tenant,
                        group_by=g,
                        since=u.since,
                        until=u.until,
                        book=book,
                        user_id=u.user_id,
                        project=u.project,
                    ),
                )
            bench.call(
                "dashboard query",
                f"{window}{filter_label}: all five breakdowns, one scan (the page's query)",
                lambda u=usage: usage_breakdowns(usage=u, group_bys=BREAKDOWNS, book=book),
            )
            bench.call(
                "dashboard query",
                f"{window}{filter_label}: top sessions by tokens",
                lambda u=usage: top_sessions_by_tokens(usage=u, limit=20, book=book),
            )
            bench.call(
                "dashboard query",
                f"{window}{filter_label}: top sessions by cost",
                lambda u=usage: top_sessions_by_cost(usage=u, limit=20, book=book),
            )

    # -- the pages --------------------------------------------------------------------------------------------
    user_model = get_user_model()
    user = user_model.objects.filter(username="bench-admin").first() or user_model.objects.create_superuser(
        "bench-admin", "bench@example.invalid", None
    )
    staff = Client()
    staff.force_login(user)
    url = reverse("admin:sessions_app_usage_dashboard")
    first_day = {label: since.date().isoformat() for label, since in windows.items()}
    page_rows = {}
    for window in windows:
        query = f"?tenant={tenant.pk}&since={first_day[window]}&until={today.isoformat()}"
        page_rows[window] = query
        bench.http("dashboard page", f"dashboard page, {window}", staff, url + query)
    base90 = page_rows["90 days"]
    bench.http(
        "dashboard page", f"dashboard page, 90 days, user={heavy_user}", staff, f"{url}{base90}&user_id={heavy_user}"
    )
    bench.http("dashboard page", "dashboard page, 90 days, tool=claude-code", staff, f"{url}{base90}&tool=claude-code")
    bench.http("dashboard page", "CSV export by day, 90 days", staff, f"{url}{base90}&format=csv&table=day")
    bench.http("dashboard page", "CSV export by user, 90 days", staff, f"{url}{base90}&format=csv&table=user_id")

    key = apikey_create(tenant_name=tenant.name, name="bench-dashboard").plain_key
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    since90 = windows["90 days"].isoformat().replace("+00:00", "Z")
    for group_by in ("day", "tool", "user_id", "project", "model", "session"):
        bench.http(
            "stats API",
            f"GET /stats/?group_by={group_by} (90 days)",
            api,
            f"/api/v1/stats/?group_by={group_by}&since={since90}",
        )
    bench.http(
        "stats API",
        f"GET /stats/?group_by=model&user_id={heavy_user}",
        api,
        f"/api/v1/stats/?group_by=model&user_id={heavy_user}",
    )

    # -- baseline: the same figures by scanning the messages ---------------------------------------------------
    print("Baseline scans…")
    since = windows["90 days"]
    scans = {}
    for key_sql, label in (
        ("date_trunc('day', m.created_at, 'UTC')", "day"),
        ("m.model", "model"),
        ("p.project", "project"),
        ("p.user_id", "user_id"),
    ):
        scans[label] = bench.scan(
            f"scan: usage by {label}, 90 days",
            f"SELECT {key_sql} AS key, {SCAN_FIELDS} FROM {SCRATCH} m JOIN {PLAN} p USING (session_id) "
            "WHERE m.created_at >= %s AND m.created_at < %s GROUP BY 1 ORDER BY 1",
            [since, until],
        )
    bench.scan(
        "scan: top sessions by tokens, 90 days",
        f"SELECT session_id, sum(input_tokens + output_tokens) AS t FROM {SCRATCH} GROUP BY 1 ORDER BY t DESC LIMIT 20",
        [],
    )

    # -- the roll-ups' figures are the scan's -----------------------------------------------------------------
    grouped = usage_grouped(tenant=tenant, group_by="model", since=since, until=until, book=book)
    by_model = {row["key"] or "": row for row in grouped["results"]}
    mismatches = []
    for key_value, requests, messages_, conversations, sessions_, inp, out, cread, cwrite in scans["model"]:
        row = by_model.get(key_value or "")
        got = (
            (
                row["requests"],
                row["messages"],
                row["conversations"],
                row["sessions"],
                row["input_tokens"],
                row["output_tokens"],
                row["cache_read_tokens"],
                row["cache_creation_tokens"],
            )
            if row
            else None
        )
        want = (requests, messages_, conversations, sessions_, inp, out, cread, cwrite)
        if got != tuple(int(v) for v in want):
            mismatches.append({"model": key_value, "rollups": got, "scan": want})
    if mismatches or len(by_model) != len(scans["model"]):
        print(f"MISMATCH between roll-ups and scan: {mismatches}")
    else:
        print(f"Check: the roll-ups' figures by model equal the scan's ({len(by_model)} models, 90 days).")

    # -- output -----------------------------------------------------------------------------------------------
    table = []
    for row in bench.rows:
        flag = "" if row["group"] == "baseline" else ("ok" if row["p95_ms"] < TARGET_MS else "SLOW")
        slowest = f"{row['slowest_sql_p95_ms']:.1f}" if "slowest_sql_p95_ms" in row else ""
        table.append(
            [
                row["group"],
                row["label"],
                f"{row['p50_ms']:.1f}",
                f"{row['p95_ms']:.1f}",
                row.get("queries", ""),
                slowest,
                flag,
            ]
        )
    benchlib.print_table(
        ["group", "what", "p50 ms", "p95 ms", "queries", "slowest SQL p95 ms", f"<{TARGET_MS} ms"],
        table,
        title=f"{tenant.name}: {described}",
    )
    by_label = {row["label"]: row for row in bench.rows}
    comparisons = []
    for query, scan in (
        ("90 days: usage by day", "scan: usage by day, 90 days"),
        ("90 days: usage by model", "scan: usage by model, 90 days"),
        ("90 days: usage by project", "scan: usage by project, 90 days"),
        ("90 days: usage by user_id", "scan: usage by user_id, 90 days"),
        ("90 days: top sessions by tokens", "scan: top sessions by tokens, 90 days"),
    ):
        factor = by_label[scan]["p50_ms"] / by_label[query]["p50_ms"]
        comparisons.append({"query": query, "scan": scan, "scan_over_query_p50": round(factor, 1)})
        print(
            f"  {query}: {by_label[query]['p50_ms']:.1f} ms; "
            f"the scan {by_label[scan]['p50_ms']:,.0f} ms ({factor:,.0f}×)"
        )
    statements = [s for row in bench.rows for s in row.get("_stmts", [])]
    print(f"  load average (1/5/15 min) before {load_before}, after {os.getloadavg()} on {os.cpu_count()} cores")
    worst = max(statements, key=lambda s: s["p95_ms"])
    print(f"  slowest single SQL statement: p95 {worst['p95_ms']:.1f} ms — {worst['sql'][:160]}")
    if args.explain:
        with connection.cursor() as cursor:
            seen = set()
            for s in sorted(statements, key=lambda s: -s["p95_ms"]):
                if s["p95_ms"] < TARGET_MS / 4 or s["sql"] in seen:
                    continue
                seen.add(s["sql"])
                _, sql, params = s["_stmt"]
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
                print(f"\n{s['p95_ms']:.1f} ms: {sql[:300]}\n" + "\n".join(r[0] for r in cursor.fetchall()))
    for row in bench.rows:
        row.pop("_stmts", None)
    path = benchlib.write_results(
        args.name,
        {
            "config": {k: v for k, v in vars(args).items() if k != "name"},
            "database": benchlib.database_description(),
            "server": benchlib.server_version(),
            "machine": {**benchlib.machine(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
            "data": {
                **data,
                "messages": messages,
                "sessions": sessions,
                "usage_hourly_rows": hourly_rows,
                "rollup_table_size": rollup_size,
                "first": first,
                "last": last,
            },
            "results": bench.rows,
            "rollups_vs_scan": comparisons,
            "check_mismatches": mismatches,
            "target_ms": TARGET_MS,
        },
    )
    print(f"\nWritten: {path}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
