#!/usr/bin/env python
"""Hot paths besides chat turns: statements and CPU per call, against a raw-SQL floor measured in the same run.

    .venv/bin/python bench/hotpaths.py                 # 200 calls of each (median, p95)
    .venv/bin/python bench/hotpaths.py --runs 50       # quicker
    .venv/bin/python bench/hotpaths.py --sql           # and print the SQL of one call of each

In-process (django.test.Client, one client, no web server), on the bench database: a fresh session of a
tenant that already has a few thousand messages, for each call
- message ingest: POST /sessions/{id}/messages/ with one message, and with a batch of 50 (per message);
- state: GET /sessions/{id}/state/, PUT it (a whole new object), PATCH it (a merge patch of two keys);
- stats: GET /sessions/{id}/stats/ (one session's counters and cost) and GET /stats/?group_by=day (the tenant's,
  last 30 days).

Per call: the SQL statements (CaptureQueriesContext; "without auth" leaves out the API key's SELECT, which is to
be cached), CPU ms (time.process_time, median), p95 wall ms; and the floor: the same write or read as plain
SQL through psycopg in this process (one transaction, no ORM, no HTTP), its CPU ms and p95.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TENANT = "bench-hotpaths"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="timed calls of each (after 5 untimed)")
    parser.add_argument("--history", type=int, default=5000, help="messages the tenant has before the run")
    parser.add_argument("--sql", action="store_true", help="print the SQL of one call of each")
    return parser.parse_args()


def message(n: int) -> dict:
    role = "user" if n % 2 == 0 else "assistant"
    body = {"role": role, "content": f"Message {n}: the train to Hangzhou leaves at nine, the hotel is by the lake."}
    if role == "assistant":
        body.update(model="claude-sonnet-4-5", input_tokens=1200 + n % 50, output_tokens=300, cache_read_tokens=900)
    return body


# -- the raw-SQL floor: the same rows written or read with plain psycopg ------------------------------------
FLOOR_APPEND = """
WITH s AS (
  UPDATE sessions_app_session SET last_seq = last_seq + %(n)s, messages = messages + %(n)s,
    message_user = message_user + %(users)s, message_assistant = message_assistant + %(assistants)s,
    input_tokens = input_tokens + %(input)s, output_tokens = output_tokens + %(output)s,
    cache_read_tokens = cache_read_tokens + %(cache)s, updated_at = now()
  WHERE id = %(session)s RETURNING last_seq - %(n)s AS first_seq, tenant_id
)
INSERT INTO sessions_app_message (id, tenant_id, session_id, seq, role, content, thinking, tool_name, auth_type,
  request_id, model, finish_reason, feishu_conversation_id, metadata, thinking_mode, input_tokens, output_tokens,
  cache_read_tokens, created_at, received_at)
SELECT gen_random_uuid(), s.tenant_id, %(session)s, s.first_seq + m.ord, m.role, m.content, '', '', '', '',
  m.model, '', '', '{}', '', m.input, m.output, m.cache, now(), now()
FROM s, unnest(%(roles)s::text[], %(contents)s::text[], %(models)s::text[], %(inputs)s::bigint[],
  %(outputs)s::bigint[], %(caches)s::bigint[]) WITH ORDINALITY AS m(role, content, model, input, output, cache, ord)
RETURNING id, seq
"""
FLOOR_STATE_READ = """
SELECT v.version, v.data, v.created_at FROM sessions_app_stateversion v
WHERE v.session_id = %s ORDER BY v.version DESC LIMIT 1
"""
FLOOR_STATE_WRITE = """
WITH s AS (
  UPDATE sessions_app_session SET state_version = state_version + 1, updated_at = now()
  WHERE id = %(session)s RETURNING state_version, tenant_id
)
INSERT INTO sessions_app_stateversion (tenant_id, session_id, version, data, change, created_at)
SELECT s.tenant_id, %(session)s, s.state_version, %(data)s, 'put', now() FROM s RETURNING version
"""
FLOOR_SESSION_STATS = "SELECT * FROM sessions_app_session WHERE id = %s"
FLOOR_GROUPED_STATS = """
SELECT day, sum(messages), sum(input_tokens), sum(output_tokens) FROM sessions_app_usagedaily
WHERE tenant_id = %s AND day >= current_date - 30 GROUP BY day ORDER BY day
"""


def floor_append(cursor, session_id, items: list[dict]) -> None:
    cursor.execute(
        FLOOR_APPEND,
        {
            "session": session_id,
            "n": len(items),
            "users": sum(m["role"] == "user" for m in items),
            "assistants": sum(m["role"] == "assistant" for m in items),
            "input": sum(m.get("input_tokens", 0) for m in items),
            "output": sum(m.get("output_tokens", 0) for m in items),
            "cache": sum(m.get("cache_read_tokens", 0) for m in items),
            "roles": [m["role"] for m in items],
            "contents": [m["content"] for m in items],
            "models": [m.get("model", "") for m in items],
            "inputs": [m.get("input_tokens") for m in items],
            "outputs": [m.get("output_tokens") for m in items],
            "caches": [m.get("cache_read_tokens") for m in items],
        },
    )
    assert len(cursor.fetchall()) == len(items)


def main() -> None:
    args = parse_args()
    benchlib.setup_django()
    from psycopg.types.json import Jsonb

    from sessions_app.models import Message, Tenant
    from sessions_app.services.apikeys import apikey_create
    from sessions_app.services.messages import messages_append
    from sessions_app.services.sessions import session_create

    key = apikey_create(tenant_name=TENANT, name="bench").plain_key
    tenant = Tenant.objects.get(name=TENANT)
    have = Message.objects.filter(tenant=tenant).count()
    if have < args.history:  # a tenant with a past: roll-ups and sessions to look through
        old = session_create(tenant=tenant, name="history", tool="chat", user_id="bench")
        for start in range(have, args.history, 500):
            messages_append(
                tenant=tenant,
                session_id=old.pk,
                items=[message(n) for n in range(start, min(start + 500, args.history))],
            )
    client = benchlib.InProcessClient(key)

    def fresh_session(name):
        return session_create(tenant=tenant, name=f"bench hotpaths {name}", tool="chat", user_id="bench").pk

    api_calls = {}
    session = fresh_session("ingest 1")
    api_calls["ingest, batch of 1 (per message)"] = (
        1,
        lambda n: client.call("post", f"/api/v1/sessions/{session}/messages/", [message(n)], 201),
    )
    session50 = fresh_session("ingest 50")
    api_calls["ingest, batch of 50 (per message)"] = (
        50,
        lambda n: client.call(
            "post", f"/api/v1/sessions/{session50}/messages/", [message(n * 50 + i) for i in range(50)], 201
        ),
    )
    state_session = fresh_session("state")
    state = f"/api/v1/sessions/{state_session}/state/"
    client.call("put", state, {"city": "Hangzhou", "step": 0, "todo": ["hotel", "train"]}, 200)
    api_calls["state read (GET)"] = (1, lambda n: client.call("get", state, None, 200))
    api_calls["state write (PUT)"] = (
        1,
        lambda n: client.call("put", state, {"city": "Hangzhou", "step": n, "todo": ["hotel", "train"]}, 200),
    )
    api_calls["state write (PATCH)"] = (
        1,
        lambda n: client.call("patch", state, {"step": n, "last": f"m{n}"}, 200, "application/merge-patch+json"),
    )
    api_calls["session stats (GET /sessions/{id}/stats/)"] = (
        1,
        lambda n: client.call("get", f"/api/v1/sessions/{session}/stats/", None, 200),
    )
    api_calls["usage stats (GET /stats/?group_by=day)"] = (
        1,
        lambda n: client.call("get", "/api/v1/stats/?group_by=day", None, 200),
    )

    # The floor, in the same process and database: the same rows through plain psycopg.
    conn = benchlib.psycopg_connect(autocommit=True)
    floor_session, floor_session50, floor_state = (
        fresh_session("floor 1"),
        fresh_session("floor 50"),
        fresh_session("floor state"),
    )
    with conn.cursor() as cursor:
        cursor.execute(FLOOR_STATE_WRITE, {"session": floor_state, "data": Jsonb({"city": "Hangzhou", "step": 0})})

    def floor(sql_calls):
        def run(n):
            with conn.transaction(), conn.cursor() as cursor:
                sql_calls(cursor, n)

        return run

    floors = {
        "ingest, batch of 1 (per message)": floor(lambda c, n: floor_append(c, floor_session, [message(n)])),
        "ingest, batch of 50 (per message)": floor(
            lambda c, n: floor_append(c, floor_session50, [message(n * 50 + i) for i in range(50)])
        ),
        "state read (GET)": floor(lambda c, n: (c.execute(FLOOR_STATE_READ, [floor_state]), c.fetchone())),
        "state write (PUT)": floor(
            lambda c, n: c.execute(
                FLOOR_STATE_WRITE,
                {"session": floor_state, "data": Jsonb({"city": "Hangzhou", "step": n, "todo": ["hotel", "train"]})},
            )
        ),
        "state write (PATCH)": floor(
            lambda c, n: c.execute(
                FLOOR_STATE_WRITE.replace(
                    "%(data)s",
                    "(SELECT data FROM sessions_app_stateversion "
                    "WHERE session_id = %(session)s ORDER BY version DESC LIMIT 1) || %(data)s",
                ),
                {"session": floor_state, "data": Jsonb({"step": n, "last": f"m{n}"})},
            )
        ),
        "session stats (GET /sessions/{id}/stats/)": floor(
            lambda c, n: (c.execute(FLOOR_SESSION_STATS, [floor_session]), c.fetchone())
        ),
        "usage stats (GET /stats/?group_by=day)": floor(
            lambda c, n: (c.execute(FLOOR_GROUPED_STATS, [tenant.pk]), c.fetchall())
        ),
    }

    rows, results = [], {}
    for name, (per, call) in api_calls.items():
        measured = benchlib.measure_calls(call, runs=args.runs)
        floor_measured = benchlib.measure_calls(floors[name], runs=args.runs, capture_sql=False)
        statements = measured.statements
        auth = sum("sessions_app_apikey" in sql for sql in statements)
        cpu, floor_cpu = measured.cpu_ms_median / per, floor_measured.cpu_ms_median / per
        rows.append(
            [
                name,
                f"{len(statements)} ({len(statements) - auth} without auth)",
                f"{cpu:.2f}",
                f"{floor_cpu:.3f}",
                f"{measured.p95_ms:.1f}",
                f"{floor_measured.p95_ms:.2f}",
                f"{cpu / floor_cpu:.0f}×",
            ]
        )
        results[name] = {
            "messages_per_call": per,
            "statements": len(statements),
            "auth_statements": auth,
            "sql": statements,
            "cpu_ms_per_message" if per > 1 else "cpu_ms": cpu,
            "p50_ms": measured.p50_ms,
            "p95_ms": measured.p95_ms,
            "floor_cpu_ms": floor_cpu,
            "floor_p50_ms": floor_measured.p50_ms,
            "floor_p95_ms": floor_measured.p95_ms,
        }
        if args.sql:
            print(f"\n-- SQL of one call: {name} --")
            for sql in statements:
                print("   ", (sql[:160] + "…") if len(sql) > 160 else sql)
    conn.close()
    benchlib.print_table(
        ["call", "statements", "CPU ms", "floor CPU ms", "p95 ms", "floor p95 ms", "CPU / floor"],
        rows,
        title=f"Hot paths in-process (django.test.Client, median of {args.runs}; ingest per message)",
    )
    path = benchlib.write_results(
        "hotpaths",
        {
            "runs": args.runs,
            "calls": results,
            "database": benchlib.database_description(),
            "server": benchlib.server_version(),
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
            "load_average": Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None,
        },
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
