#!/usr/bin/env python
"""Memory strategies: `rules` throughput per worker, and the delay from a triggering message to a recallable record.

    .venv/bin/python bench/strategies.py                 # 20 sessions × 1,000 messages, 30 trigger samples
    .venv/bin/python bench/strategies.py --sessions 5 --samples 10

Throughput: sessions of realistic chat (benchlib prose, tool output, and ~8% statements worth remembering:
preferences, identity, budgets, "remember that…", task progress, English and Chinese) are stored with the
strategies' triggers off; then the three built-in strategies (rules extractor) run over every session in this
one process — what one Celery worker process does per run: claim the watermark, read the messages, extract,
consolidate (ADD/UPDATE/INVALIDATE/NOOP through the record services, embeddings inline), commit; one run per
session (the batch limit raised to the session's length).
messages/s = messages read by the profile strategy ÷ its wall-clock seconds (each strategy reads each message).
Baseline in the same run: reading the same messages and calling `extract()` with no database writes.

Trigger → recallable: a real Celery worker (subprocess, `-P solo`, one process) on Redis when it answers at
127.0.0.1:6379 (db 14), else the embedded file-system broker. Each sample posts one preference message through
the API (the profile strategy's score threshold fires) and polls `POST /api/v1/recall/` until a record from that
message is among the results; the delay is post → first recall that returns it.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

STATEMENTS = [
    "I prefer {x} when I travel.",
    "I really like {x}.",
    "I don't like {x} at all.",
    "My budget is {n} dollars for this.",
    "Please remember that my {rel}'s birthday is in {month}.",
    "I live in {city}.",
    "我更喜欢{zh}。",
    "请记住我对{zh_allergy}过敏。",
    "The {thing} setup is done, next step: configure {x}.",
    "进度{n}%，下一步配置{zh}。",
]
FILL = {
    "x": ["window seats", "green tea", "quiet hotels", "spicy food", "early flights", "soft lighting", "jazz"],
    "n": [str(n) for n in range(100, 5000, 37)],
    "rel": ["wife", "son", "daughter", "mother", "boss"],
    "month": ["March", "June", "October", "December"],
    "city": ["Hangzhou", "Berlin", "Austin", "Chengdu", "Lyon"],
    "zh": ["靠窗的座位", "安静的酒店", "柔和的灯光", "绿茶", "早班机"],
    "zh_allergy": ["花生", "海鲜", "芒果"],
    "thing": ["router", "printer", "database", "VPN"],
}


def statement(rng: random.Random) -> str:
    template = rng.choice(STATEMENTS)
    return template.format(**{k: rng.choice(v) for k, v in FILL.items()})


def chat(rng: random.Random, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.08:
            out.append({"role": "user", "content": statement(rng)})
        elif roll < 0.35:
            out.append({"role": "user", "content": benchlib.prose(rng, 40, 300)})
        elif roll < 0.55:
            out.append({"role": "toolResult", "content": benchlib.tool_output(rng)[:1500], "tool_name": "bash"})
        else:
            out.append({"role": "assistant", "content": benchlib.prose(rng, 200, 1200)})
    return out


FIELDS = (("ADD", "added"), ("UPDATE", "updated"), ("INVALIDATE", "invalidated"), ("NOOP", "unchanged"))


def throughput(tenant, sessions: int, per_session: int, seed: int) -> dict:
    from django.conf import settings

    from sessions_app.models import Message, Session
    from sessions_app.services.messages import messages_append
    from strategies_app.extractors.base import ExtractionContext, SourceMessage
    from strategies_app.extractors.registry import get_extractor
    from strategies_app.models import Strategy, Trigger
    from strategies_app.services.runs import run_execute, run_request

    settings.ACE_STRATEGY_BATCH = per_session  # one run reads a whole session (the product default is 500)
    Strategy.objects.filter(tenant=tenant).update(enabled=False)  # no triggers while loading
    rng = random.Random(seed)
    made = []
    print(f"  storing {sessions} × {per_session:,} messages...", flush=True)
    for s in range(sessions):
        session = Session.objects.create(tenant=tenant, user_id=f"bench-user-{s % 5}", name=f"bench {s}", tool="chat")
        items = chat(rng, per_session)
        for start in range(0, len(items), 1000):
            messages_append(tenant=tenant, session_id=session.pk, items=items[start : start + 1000])
        made.append(session)
    Strategy.objects.filter(tenant=tenant).update(enabled=True)
    strategies = list(Strategy.objects.filter(tenant=tenant, builtin=True).order_by("name"))

    # baseline: read + extract only
    rules = get_extractor("rules")
    begin = time.perf_counter()
    read = 0
    for strategy in strategies:
        for session in made:
            rows = Message.objects.filter(session=session).order_by("seq").values("id", "seq", "role", "content")
            messages = [SourceMessage(str(r["id"]), r["seq"], r["role"], r["content"]) for r in rows]
            rules.extract(
                ExtractionContext(
                    strategy_type=strategy.type, prompt="", messages=messages, existing=[], session_id=str(session.pk)
                )
            )
            read += len(messages)
    baseline_seconds = time.perf_counter() - begin

    out = {"messages": sessions * per_session, "baseline_msgs_per_s": round(read / baseline_seconds)}
    totals = {"ADD": 0, "UPDATE": 0, "INVALIDATE": 0, "NOOP": 0}
    begin = time.perf_counter()
    processed = 0
    for strategy in strategies:
        strategy.extractor = "rules"
        Strategy.objects.filter(pk=strategy.pk).update(extractor="rules")
        started = time.perf_counter()
        for session in made:
            run = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
            processed += run.messages_processed
            for key, field in (
                ("ADD", "added"),
                ("UPDATE", "updated"),
                ("INVALIDATE", "invalidated"),
                ("NOOP", "unchanged"),
            ):
                totals[key] += getattr(run, field)
        out[f"{strategy.name}_msgs_per_s"] = round(sessions * per_session / (time.perf_counter() - started))
    seconds = time.perf_counter() - begin
    out.update(
        all_three_msgs_per_s=round(processed / seconds),
        decisions=totals,
        seconds=round(seconds, 2),
    )
    return out


def trigger_to_recallable(tenant, samples: int, seed: int) -> dict:
    import json

    from django.conf import settings
    from django.test import Client

    from sessions_app.models import Session
    from sessions_app.services.apikeys import apikey_create
    from strategies_app.models import Strategy

    Strategy.objects.filter(tenant=tenant).exclude(name="user-profile").update(enabled=False)
    Strategy.objects.filter(tenant=tenant, name="user-profile").update(
        enabled=True, message_threshold=0.6, accumulated_threshold=None, extractor="rules"
    )
    key = apikey_create(tenant_name=tenant.name, name="bench/strategies.py").plain_key
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    env = {**os.environ, "ACE_DATA_DIR": str(settings.ACE_DATA_DIR), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "aceproject", "worker", "-P", "solo", "-l", "WARNING",
         "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=benchlib.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    rng = random.Random(seed)
    delays = []
    try:
        time.sleep(4)  # the worker connects
        for i in range(samples + 2):
            user = f"latency-{seed}-{i}"
            session = Session.objects.create(tenant=tenant, user_id=user, name="latency", tool="chat")
            word = f"{rng.choice(['teal', 'amber', 'violet', 'olive'])} lamp model {rng.randint(100, 999)}"
            start = time.perf_counter()
            response = client.post(
                f"/api/v1/sessions/{session.pk}/messages/",
                data=json.dumps({"role": "user", "content": f"I prefer the {word} for reading."}),
                content_type="application/json",
            )
            assert response.status_code == 201, response.content
            body = json.dumps({"query": word, "user_id": user, "include_messages": False})
            while time.perf_counter() - start < 30:
                found = client.post("/api/v1/recall/", data=body, content_type="application/json").json()["results"]
                if found:
                    break
                time.sleep(0.01)
            else:
                raise RuntimeError("no record became recallable within 30 s; is the worker running?")
            if i >= 2:  # the first two warm the worker
                delays.append(time.perf_counter() - start)
    finally:
        worker.terminate()
        worker.wait(10)
    return benchlib.summary_ms(delays)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--messages", type=int, default=1000, help="per session")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    os.environ.setdefault("ACE_EMBEDDER", "hash")
    if "CELERY_BROKER_URL" not in os.environ:
        try:
            import redis

            redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=0.5).ping()
            os.environ["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/14"
        except Exception:  # noqa: BLE001 - no Redis: the embedded broker
            pass
    benchlib.setup_django()
    from sessions_app.models import Tenant

    tenant = Tenant.objects.create(name=f"bench-strategies-{int(time.time())}")
    from django.conf import settings

    print(f"Strategies on {benchlib.database_description()}; embedder {settings.ACE_EMBEDDER}; "
          f"broker {settings.CELERY_BROKER_URL}")  # fmt: skip
    result = {"throughput": throughput(tenant, args.sessions, args.messages, args.seed)}
    t = result["throughput"]
    benchlib.print_table(
        ["what", "messages/s"],
        [
            ["read + extract only (baseline, no writes)", f"{t['baseline_msgs_per_s']:,}"],
            *[
                [f"run: {k[:-11]}", f"{v:,}"]
                for k, v in t.items()
                if k.endswith("_msgs_per_s") and k != "baseline_msgs_per_s"
            ],
        ],
        title=f"rules throughput, one process, {t['messages']:,} messages; decisions {t['decisions']}",
    )
    result["trigger_to_recallable_ms"] = trigger_to_recallable(tenant, args.samples, args.seed)
    r = result["trigger_to_recallable_ms"]
    print(f"\ntrigger → recallable over {r['runs']} messages: p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms")
    print(f"results: {benchlib.write_results('strategies', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
