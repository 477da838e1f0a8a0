#!/usr/bin/env python
"""The chat-turn lifecycle through the real HTTP API, against the bare minimum of the same writes in raw SQL.

    .venv/bin/python bench/turns.py --quick     # ~8 s per side, no profile
    .venv/bin/python bench/turns.py             # 2 rounds of 15 s per side, then the in-process profile
    .venv/bin/python bench/turns.py --profile-only

API side: `gunicorn aceproject.wsgi` on a free loopback port (`--workers`, `--threads`: more than one thread
means the gthread worker class). N client threads (default 32), each with its own http.client connection
(kept alive when the worker class allows it) and, by default, its own session (`--sessions` fewer than the
clients makes clients share sessions round-robin). Each client runs turns back to back:

    POST  /api/v1/sessions/{id}/turns/       {content, thinking_mode, external_id}              → 201
    POST  /api/v1/turns/{turn}/system-ready/ {system_prompt}  (2-4 KB)                          → 200
    PATCH /api/v1/turns/{turn}/ ×3           {content (growing: 1/4, 2/4, 3/4 of the answer), thinking?}
    POST  /api/v1/turns/{turn}/complete/     {content (1-2 KB), thinking?, tool_calls? (35% of turns),
                                              model, tokens, finish_reason, elapsed_ms, skills, tools…} → 200

Baseline: the same writes with psycopg 3 and nothing else, one connection per client thread, each call its
own transaction like the API call it stands for:

    start:        UPDATE session SET last_seq = last_seq + 2, counters … RETURNING last_seq;
                  INSERT the user message and the assistant placeholder (one INSERT, two rows)
    system-ready: UPDATE the user message SET thinking = <system prompt>
    checkpoint:   UPDATE the assistant message SET content (, thinking)
    complete:     UPDATE the assistant message (content, tool_calls, model, tokens, …);
                  UPDATE the user message (skill and tool names); UPDATE the conversation's counters

It writes no turn row, no conversation per turn (one per session, made beforehand), no hourly roll-up and
no session counters at completion; it reads nothing back and validates nothing.

The sides alternate in rounds (SQL, API, SQL, API) so table growth, autovacuum and checkpoints fall on both.
Turns/s = turns completed / wall-clock seconds; latencies per call type and overall.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TENANT = "bench-turns"
TARGET_P95_MS = 30.0
CALLS = ("start", "system-ready", "checkpoint", "complete")
CHECKPOINTS = 3


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32, help="concurrent client threads (default 32)")
    parser.add_argument("--sessions", type=int, default=None, help="sessions shared by the clients (default: one each)")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per side per round (default 15)")
    parser.add_argument("--turns", type=int, default=None, help="turns per side per round instead of a duration")
    parser.add_argument("--rounds", type=int, default=2, help="alternating SQL/API rounds (default 2)")
    parser.add_argument("--quick", action="store_true", help="1 round of 8 s per side, no profile")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers (default 4)")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker; > 1 uses gthread (default 1)")
    parser.add_argument(
        "--think-ms", type=float, default=0.0, help="mean client pause before each call, ±50%% (default 0)"
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--profile", action="store_true", help="profile in-process even with --quick")
    parser.add_argument("--no-profile", action="store_true", help="skip the in-process profile")
    parser.add_argument("--profile-only", action="store_true", help="only the in-process profile")
    parser.add_argument("--profile-runs", type=int, default=30, help="turns of the in-process timing (default 30)")
    parser.add_argument("--keep", action="store_true", help="keep the written rows (default: delete them)")
    parser.add_argument("--name", default=None, help="results file name (default turns or turns-quick)")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.rounds = 8.0, 1
    args.sessions = min(args.sessions or args.clients, args.clients)
    args.do_profile = args.profile or args.profile_only or not (args.quick or args.no_profile)
    args.name = args.name or ("turns-quick" if args.quick else "turns")
    return args


# -- realistic turns ---------------------------------------------------------------------------------------
SKILLS = ["code-review", "sql-tuning", "release-notes", "incident-triage", "translate-zh", "unit-tests"]
TOOL_NAMES = [name for name, _ in benchlib.TOOLS]


def text_of_bytes(rng: random.Random, lo: int, hi: int, zh_share: float = 0.25) -> str:
    """Prose of lo..hi UTF-8 bytes: English, sometimes Chinese."""
    target = rng.randint(lo, hi)
    zh = rng.random() < zh_share
    pool, sep = (benchlib.ZH_SENTENCES, "") if zh else (benchlib.EN_SENTENCES, " ")
    parts, size = [], 0
    while size < target:
        sentence = rng.choice(pool)
        parts.append(sentence)
        size += len(sentence.encode()) + len(sep)
    return sep.join(parts)


def system_prompt(rng: random.Random, user: str, skills: list[str]) -> str:
    """2-4 KB: instructions, the skills, recalled memory and the tools, as a chat app assembles them."""
    target = rng.randint(2048, 4096)
    parts = [
        f"You are the engineering assistant of {user}. Answer precisely, cite files and lines, and ask before "
        "running anything destructive. Today is 2026-11-30.",
        "## Skills",
        *(f"- {skill}: " + rng.choice(benchlib.EN_SENTENCES) for skill in skills),
        "## Tools",
        *(f"- {name}: " + rng.choice(benchlib.EN_SENTENCES) for name in TOOL_NAMES),
        "## What you remember about this user",
    ]
    size = sum(len(p.encode()) + 1 for p in parts)
    while size < target:
        line = "- " + rng.choice(benchlib.EN_SENTENCES + benchlib.ZH_SENTENCES)
        parts.append(line)
        size += len(line.encode()) + 1
    return "\n".join(parts)


def make_turn(rng: random.Random, client: int, n: int) -> dict:
    """The pre-encoded bodies of one turn (external_id is added when it is sent)."""
    user = f"user{client}"
    skills = rng.sample(SKILLS, rng.randint(0, 3))
    thinking_mode = rng.choice(["", "", "auto", "deep"])
    answer = text_of_bytes(rng, 1024, 2048)
    thinking = text_of_bytes(rng, 300, 1500, zh_share=0.1) if thinking_mode else ""
    with_tools = rng.random() < 0.35
    checkpoints = []
    for k in range(1, CHECKPOINTS + 1):
        body = {"content": answer[: len(answer) * k // (CHECKPOINTS + 1)]}
        if thinking:
            body["thinking"] = thinking[: len(thinking) * min(k + 1, CHECKPOINTS) // CHECKPOINTS]
        checkpoints.append(json.dumps(body, ensure_ascii=False).encode())
    input_tokens = rng.randint(1500, 30000)
    output_tokens = rng.randint(200, 1500)
    complete = {
        "content": answer,
        "model": rng.choice(benchlib.MODELS),
        "max_tokens": 8192,
        "temperature": rng.choice([0.2, 0.7, 1.0]),
        "finish_reason": "stop",
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": rng.choice([0, rng.randint(1000, 20000)]),
        "elapsed_ms": rng.randint(1500, 40000),
        "skill_names": skills,
        "available_tool_names": TOOL_NAMES,
        "requests": 1,
    }
    if thinking:
        complete["thinking"] = thinking
    if with_tools:
        calls = []
        for i in range(rng.randint(1, 3)):
            name, make_args = rng.choice(benchlib.TOOLS)
            call = {"id": f"call_{client}_{n}_{i}", "name": name, "arguments": make_args(rng)}
            if rng.random() < 0.5:
                call["result"] = benchlib.tool_output(rng)[: rng.randint(200, 600)]
            calls.append(call)
        complete |= {"tool_calls": calls, "tool_names": sorted({c["name"] for c in calls}), "requests": len(calls) + 1}
        complete["finish_reason"] = "tool_calls" if rng.random() < 0.5 else "stop"
    prompt = system_prompt(rng, user, skills)
    return {
        "start": {"content": text_of_bytes(rng, 60, 700), "thinking_mode": thinking_mode},
        "system_prompt": prompt,
        "system_ready": json.dumps({"system_prompt": prompt}, ensure_ascii=False).encode(),
        "checkpoints": checkpoints,
        "checkpoint_data": [json.loads(c) for c in checkpoints],
        "complete": json.dumps(complete, ensure_ascii=False).encode(),
        "complete_data": complete,
    }


def make_plans(args) -> list[list[dict]]:
    """A pool of distinct turns per client, cycled through (bodies encoded before the clock starts)."""
    pool = 12 if args.quick else 24
    return [
        [make_turn(random.Random(args.seed * 1000 + c * 100 + n), c, n) for n in range(pool)]
        for c in range(args.clients)
    ]


# -- CPU accounting (who used the two cores) ---------------------------------------------------------------
TICK = os.sysconf("SC_CLK_TCK")


_POSTMASTER: list[int] = []


def postmaster_pid() -> int | None:
    """The pid of the bench's own PostgreSQL server: other servers on the machine (another project's tests,
    say) count as other work, not as this API's database CPU."""
    if not _POSTMASTER:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('data_directory')")
            data_directory = cursor.fetchone()[0]
        try:
            _POSTMASTER.append(int(Path(data_directory, "postmaster.pid").read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            _POSTMASTER.append(0)
    return _POSTMASTER[0] or None


def cpu_snapshot(gunicorn_pid: int | None) -> dict:
    postmaster = postmaster_pid()
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        pid, ppid = int(entry), int(fields[1])
        ticks = int(fields[11]) + int(fields[12])
        if pid == os.getpid():
            kind = "bench clients"
        elif gunicorn_pid and (pid == gunicorn_pid or ppid == gunicorn_pid):
            kind = "gunicorn"
        elif comm == "postgres" and (postmaster is None or postmaster in (pid, ppid)):
            kind = "postgres"
        else:
            kind = "other"
        procs[pid] = (kind, ticks)
    with open("/proc/stat") as f:
        cpu = [int(v) for v in f.readline().split()[1:]]
    busy = sum(cpu) - cpu[3] - cpu[4]  # minus idle and iowait
    return {"procs": procs, "busy": busy, "total": sum(cpu)}


def cpu_delta(before: dict, after: dict) -> dict[str, float]:
    seconds: Counter = Counter()
    for pid, (kind, ticks) in after["procs"].items():
        seconds[kind] += (ticks - before["procs"].get(pid, (kind, 0))[1]) / TICK
    busy = (after["busy"] - before["busy"]) / TICK
    named = sum(v for k, v in seconds.items() if k != "other")
    seconds["other"] = max(0.0, busy - named)
    seconds["idle"] = (after["total"] - after["busy"] - before["total"] + before["busy"]) / TICK
    return dict(seconds)


# -- the two sides -----------------------------------------------------------------------------------------
class Side:
    def __init__(self, name: str):
        self.name = name
        self.seconds = 0.0
        self.turns = 0
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.cpu: Counter = Counter()

    @property
    def rate(self) -> float:
        return self.turns / self.seconds if self.seconds else 0.0

    def all_calls(self) -> list[float]:
        return [v for name in CALLS for v in self.latencies[name]]


def run_threads(side: Side, target, per_thread_args: list[tuple], gunicorn_pid: int | None) -> None:
    """One thread per client, released together; adds wall-clock time and CPU use to `side`."""
    barrier = threading.Barrier(len(per_thread_args) + 1)
    lock = threading.Lock()

    def wrapper(*a):
        try:
            latencies, turns = target(barrier, *a)
            with lock:
                for name, values in latencies.items():
                    side.latencies[name] += values
                side.turns += turns
        except Exception as error:  # noqa: BLE001
            with lock:
                side.errors.append(repr(error))
            barrier.abort()

    threads = [threading.Thread(target=wrapper, args=a) for a in per_thread_args]
    for thread in threads:
        thread.start()
    before = cpu_snapshot(gunicorn_pid)
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    side.seconds += time.perf_counter() - start
    side.cpu.update(cpu_delta(before, cpu_snapshot(gunicorn_pid)))
    while LINGERING:
        LINGERING.pop().close()


class Budget:
    """Until a deadline (duration mode) or for a number of turns."""

    def __init__(self, duration: float, turns: int | None):
        self.duration, self.turns = duration, turns

    def running(self, started: float, done: int) -> bool:
        if self.turns is not None:
            return done < self.turns
        return time.perf_counter() - started < self.duration


def api_client(barrier, port: int, key: str, session_id, plan: list[dict], budget: Budget, think: float, tag: str):
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    latencies: dict[str, list[float]] = defaultdict(list)
    jitter = random.Random(tag)

    def call(kind: str, method: str, path: str, body: bytes, expect: int) -> bytes:
        if think:
            time.sleep(think * (0.5 + jitter.random()))  # not in step: the clients' calls spread out
        start = time.perf_counter()
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        latencies[kind].append(time.perf_counter() - start)
        if response.status != expect:
            raise RuntimeError(f"{method} {path} → {response.status}: {data[:300]!r}")
        return data

    barrier.wait()
    started, done = time.perf_counter(), 0
    while budget.running(started, done):
        turn = plan[done % len(plan)]
        start_body = json.dumps({**turn["start"], "external_id": f"{tag}-{uuid.uuid4().hex}"}).encode()
        data = call("start", "POST", f"/api/v1/sessions/{session_id}/turns/", start_body, 201)
        turn_path = f"/api/v1/turns/{json.loads(data)['turn']}/"
        call("system-ready", "POST", turn_path + "system-ready/", turn["system_ready"], 200)
        for body in turn["checkpoints"]:
            call("checkpoint", "PATCH", turn_path, body, 200)
        call("complete", "POST", turn_path + "complete/", turn["complete"], 200)
        done += 1
    conn.close()
    return latencies, done


LINGERING: list = []

SQL_START = (
    "UPDATE sessions_app_session SET last_seq = last_seq + 2, messages = messages + 2, "
    "message_user = message_user + 1, message_assistant = message_assistant + 1, "
    "last_message_at = GREATEST(last_message_at, %s) WHERE id = %s RETURNING last_seq"
)
SQL_INSERT = (
    "INSERT INTO sessions_app_message (id, tenant_id, session_id, conversation_id, seq, role, content, thinking, "
    "tool_name, auth_type, request_id, model, finish_reason, feishu_conversation_id, metadata, thinking_mode, "
    "external_id, created_at, received_at) VALUES "
    "(%s, %s, %s, %s, %s, 'user', %s, '', '', '', '', '', '', '', '{}', %s, %s, %s, %s), "
    "(%s, %s, %s, %s, %s, 'assistant', '', '', '', '', '', '', '', '', '{}', '', NULL, %s, %s)"
)
SQL_SYSTEM = "UPDATE sessions_app_message SET thinking = %s WHERE id = %s"
SQL_CHECKPOINT = "UPDATE sessions_app_message SET content = %s WHERE id = %s"
SQL_CHECKPOINT_THINKING = "UPDATE sessions_app_message SET content = %s, thinking = %s WHERE id = %s"
SQL_COMPLETE_ASSISTANT = (
    "UPDATE sessions_app_message SET content = %s, thinking = %s, tool_calls = %s, tool_names = %s, model = %s, "
    "max_tokens = %s, temperature = %s, finish_reason = %s, input_tokens = %s, output_tokens = %s, "
    "cache_read_tokens = %s, total_tokens = %s, elapsed_ms = %s, api_calls = %s WHERE id = %s"
)
SQL_COMPLETE_USER = "UPDATE sessions_app_message SET skill_names = %s, tool_names = %s WHERE id = %s"
SQL_COMPLETE_CONVERSATION = (
    "UPDATE sessions_app_conversation SET requests = requests + %s, input_tokens = input_tokens + %s, "
    "output_tokens = output_tokens + %s, cache_read_tokens = cache_read_tokens + %s, "
    "total_tokens = total_tokens + %s, last_message_at = GREATEST(last_message_at, %s) WHERE id = %s"
)


def sql_client(barrier, tenant_id, session_id, conversation_id, plan: list[dict], budget: Budget, think: float, tag):
    from psycopg.types.json import Jsonb

    conn = benchlib.psycopg_connect()
    latencies: dict[str, list[float]] = defaultdict(list)
    jitter = random.Random(tag)

    def timed(kind: str, statements):
        if think:
            time.sleep(think * (0.5 + jitter.random()))  # not in step: the clients' calls spread out
        start = time.perf_counter()
        with conn.cursor() as cursor:
            result = statements(cursor)
        conn.commit()
        latencies[kind].append(time.perf_counter() - start)
        return result

    barrier.wait()
    started, done = time.perf_counter(), 0
    while budget.running(started, done):
        turn = plan[done % len(plan)]
        now = datetime.now(UTC)
        user_id, assistant_id = uuid.uuid4(), uuid.uuid4()

        def start(cursor, turn=turn, now=now, user_id=user_id, assistant_id=assistant_id):
            cursor.execute(SQL_START, (now, session_id))
            last = cursor.fetchone()[0]
            cursor.execute(
                SQL_INSERT,
                (
                    *(user_id, tenant_id, session_id, conversation_id, last - 1, turn["start"]["content"]),
                    *(turn["start"]["thinking_mode"], f"{tag}-{user_id.hex}", now, now),
                    *(assistant_id, tenant_id, session_id, conversation_id, last, now, now),
                ),
            )

        timed("start", start)
        timed("system-ready", lambda c, t=turn, u=user_id: c.execute(SQL_SYSTEM, (t["system_prompt"], u)))
        for body in turn["checkpoint_data"]:
            if "thinking" in body:
                params = (body["content"], body["thinking"], assistant_id)
                timed("checkpoint", lambda c, p=params: c.execute(SQL_CHECKPOINT_THINKING, p))
            else:
                timed("checkpoint", lambda c, b=body, a=assistant_id: c.execute(SQL_CHECKPOINT, (b["content"], a)))

        def complete(cursor, d=turn["complete_data"], user_id=user_id, assistant_id=assistant_id):
            tool_calls = d.get("tool_calls")
            total = d["input_tokens"] + d["output_tokens"]
            cursor.execute(
                SQL_COMPLETE_ASSISTANT,
                (
                    *(d["content"], d.get("thinking", ""), Jsonb(tool_calls) if tool_calls else None),
                    *(Jsonb(d["tool_names"]) if "tool_names" in d else None, d["model"], d["max_tokens"]),
                    *(d["temperature"], d["finish_reason"], d["input_tokens"], d["output_tokens"]),
                    *(d["cache_read_tokens"], total, d["elapsed_ms"], d["requests"], assistant_id),
                ),
            )
            cursor.execute(SQL_COMPLETE_USER, (Jsonb(d["skill_names"]), Jsonb(d["available_tool_names"]), user_id))
            cursor.execute(
                SQL_COMPLETE_CONVERSATION,
                (
                    *(d["requests"], d["input_tokens"], d["output_tokens"], d["cache_read_tokens"]),
                    *(total, datetime.now(UTC), conversation_id),
                ),
            )

        timed("complete", complete)
        done += 1
    LINGERING.append(conn)  # closed after the CPU snapshot: an exited backend's CPU time would be lost
    return latencies, done


def cleanup(tenant) -> None:
    """Delete everything the benchmark wrote for its tenant (earlier runs included)."""
    from django.db import connection, transaction

    statements = [
        "UPDATE sessions_app_session SET current_conversation_id = NULL WHERE tenant_id = %s",
        "DELETE FROM sessions_app_turn WHERE tenant_id = %s",
        "DELETE FROM sessions_app_message WHERE tenant_id = %s",
        "DELETE FROM sessions_app_llmrequest WHERE tenant_id = %s",
        "DELETE FROM sessions_app_conversation WHERE tenant_id = %s",
        "DELETE FROM sessions_app_stateversion WHERE tenant_id = %s",
        "DELETE FROM sessions_app_usagehourly WHERE tenant_id = %s",
        "DELETE FROM sessions_app_session WHERE tenant_id = %s",
    ]
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            try:
                with transaction.atomic():
                    cursor.execute("SET LOCAL session_replication_role = replica")  # skip FK triggers if allowed
            except Exception:  # noqa: BLE001
                pass
            for sql in statements:
                cursor.execute(sql, [tenant.pk])
    except Exception as error:  # noqa: BLE001
        print(f"  (could not delete earlier bench rows: {error}; they stay, results are unaffected)")


# -- in-process profile ------------------------------------------------------------------------------------
def profile_calls(tenant, key: str, args) -> dict:
    """Each call type in-process through django.test.Client: time, time waiting for PostgreSQL, SQL statements
    (CaptureQueriesContext, plus COPYs, which it does not see), response size, and a cProfile of one call."""
    import cProfile
    import io
    import pstats

    import psycopg
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from sessions_app.services.sessions import session_create

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    session = session_create(tenant=tenant, name="bench turns profile", tool="chat", user_id="profile")
    plan = [make_turn(random.Random(args.seed * 7 + n), 99, n) for n in range(8)]

    state = {"wait": 0.0, "copies": 0}
    original_wait, original_copy = psycopg.Connection.wait, psycopg.Cursor.copy

    def wait(conn, *a, **k):
        start = time.perf_counter()
        try:
            return original_wait(conn, *a, **k)
        finally:
            state["wait"] += time.perf_counter() - start

    def copy(cursor, *a, **k):
        state["copies"] += 1
        return original_copy(cursor, *a, **k)

    timings: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    queries: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    profiles: dict[str, str] = {}

    def call(kind, method, path, body, expect, run):
        state["wait"], state["copies"] = 0.0, 0
        profiler = cProfile.Profile() if run == args.profile_runs else None
        with CaptureQueriesContext(connection) as captured:
            if profiler:
                profiler.enable()
            start, cpu = time.perf_counter(), time.thread_time()
            response = getattr(client, method)(path, data=body, content_type="application/json")
            elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
            if profiler:
                profiler.disable()
        assert response.status_code == expect, (path, response.status_code, response.content[:300])
        if profiler:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
            text = out.getvalue()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
            profiles[kind] = {"tottime": text, "cumulative": out.getvalue()}
        elif run > 0:  # the first turn warms up
            timings[kind].append((elapsed, state["wait"], cpu))
        if run == 1:
            queries[kind] = [q["sql"] for q in captured.captured_queries] + ["COPY …"] * state["copies"]
            sizes[kind] = len(response.content)
        return response

    psycopg.Connection.wait, psycopg.Cursor.copy = wait, copy
    try:
        for run in range(args.profile_runs + 1):
            turn = plan[run % len(plan)]
            body = json.dumps({**turn["start"], "external_id": f"profile-{uuid.uuid4().hex}"})
            response = call("start", "post", f"/api/v1/sessions/{session.pk}/turns/", body, 201, run)
            path = f"/api/v1/turns/{response.json()['turn']}/"
            call("system-ready", "post", path + "system-ready/", turn["system_ready"], 200, run)
            for i, body in enumerate(turn["checkpoints"]):
                # Only the second checkpoint is timed and profiled (one of each type per turn).
                call("checkpoint" if i == 1 else "checkpoint (untimed)", "patch", path, body, 200, run if i == 1 else 0)
            call("complete", "post", path + "complete/", turn["complete"], 200, run)
    finally:
        psycopg.Connection.wait, psycopg.Cursor.copy = original_wait, original_copy

    rows, out = [], {}
    for kind in CALLS:
        total = benchlib.percentile([t for t, _, _ in timings[kind]], 50) * 1000
        db = benchlib.percentile([w for _, w, _ in timings[kind]], 50) * 1000
        cpu = benchlib.percentile([c for _, _, c in timings[kind]], 50) * 1000
        statements = queries[kind]
        verbs = Counter(_verb(sql) for sql in statements)
        rows.append(
            [
                kind,
                f"{total:.1f}",
                f"{db:.1f}",
                f"{total - db:.1f}",
                f"{cpu:.1f}",
                len(statements),
                ", ".join(f"{n} {v}" for v, n in verbs.most_common()),
                f"{sizes[kind]:,}",
            ]
        )
        out[kind] = {
            "median_ms": round(total, 2),
            "waiting_for_postgresql_ms": round(db, 2),
            "python_ms": round(total - db, 2),
            "python_cpu_ms": round(cpu, 2),
            "sql_statements": len(statements),
            "statements_by_kind": dict(verbs),
            "statements": [sql[:300] for sql in statements],
            "response_bytes": sizes[kind],
            "cprofile": profiles.get(kind),
        }
    benchlib.print_table(
        [
            "call (in-process, 1 client)",
            "median ms",
            "PG wait ms",
            "rest ms",
            "CPU ms",
            "SQL",
            "statements",
            "resp bytes",
        ],
        rows,
        title=f"Where one call spends its time (django.test.Client, median of {args.profile_runs} turns, quiet server)",
    )
    for kind in CALLS:
        print(f"\n-- SQL of one {kind} call --")
        for sql in queries[kind]:
            print("   ", (sql[:150] + "…") if len(sql) > 150 else sql)
    for kind in CALLS:
        print(f"\n-- cProfile of one {kind} call, top functions by own time --")
        lines = profiles[kind]["tottime"].splitlines()
        start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
        print("\n".join(lines[max(0, start - 6) : start + 16]))
    return out


def _verb(sql: str) -> str:
    word = sql.split(None, 1)[0].upper() if sql.strip() else "?"
    if word == "SELECT" and "FOR UPDATE" in sql.upper():
        return "SELECT FOR UPDATE"
    if word in ("SAVEPOINT", "RELEASE"):
        return "SAVEPOINT/RELEASE"
    return word


# -- main --------------------------------------------------------------------------------------------------
def pct_row(name: str, seconds: list[float]) -> list:
    ms = [s * 1000 for s in seconds]
    return [name, len(ms), *(f"{benchlib.percentile(ms, p):.1f}" for p in (50, 95, 99)), f"{max(ms):.1f}"]


def pct_dict(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    return {
        "calls": len(ms),
        **{f"p{p}_ms": round(benchlib.percentile(ms, p), 2) for p in (50, 95, 99)},
        "max_ms": round(max(ms), 2) if ms else None,
        "mean_ms": round(sum(ms) / len(ms), 2) if ms else None,
    }


def main() -> int:
    args = parse_args()
    benchlib.setup_django()
    from sessions_app.models import Conversation, Session, Tenant, Turn, TurnStatus
    from sessions_app.services.apikeys import apikey_create
    from sessions_app.services.sessions import session_create

    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    key = apikey_create(tenant_name=TENANT, name="bench").plain_key
    tenant = Tenant.objects.get(name=TENANT)
    cleanup(tenant)
    results: dict = {
        "config": {k: v for k, v in vars(args).items() if k != "name"},
        "database": benchlib.database_description(),
        "server": benchlib.server_version(),
        "machine": benchlib.machine(),
    }
    if args.profile_only:
        results["profile"] = profile_calls(tenant, key, args)
        if not args.keep:
            cleanup(tenant)
        print(f"\nWritten: {benchlib.write_results(args.name + '-profile', results)}")
        return 0

    prep = time.perf_counter()
    plans = make_plans(args)
    turns = [t for plan in plans for t in plan]
    described = {
        "system_prompt_bytes": round(sum(len(t["system_prompt"].encode()) for t in turns) / len(turns)),
        "final_content_bytes": round(sum(len(t["complete_data"]["content"].encode()) for t in turns) / len(turns)),
        "with_tool_calls": f"{sum(1 for t in turns if 'tool_calls' in t['complete_data']) / len(turns):.0%}",
        "with_thinking": f"{sum(1 for t in turns if 'thinking' in t['complete_data']) / len(turns):.0%}",
        "request_bytes_per_turn": round(
            sum(len(t["system_ready"]) + sum(map(len, t["checkpoints"])) + len(t["complete"]) for t in turns)
            / len(turns)
        ),
    }

    def new_sessions(label: str):
        return [
            session_create(tenant=tenant, name=f"bench turns {label} {s}", tool="chat", user_id=f"user{s}")
            for s in range(args.sessions)
        ]

    api_sessions, sql_sessions, warm_sessions = new_sessions("api"), new_sessions("sql"), new_sessions("warm")
    sql_conversations = [
        Conversation.objects.create(
            tenant=tenant, session=s, ordinal=1, started_at=datetime.now(UTC), last_message_at=datetime.now(UTC)
        )
        for s in sql_sessions
    ]
    Session.objects.filter(pk__in=[s.pk for s in sql_sessions]).update(conversations=1)
    share = "one per client" if args.sessions == args.clients else f"{args.sessions} shared round-robin"
    print(
        f"  prepared in {time.perf_counter() - prep:.1f}s: {args.clients} clients, sessions {share}; "
        f"per turn on average {described}"
    )

    worker_args = ["--worker-class", "gthread", "--threads", str(args.threads)] if args.threads > 1 else []
    server = f"{args.workers} sync workers" if args.threads <= 1 else f"{args.workers} gthread workers × {args.threads}"
    gunicorn = benchlib.Gunicorn(
        workers=args.workers,
        log_path=benchlib.RESULTS_DIR / f"{args.name}-gunicorn.log",
        extra_args=worker_args,
        # The embedded backend finds its socket on a process's first connection, which threads can race:
        # give the server the socket directly (the same database; the stock PostgreSQL backend).
        extra_env={"DATABASE_URL": os.environ.get("DATABASE_URL") or benchlib.database_url()},
    )
    api, sql = Side("API"), Side("raw SQL")
    budget = Budget(args.duration, None if args.turns is None else max(1, args.turns // args.clients))
    think = args.think_ms / 1000
    try:
        gunicorn.start()
        pid = gunicorn.process.pid
        print(f"gunicorn aceproject.wsgi on 127.0.0.1:{gunicorn.port}, {server}")

        def api_args(sessions, tag):
            return [
                (gunicorn.port, key, sessions[c % args.sessions].pk, plans[c], budget, think, f"{tag}{c}")
                for c in range(args.clients)
            ]

        def sql_args(tag):
            return [
                (tenant.pk, sql_sessions[c % args.sessions].pk, sql_conversations[c % args.sessions].pk, plans[c])
                + (budget, think, f"{tag}{c}")
                for c in range(args.clients)
            ]

        # Warm-up, not counted: every worker imports and connects; 2 turns per client on each side.
        warm = Side("warm-up")
        saved, budget.turns = budget.turns, 2
        run_threads(warm, api_client, api_args(warm_sessions, "warm"), pid)
        run_threads(warm, sql_client, sql_args("warmsql"), pid)
        budget.turns = saved
        if warm.errors:
            raise RuntimeError(f"warm-up failed: {warm.errors[0]}")

        for r in range(max(1, args.rounds)):
            run_threads(sql, sql_client, sql_args(f"r{r}sql"), pid)
            run_threads(api, api_client, api_args(api_sessions, f"r{r}api"), pid)
            print(
                f"  round {r + 1}/{args.rounds}: raw SQL {sql.turns} turns in {sql.seconds:.1f}s, "
                f"API {api.turns} turns in {api.seconds:.1f}s (cumulative)"
            )
            if api.errors or sql.errors:
                break
    finally:
        gunicorn.stop()

    for side in (api, sql):
        if side.errors:
            print(f"{side.name} errors: {side.errors[:3]}")

    # Every API turn is completed, and the sessions' counters agree with them.
    statuses = Counter(
        Turn.objects.filter(session__in=api_sessions).values_list("status", flat=True).order_by().iterator()
    )
    stored = sum(Session.objects.get(pk=s.pk).messages for s in api_sessions)
    ok = statuses.get(TurnStatus.COMPLETED, 0) == api.turns and stored == 2 * api.turns and not api.errors
    check = "ok" if ok else f"MISMATCH (turns {dict(statuses)}, messages {stored}, expected {api.turns} turns)"

    rows = []
    for side in (api, sql):
        for kind in CALLS:
            rows.append(pct_row(f"{side.name} {kind}", side.latencies[kind]))
        rows.append(pct_row(f"{side.name} all calls", side.all_calls()))
    benchlib.print_table(
        ["call", "calls", "p50 ms", "p95 ms", "p99 ms", "max ms"],
        rows,
        title=f"Chat turns: {args.clients} concurrent clients, sessions {share}; API on {server}",
    )
    summary = []
    for side in (api, sql):
        calls = len(side.all_calls())
        cpu = side.cpu
        summary.append(
            [
                side.name,
                side.turns,
                f"{side.seconds:.1f}",
                f"{side.rate:,.1f}",
                f"{calls / side.seconds:,.0f}" if side.seconds else "",
                *(f"{cpu.get(k, 0) / side.seconds:.2f}" if side.seconds else "" for k in ("gunicorn", "postgres")),
                *(
                    f"{cpu.get(k, 0) / side.seconds:.2f}" if side.seconds else ""
                    for k in ("bench clients", "other", "idle")
                ),
            ]
        )
    benchlib.print_table(
        [
            "side",
            "turns",
            "seconds",
            "turns/s",
            "calls/s",
            "CPU gunicorn",
            "CPU postgres",
            "CPU clients",
            "CPU other",
            "idle",
        ],
        summary,
        title="Throughput (CPU columns: cores busy on average, of 2)",
    )
    per_call = []
    for side in (api, sql):
        calls = len(side.all_calls()) or 1
        server_ms = 1000 * side.cpu.get("gunicorn", 0) / calls
        pg_ms = 1000 * side.cpu.get("postgres", 0) / calls
        per_call.append([side.name, f"{server_ms:.1f}", f"{pg_ms:.2f}", f"{2000 / (server_ms + pg_ms):,.0f}"])
        side.cpu_ms_per_call = {"gunicorn": round(server_ms, 2), "postgres": round(pg_ms, 3)}
    benchlib.print_table(
        ["side", "gunicorn CPU ms/call", "postgres CPU ms/call", "calls/s that 2 free cores could serve"],
        per_call,
        title="CPU per call (less sensitive to other load on the machine than the rates)",
    )
    load = os.getloadavg()
    print(f"Load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (other work shows as CPU other)")
    p95 = pct_dict(api.all_calls())["p95_ms"]
    worst = max(pct_dict(api.latencies[k])["p95_ms"] for k in CALLS)
    verdict = "met" if worst < TARGET_P95_MS else "NOT met"
    print(
        f"\nTarget p95 < {TARGET_P95_MS:.0f} ms per call: {verdict} (API p95 over all calls {p95:.1f} ms, "
        f"worst call type {worst:.1f} ms). API / raw SQL turns/s = {api.rate / sql.rate if sql.rate else 0:.1%}. "
        f"Check: {check}"
    )

    results["server_config"] = server
    results["sessions"] = share
    results["data"] = described
    results["results"] = {
        side.name: {
            "turns": side.turns,
            "seconds": round(side.seconds, 3),
            "turns_per_second": round(side.rate, 2),
            "calls_per_second": round(len(side.all_calls()) / side.seconds, 1) if side.seconds else None,
            "latency": {kind: pct_dict(side.latencies[kind]) for kind in CALLS} | {"all": pct_dict(side.all_calls())},
            "cpu_cores_busy": {k: round(v / side.seconds, 3) for k, v in side.cpu.items()} if side.seconds else {},
            "cpu_ms_per_call": side.cpu_ms_per_call,
            "errors": side.errors[:5],
        }
        for side in (api, sql)
    }
    results["target_p95_ms"] = TARGET_P95_MS
    results["target_met"] = worst < TARGET_P95_MS
    results["check"] = check

    if args.do_profile:
        results["profile"] = profile_calls(tenant, key, args)
    if not args.keep:
        cleanup(tenant)
    print(f"\nWritten: {benchlib.write_results(args.name, results)}")
    return 1 if api.errors or sql.errors or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
