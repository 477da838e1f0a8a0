#!/usr/bin/env python
"""p50/p95 of POST /api/v1/recall/ in-process, on users loaded before by bench/locomo.py (tenant bench-locomo).

    .venv/bin/python bench/locomo.py --dataset /work/data/locomo10.json --strategies   # once: load, embed, records
    .venv/bin/python bench/recall_latency.py --dataset /work/data/locomo10.json --questions 800

Each question is asked twice: first with its query embedded by the configured embedder (what a new question
costs), then again with its vector in recall's per-process cache (a repeated question). Run it on a quiet machine:
these are wall-clock figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(benchlib.BENCH_DIR / "data" / "synthetic_locomo.json"))
    parser.add_argument("--questions", type=int, default=400)
    args = parser.parse_args(argv)
    benchlib.setup_django()
    from django.test import Client

    from sessions_app.services.apikeys import apikey_create

    key = apikey_create(tenant_name="bench-locomo", name="bench/recall_latency.py").plain_key
    client = Client()
    samples = json.loads(Path(args.dataset).read_text())
    questions = [
        (str(sample["sample_id"]), str(qa["question"])[:4000])
        for sample in samples
        for qa in sample.get("qa", [])
        if qa.get("evidence") and str(qa.get("question") or "").strip()
    ][: args.questions]

    def ask(user_id: str, question: str) -> float:
        start = time.perf_counter()
        response = client.post(
            "/api/v1/recall/",
            data=json.dumps({"query": question, "user_id": user_id, "top_k": 10}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.content[:300]!r}")
        return (time.perf_counter() - start) * 1000

    for user_id, question in questions[:5]:
        ask(user_id, question + " (warm-up)")
    print(f"recall latency, {len(questions)} questions of {args.dataset}, {benchlib.database_description()}")
    for label in ("query embedded", "query vector cached"):
        times = sorted(ask(user_id, question) for user_id, question in questions)
        print(
            f"  {label:20} p50 {times[len(times) // 2]:6.1f} ms  p95 {times[int(len(times) * 0.95)]:6.1f} ms  "
            f"max {times[-1]:6.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
