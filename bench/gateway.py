#!/usr/bin/env python
"""The LLM gateway in the call path: streams direct to a stand-in upstream against the same streams through the
gateway, in the same run.

    .venv/bin/python bench/gateway.py                       # both kinds, 100 sequential pairs, 200 concurrent
    .venv/bin/python bench/gateway.py --kinds openai --calls 50 --concurrency 100
    .venv/bin/python bench/gateway.py --direct-only         # the stand-in alone (no gateway process)

Processes, all on loopback:
- the stand-in upstream (tests/support/stand_in_upstream.py) in its own process, every answer `--chunks` text
  pieces `--chunk-ms` apart, the first at once (first_ms=0: the delay measured is ours, not a model's);
- the gateway: `uvicorn aceproject.asgi:application --loop uvloop --http httptools --no-access-log`, one process,
  on the bench database (ACE_DATA_DIR=.ace/bench unless set, migrated first), ACE_OUTBOUND_ALLOW=127.0.0.1;
- this process: a tenant `bench-gateway` with an API key and one provider per kind pointing at the stand-in, and
  the clients (httpx2, the SDKs' HTTP client, on uvloop), reading every stream to its end.

For each kind (OpenAI chat completions, Anthropic messages), streamed calls, no `stream_options` from the client:
1. warm-up, 5 calls per side, not counted;
2. `--calls` sequential pairs, direct then through the gateway (interleaved, so the machine's load falls on both):
   time to first token (the first byte of the first text delta, "Stand-in", found in the raw bytes as they come)
   and to the end of the stream; p50/p95/p99 per side, the gateway's added latency;
3. `--concurrency` streams at once, direct, then through the gateway: errors (status, an answer that is not the
   stand-in's text, a stream without its end), wall time, time to first token under that load;
4. after the gateway's burst, a wait (up to `--settle` s) until every call's turn is in the database, completed:
   turns stored vs calls made; each assistant message checked (the text, input and output tokens as the upstream
   reported them); and the gateway process's CPU (utime + stime from /proc, its threads and any children) per
   relayed call, over the calls and their recording, with the stand-in's and PostgreSQL's beside it.
Also checked at the stand-in: every gateway call reached it with the provider's key (never the client's) and, for
OpenAI, `stream_options.include_usage`.

Each concurrent client is its own session (`X-ACE-Session`), as 200 agents would be; the sequential calls share one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

sys.path.insert(0, str(benchlib.PROJECT_DIR))
from tests.support.stand_in_upstream import answer_text, prompt_words  # noqa: E402

TENANT = "bench-gateway"
UPSTREAM_KEY = "sk-bench-upstream-provider-key"
TARGET_ADDED_TTFT_P95_MS = 10.0
TICK = os.sysconf("SC_CLK_TCK")
FIRST_TOKEN = {"openai": b'"content":"Stand-in"', "anthropic": b'"text":"Stand-in"'}
MODEL = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100, help="sequential pairs (direct + gateway) per kind")
    parser.add_argument("--concurrency", type=int, default=200, help="streams at once per side and kind")
    parser.add_argument("--chunks", type=int, default=20, help="text pieces of every answer (default 20)")
    parser.add_argument("--chunk-ms", type=float, default=10.0, help="ms between pieces (default 10)")
    parser.add_argument("--kinds", default="openai,anthropic", help="openai, anthropic or both (default both)")
    parser.add_argument("--settle", type=float, default=120.0, help="s to wait for the turns to be stored")
    parser.add_argument("--direct-only", action="store_true", help="no gateway: the stand-in and the client alone")
    parser.add_argument(
        "--gateway-app",
        default="aceproject.asgi:application",
        help="the ASGI app uvicorn serves (another one, e.g. with a part stubbed out, to find where time goes)",
    )
    parser.add_argument("--keep", action="store_true", help="keep earlier runs' rows (default: delete them first)")
    parser.add_argument("--name", default="gateway", help="results file name (default gateway)")
    return parser.parse_args()


# -- processes ---------------------------------------------------------------------------------------------
class Process:
    """A server of ours on a free loopback port, ready when `ready_path` answers (any status)."""

    def __init__(self, name: str, command: list[str], port: int, env: dict, ready_path: str):
        self.name, self.command, self.port, self.env, self.ready_path = name, command, port, env, ready_path
        self.log_path = benchlib.RESULTS_DIR / f"gateway-bench-{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> None:
        import http.client

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            self.command, cwd=benchlib.PROJECT_DIR, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log_path}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", self.ready_path)
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def main_thread_ticks(pid: int) -> int:
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def postmaster_pid() -> int | None:
    """The bench's PostgreSQL server (its CPU is its postmaster's and its backends')."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('data_directory')")
        data_directory = cursor.fetchone()[0]
    try:
        return int(Path(data_directory, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    def __init__(self, pids: dict[str, int]):
        self.pids = {**pids, "bench client": os.getpid()}
        postmaster = postmaster_pid()
        if postmaster:
            self.pids["postgres"] = postmaster

    def snapshot(self) -> dict[str, int]:
        ticks = {name: benchlib.process_ticks(pid) for name, pid in self.pids.items()}
        if "gateway" in self.pids:  # its main thread runs the event loop (the relay); the others, database jobs
            ticks["gateway loop"] = main_thread_ticks(self.pids["gateway"])
            ticks["gateway db threads"] = ticks["gateway"] - ticks["gateway loop"]
        return ticks

    @staticmethod
    def ms_per_call(before: dict, after: dict, calls: int) -> dict[str, float]:
        return {name: round((after[name] - before[name]) / TICK * 1000 / max(1, calls), 2) for name in after}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- the calls ------------------------------------------------------------------------------------------------
@dataclass
class Call:
    ok: bool = False
    error: str = ""
    ttft: float | None = None  # seconds to the first text delta's first byte
    total: float | None = None


@dataclass
class Side:
    name: str
    calls: list[Call] = field(default_factory=list)

    def ttfts(self) -> list[float]:
        return [c.ttft for c in self.calls if c.ok and c.ttft is not None]

    def totals(self) -> list[float]:
        return [c.total for c in self.calls if c.ok and c.total is not None]

    def errors(self) -> Counter:
        return Counter(c.error for c in self.calls if not c.ok)


def request_body(kind: str, question: str) -> dict:
    messages = [{"role": "user", "content": question}]
    if kind == "openai":
        return {"model": MODEL[kind], "messages": messages, "stream": True, "temperature": 0.2}
    return {"model": MODEL[kind], "max_tokens": 1024, "messages": messages, "stream": True}


def stream_text(kind: str, raw: bytes) -> tuple[str, bool]:
    """The text of an SSE answer, and whether it came to its end ([DONE], message_stop)."""
    text, ended = [], False
    for line in raw.split(b"\n"):
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            ended = True
            continue
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if kind == "openai":
            for choice in event.get("choices") or []:
                text.append((choice.get("delta") or {}).get("content") or "")
        elif event.get("type") == "content_block_delta" and event["delta"].get("type") == "text_delta":
            text.append(event["delta"]["text"])
        elif event.get("type") == "message_stop":
            ended = True
    return "".join(text), ended


async def one_call(client, url: str, kind: str, body: bytes, headers: dict, expected: str) -> Call:
    call = Call()
    marker = FIRST_TOKEN[kind]
    started = time.perf_counter()
    try:
        async with client.stream("POST", url, content=body, headers=headers) as response:
            parts, tail = [], b""
            async for chunk in response.aiter_raw():
                if call.ttft is None and marker in tail + chunk:
                    call.ttft = time.perf_counter() - started
                tail = chunk[-len(marker) :]
                parts.append(chunk)
            call.total = time.perf_counter() - started
            raw = b"".join(parts)
        if response.status_code != 200:
            call.error = f"status {response.status_code}: {raw[:200].decode(errors='replace')}"
            return call
        text, ended = stream_text(kind, raw)
        if not ended:
            call.error = "the stream did not come to its end"
        elif text != expected:
            call.error = "not the upstream's text"
        else:
            call.ok = True
    except Exception as error:  # noqa: BLE001 - every failure is counted, by its kind
        call.error = f"{error.__class__.__name__}: {error}"[:200]
    return call


@dataclass
class Target:
    """Where a side's calls go: the URL and the headers (auth, the session)."""

    url: str
    headers: dict

    def for_session(self, session: str | None) -> dict:
        return {**self.headers, "x-ace-session": session} if session else self.headers


# -- the bench's database rows ----------------------------------------------------------------------------
def cleanup(tenant) -> None:
    """Delete what earlier runs wrote for the bench tenant (its providers and key stay)."""
    from django.db import connection, transaction

    statements = [
        "UPDATE sessions_app_session SET current_conversation_id = NULL WHERE tenant_id = %s",
        "DELETE FROM sessions_app_turn WHERE tenant_id = %s",
        "DELETE FROM sessions_app_message WHERE tenant_id = %s",
        "DELETE FROM sessions_app_llmrequest WHERE tenant_id = %s",
        "DELETE FROM sessions_app_conversation WHERE tenant_id = %s",
        "DELETE FROM sessions_app_usagehourly WHERE tenant_id = %s",
        "DELETE FROM sessions_app_sessionmodelusage WHERE session_id IN "
        "(SELECT id FROM sessions_app_session WHERE tenant_id = %s)",
        "DELETE FROM sessions_app_stateversion WHERE tenant_id = %s",
        "DELETE FROM memory_app_sessionembeddingprogress WHERE session_id IN "
        "(SELECT id FROM sessions_app_session WHERE tenant_id = %s)",
        "DELETE FROM strategies_app_watermark WHERE session_id IN "
        "(SELECT id FROM sessions_app_session WHERE tenant_id = %s)",
        "DELETE FROM sessions_app_session WHERE tenant_id = %s",
    ]
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql, [tenant.pk])
    except Exception as error:  # noqa: BLE001
        print(f"  (could not delete earlier bench rows: {error}; they stay, results are unaffected)")


def turns_stored(tenant, prefix: str, calls: int, expected: str, input_tokens: int, output_tokens: int) -> dict:
    """The turns of the sessions named `prefix…`: how many, by status, and how many hold the answer as relayed."""
    from django.db.models import Count, Q

    from sessions_app.models import Turn

    turns = Turn.objects.filter(tenant=tenant, session__agent_session_id__startswith=prefix)
    by_status = dict(turns.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    faithful = turns.filter(
        Q(status="completed"),
        assistant_message__content=expected,
        assistant_message__output_tokens=output_tokens,
        assistant_message__input_tokens=input_tokens,
    ).count()
    return {"calls": calls, "stored": sum(by_status.values()), "by_status": by_status, "faithful": faithful}


async def wait_stored(tenant, prefix, calls, expected, input_tokens, output_tokens, settle) -> tuple[dict, float]:
    from asgiref.sync import sync_to_async

    started = time.monotonic()
    while True:
        stored = await sync_to_async(turns_stored)(tenant, prefix, calls, expected, input_tokens, output_tokens)
        done = stored["by_status"].get("completed", 0) + stored["by_status"].get("failed", 0)
        if done >= calls or time.monotonic() - started > settle:
            return stored, time.monotonic() - started
        await asyncio.sleep(0.25)


# -- the run --------------------------------------------------------------------------------------------------
def pct(seconds: list[float], p: float) -> float:
    return round(benchlib.percentile([s * 1000 for s in seconds], p), 2) if seconds else float("nan")


async def run_kind(kind: str, args, direct: Target, gateway: Target | None, tenant, meter: CpuMeter | None) -> dict:
    import httpx2

    expected = answer_text(args.chunks)
    question = benchlib.prose(__import__("random").Random(7), 400, 800)
    body = request_body(kind, question)
    encoded = json.dumps(body, ensure_ascii=False).encode()
    input_tokens = prompt_words(body)
    run = uuid.uuid4().hex[:8]
    limits = httpx2.Limits(max_connections=args.concurrency + 20, max_keepalive_connections=args.concurrency + 20)
    timeout = httpx2.Timeout(120)
    result: dict = {"kind": kind, "input_tokens": input_tokens, "output_tokens": args.chunks}
    async with (
        httpx2.AsyncClient(limits=limits, timeout=timeout, trust_env=False) as direct_client,
        httpx2.AsyncClient(limits=limits, timeout=timeout, trust_env=False) as gateway_client,
    ):

        async def call(side: str, session: str | None) -> Call:
            if side == "direct":
                return await one_call(direct_client, direct.url, kind, encoded, direct.headers, expected)
            return await one_call(gateway_client, gateway.url, kind, encoded, gateway.for_session(session), expected)

        sides = ["direct"] + (["gateway"] if gateway else [])
        # 1. warm-up
        for side in sides:
            for _ in range(5):
                await call(side, f"bench-{run}-warm")
        # 2. sequential pairs
        sequential = {side: Side(side) for side in sides}
        seq_session = f"bench-{run}-{kind}-seq"
        before = meter.snapshot() if meter else None
        for _ in range(args.calls):
            for side in sides:
                sequential[side].calls.append(await call(side, seq_session))
        if gateway:
            stored, waited = await wait_stored(
                tenant, seq_session, args.calls, expected, input_tokens, args.chunks, args.settle
            )
            result["sequential_turns"] = {**stored, "settle_s": round(waited, 2)}
            result["sequential_cpu_ms_per_call"] = meter.ms_per_call(before, meter.snapshot(), args.calls)
        result["sequential"] = {
            side: {
                "calls": len(s.calls),
                "errors": dict(s.errors()),
                "ttft_p50_ms": pct(s.ttfts(), 50),
                "ttft_p95_ms": pct(s.ttfts(), 95),
                "ttft_p99_ms": pct(s.ttfts(), 99),
                "total_p50_ms": pct(s.totals(), 50),
                "total_p95_ms": pct(s.totals(), 95),
            }
            for side, s in sequential.items()
        }
        if gateway:
            pairs = [
                g.ttft - d.ttft
                for d, g in zip(sequential["direct"].calls, sequential["gateway"].calls, strict=True)
                if d.ttft is not None and g.ttft is not None
            ]
            result["sequential"]["added_ttft_per_pair"] = {
                "p50_ms": pct(pairs, 50),
                "p95_ms": pct(pairs, 95),
                "p99_ms": pct(pairs, 99),
            }
        # 3. concurrent bursts
        concurrent = {}
        for side in sides:
            prefix = f"bench-{run}-{kind}-burst-"
            before = meter.snapshot() if meter else None
            load_before = load_average()
            started = time.perf_counter()
            calls = await asyncio.gather(*(call(side, f"{prefix}{i:04d}") for i in range(args.concurrency)))
            wall = time.perf_counter() - started
            s = Side(side, list(calls))
            entry = {
                "streams": args.concurrency,
                "errors": sum(1 for c in calls if not c.ok),
                "error_kinds": dict(s.errors().most_common(5)),
                "wall_s": round(wall, 2),
                "ttft_p50_ms": pct(s.ttfts(), 50),
                "ttft_p95_ms": pct(s.ttfts(), 95),
                "total_p95_ms": pct(s.totals(), 95),
                "load_before": load_before,
            }
            if meter:
                streamed = meter.snapshot()
                entry["cpu_ms_per_call"] = meter.ms_per_call(before, streamed, args.concurrency)
            if side == "gateway":
                stored, waited = await wait_stored(
                    tenant, prefix, args.concurrency, expected, input_tokens, args.chunks, args.settle
                )
                entry["turns"] = {**stored, "settle_s": round(waited, 2)}
                # the recording's tail: what the gateway and PostgreSQL still did after the last stream ended
                entry["cpu_ms_per_call_after_streams"] = meter.ms_per_call(streamed, meter.snapshot(), args.concurrency)
            concurrent[side] = entry
        result["concurrent"] = concurrent
    return result


def check_upstream(stand_in_url: str, kind: str, client_key: str) -> dict:
    """What the gateway's calls looked like at the upstream: the key it got, include_usage asked for."""
    import httpx2

    received = httpx2.get(f"{stand_in_url}/_stand_in/received", timeout=60).json()
    path = "/v1/chat/completions" if kind == "openai" else "/v1/messages"
    mine = [r for r in received if r["path"] == path]
    gateway_calls = [r for r in mine if r["headers"].get("x-bench-side") == "gateway"]
    provider_key = sum(
        1
        for r in gateway_calls
        if r["headers"].get("authorization") == f"Bearer {UPSTREAM_KEY}"
        or r["headers"].get("x-api-key") == UPSTREAM_KEY
    )
    leaked = sum(1 for r in gateway_calls if client_key in json.dumps(r["headers"]))
    include_usage = sum(
        1 for r in gateway_calls if ((r["json"] or {}).get("stream_options") or {}).get("include_usage")
    )
    return {
        "gateway_calls_seen": len(gateway_calls),
        "with_provider_key": provider_key,
        "with_client_key": leaked,
        "with_include_usage": include_usage if kind == "openai" else None,
    }


def main() -> int:
    args = parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    benchlib.setup_django()
    from gateway_app.models import Provider
    from sessions_app.models import Tenant
    from sessions_app.services.apikeys import apikey_create

    print(f"Database: {benchlib.database_description()} — {benchlib.server_version()}")
    key = apikey_create(tenant_name=TENANT, name="bench").plain_key
    tenant = Tenant.objects.get(name=TENANT)
    if not args.keep:
        cleanup(tenant)

    python = sys.executable
    stand_in_port = benchlib.free_port()
    stand_in = Process(
        "stand-in",
        [
            python,
            "-m",
            "tests.support.stand_in_upstream",
            "--port",
            str(stand_in_port),
            "--api-key",
            UPSTREAM_KEY,
            "--defaults",
            f"chunks={args.chunks};chunk_ms={args.chunk_ms}",
            "--max-kept",
            "100000",
        ],
        stand_in_port,
        {**os.environ, "PYTHONUNBUFFERED": "1"},
        "/_stand_in/received?last=1",
    )
    stand_in_url = f"http://127.0.0.1:{stand_in_port}"
    for kind in kinds:
        Provider.objects.filter(tenant=tenant, name=f"bench-{kind}").delete()
        provider = Provider(
            tenant=tenant,
            name=f"bench-{kind}",
            kind=kind,
            base_url=f"{stand_in_url}/v1" if kind == "openai" else stand_in_url,
        )
        provider.api_key = UPSTREAM_KEY
        provider.save()

    gateway_port = benchlib.free_port()
    gateway = Process(
        "gateway",
        [
            str(Path(python).with_name("uvicorn")),
            args.gateway_app,
            "--host",
            "127.0.0.1",
            "--port",
            str(gateway_port),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        gateway_port,
        {
            **os.environ,
            "DEBUG": "false",
            "PYTHONUNBUFFERED": "1",
            "ACE_OUTBOUND_ALLOW": "127.0.0.1",
            # The embedded backend learns its socket on a process's first connection; give it the socket directly.
            "DATABASE_URL": os.environ.get("DATABASE_URL") or benchlib.database_url(),
        },
        "/healthz",
    )
    results: dict = {
        "config": vars(args),
        "database": benchlib.database_description(),
        "server": benchlib.server_version(),
        "machine": benchlib.machine(),
        "load_at_start": load_average(),
        "kinds": {},
    }
    try:
        stand_in.start()
        print(f"stand-in upstream on {stand_in_url} (pid {stand_in.process.pid})")
        pids = {"stand-in": stand_in.process.pid}
        if not args.direct_only:
            gateway.start()
            pids["gateway"] = gateway.process.pid
            print(
                f"gateway: uvicorn aceproject.asgi:application on 127.0.0.1:{gateway_port} (pid {gateway.process.pid})"
            )
        meter = CpuMeter(pids)
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:  # pragma: no cover
            runner = asyncio.run
        for kind in kinds:
            direct_path = "/v1/chat/completions" if kind == "openai" else "/v1/messages"
            headers = {"content-type": "application/json", "x-bench-side": "direct"}
            if kind == "openai":
                headers["authorization"] = f"Bearer {UPSTREAM_KEY}"
            else:
                headers.update({"x-api-key": UPSTREAM_KEY, "anthropic-version": "2023-06-01"})
            direct = Target(f"{stand_in_url}{direct_path}", headers)
            through = None
            if not args.direct_only:
                gateway_headers = {**headers, "x-bench-side": "gateway"}
                gateway_headers.pop("x-api-key", None)
                gateway_headers["authorization"] = f"Bearer {key}"
                suffix = "v1/chat/completions" if kind == "openai" else "v1/messages"
                through = Target(f"http://127.0.0.1:{gateway_port}/gateway/bench-{kind}/{suffix}", gateway_headers)
            print(
                f"\n{kind}: {args.calls} sequential pairs, then {args.concurrency} streams at once per side "
                f"({args.chunks} pieces {args.chunk_ms:g} ms apart); load {load_average()}"
            )
            result = runner(run_kind(kind, args, direct, through, tenant, meter))
            if through:
                result["upstream_saw"] = check_upstream(stand_in_url, kind, key)
            results["kinds"][kind] = result
            report(kind, result, args)
    finally:
        gateway.stop()
        stand_in.stop()
    results["load_at_end"] = load_average()
    print(f"\nload average at start {results['load_at_start']}, at end {results['load_at_end']}")
    print(f"Written: {benchlib.write_results(args.name, results)}")
    return 0


def report(kind: str, result: dict, args) -> None:
    seq, conc = result["sequential"], result["concurrent"]
    gateway = "gateway" in seq
    headers = ["measure", "direct", "gateway", "added"] if gateway else ["measure", "direct"]

    def row(name, key, source):
        d = source["direct"].get(key)
        if not gateway:
            return [name, d]
        g = source["gateway"].get(key)
        added = round(g - d, 2) if isinstance(g, (int, float)) and isinstance(d, (int, float)) else ""
        return [name, d, g, added]

    rows = [
        row("TTFT p50 ms, sequential", "ttft_p50_ms", seq),
        row("TTFT p95 ms, sequential", "ttft_p95_ms", seq),
        row("TTFT p99 ms, sequential", "ttft_p99_ms", seq),
        row("stream total p50 ms", "total_p50_ms", seq),
        row("stream total p95 ms", "total_p95_ms", seq),
        row("errors, sequential", "calls", seq)[:1]
        + [sum(seq[s]["errors"].values()) for s in seq if s != "added_ttft_per_pair"],
        row(f"{args.concurrency} at once: errors", "errors", conc),
        row(f"{args.concurrency} at once: wall s", "wall_s", conc),
        row(f"{args.concurrency} at once: TTFT p50 ms", "ttft_p50_ms", conc),
        row(f"{args.concurrency} at once: TTFT p95 ms", "ttft_p95_ms", conc),
        row(f"{args.concurrency} at once: total p95 ms", "total_p95_ms", conc),
    ]
    if gateway:
        rows[5] = rows[5] + [""]
        pair = seq["added_ttft_per_pair"]
        rows.append(
            ["added TTFT per pair p50/p95/p99 ms", "", "", f"{pair['p50_ms']} / {pair['p95_ms']} / {pair['p99_ms']}"]
        )
    benchlib.print_table(headers, rows, title=f"{kind}: direct vs through the gateway")
    if not gateway:
        return
    burst, seq_turns = conc["gateway"], result["sequential_turns"]
    seq_cpu, streams, tail = (
        result["sequential_cpu_ms_per_call"],
        burst["cpu_ms_per_call"],
        burst["cpu_ms_per_call_after_streams"],
    )
    direct_cpu = conc["direct"]["cpu_ms_per_call"]

    def total(name, *parts):
        return round(sum(part.get(name, 0) for part in parts), 2)

    def split(cpu):
        return [cpu.get("gateway"), cpu.get("gateway loop"), cpu.get("gateway db threads"), cpu.get("postgres")]

    whole = {name: total(name, streams, tail) for name in streams}
    cpu_rows = [
        ["sequential, one at a time (until stored)", *split(seq_cpu), "", ""],
        [f"{args.concurrency} at once: streams", *split(streams), streams.get("stand-in"), streams.get("bench client")],
        [f"{args.concurrency} at once: then until stored", *split(tail), "", ""],
        [f"{args.concurrency} at once: whole call", *split(whole), "", ""],
        [
            f"{args.concurrency} at once direct (no gateway)",
            "",
            "",
            "",
            direct_cpu.get("postgres"),
            direct_cpu.get("stand-in"),
            direct_cpu.get("bench client"),
        ],
    ]
    benchlib.print_table(
        ["CPU ms per call", "gateway", "its loop", "its db threads", "postgres", "stand-in", "bench client"], cpu_rows
    )
    turn_rows = [
        [label, t["calls"], t["stored"], t["by_status"].get("completed", 0), t["faithful"], t["settle_s"]]
        for label, t in (("sequential", seq_turns), ("concurrent", burst["turns"]))
    ]
    benchlib.print_table(["turns", "calls", "stored", "completed", "text+tokens as relayed", "settle s"], turn_rows)
    saw = result.get("upstream_saw") or {}
    print(f"  at the upstream: {saw}")
    added = round(seq["gateway"]["ttft_p95_ms"] - seq["direct"]["ttft_p95_ms"], 2)
    met = added < TARGET_ADDED_TTFT_P95_MS
    print(
        f"  target: added TTFT p95 < {TARGET_ADDED_TTFT_P95_MS:g} ms: {added} ms, {'met' if met else 'NOT met'}; "
        f"{args.concurrency} streams with 0 errors: {'met' if burst['errors'] == 0 else 'NOT met'}; "
        f"every turn stored and completed: "
        f"{'met' if burst['turns']['by_status'].get('completed', 0) == args.concurrency else 'NOT met'}"
    )


if __name__ == "__main__":
    sys.exit(main())
