#!/usr/bin/env python
"""What redaction costs the message ingest, per message, on one core, no database.

    .venv/bin/python bench/redaction.py                    # 5,000 messages, 5 rounds
    .venv/bin/python bench/redaction.py --messages 20000 --secrets 0.2

Corpus: bench/benchlib.py's agent transcript (`MessageStream`, the one bench/ingest.py posts: user prompts,
assistant answers with tool calls, tool results of logs and code; ~2.6 KB of JSON a message), and a share
(--secrets) of messages given a credential somewhere (a key in prose, a Bearer header in a tool result, a
password under a secret key in the tool call's arguments, a connection string).

Measured, best of --rounds, alternating in each round so that the machine's drift falls on all of them:
- redact: `redact_fields` over the fields the message append redacts (`REDACTED_FIELDS`), as
  `sessions_app.services.messages` does for every message;
- baselines measured in the same run: decoding the message from its JSON request body (`orjson.loads`, what
  the API does first with every message) and encoding its JSON fields (`json.dumps` of tool_calls and
  metadata, what the jsonb columns take).
Figures go in bench/README.md; nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]

import orjson  # noqa: E402
from benchlib import MessageStream, machine, print_table, write_results  # noqa: E402

from platform_kit.redaction import REDACTED, redact_fields  # noqa: E402

# The fields `sessions_app.services.messages.REDACTED_FIELDS` names (not imported: that needs Django set up).
FIELDS = ("content", "thinking", "tool_calls", "metadata", "attachments")
SECRETS = [
    lambda m: m.update(content=m.get("content", "") + " my key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    lambda m: m.update(content=m.get("content", "") + "\nAuthorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx"),
    lambda m: m.update(tool_calls=[{"id": "c", "name": "db", "arguments": {"db_pass": "hunter2", "host": "db"}}]),
    lambda m: m.update(content=m.get("content", "") + " postgres://app:s3cr3t@db:5432/app"),
]


def corpus(count: int, share: float, seed: int) -> list[dict]:
    rng = random.Random(seed)
    items = MessageStream(seed=seed, prefix="r", start=datetime.now(UTC)).take(count)
    for item in items:
        if rng.random() < share:
            rng.choice(SECRETS)(item)
    return items


def best_of(rounds: int, runs: dict) -> dict[str, float]:
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--secrets", type=float, default=0.05, help="share of messages given a secret")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    items = corpus(args.messages, args.secrets, args.seed)
    bodies = [orjson.dumps(item) for item in items]
    size = sum(len(body) for body in bodies) / len(bodies)
    redacted = [redact_fields(item, FIELDS) for item in items]
    changed = sum(1 for before, after in zip(items, redacted, strict=True) if after is not before)
    leaked = sum(1 for item in redacted if "hunter2" in json.dumps(item) or "s3cr3t@" in json.dumps(item))
    marked = sum(1 for item in redacted if REDACTED in json.dumps(item))

    best = best_of(
        args.rounds,
        {
            "redact (content, thinking, tool_calls, metadata)": lambda: [redact_fields(i, FIELDS) for i in items],
            "baseline: decode the request body (orjson.loads)": lambda: [orjson.loads(b) for b in bodies],
            "baseline: encode the JSON fields (json.dumps)": lambda: [
                (json.dumps(i.get("tool_calls")), json.dumps(i.get("metadata"))) for i in items
            ],
        },
    )
    rows = [
        [name, f"{seconds / len(items) * 1e6:.1f}", f"{len(items) / seconds:,.0f}"] for name, seconds in best.items()
    ]
    print(f"{len(items):,} messages, {size:,.0f} bytes of JSON each on average; {changed:,} changed by redaction")
    print(f"({marked:,} hold [REDACTED]; {leaked} still hold a planted secret)")
    print_table(["step", "µs/message", "messages/s"], rows, title="redaction, one core, best of rounds")
    path = write_results(
        "redaction",
        {
            "machine": machine(),
            "args": vars(args),
            "bytes_per_message": size,
            "changed": changed,
            "leaked": leaked,
            "us_per_message": {name: seconds / len(items) * 1e6 for name, seconds in best.items()},
        },
    )
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
