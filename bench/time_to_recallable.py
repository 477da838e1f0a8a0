#!/usr/bin/env python
"""Time from "every turn of LoCoMo posted" to "every message recallable" (its vector stored), with the real
deployment: every process of the `Procfile` (web, worker, embedder, beat) as `scripts/up` runs them.

    .venv/bin/python bench/time_to_recallable.py                      # onnx-int8, onnx, then torch (the baseline)
    .venv/bin/python bench/time_to_recallable.py --runtimes onnx
    .venv/bin/python bench/time_to_recallable.py --dataset bench/data/synthetic_locomo.json

For each ACE_EMBEDDER_RUNTIME: the deployment starts on the bench database (ACE_DATA_DIR=.ace/bench unless set;
the model's ONNX export made first, as scripts/up's `ace_embeddings prepare` does), a fresh tenant posts the
dataset through the public API as bench/locomo.py does (one session per LoCoMo session, its turns in one
`POST /api/v1/sessions/{id}/messages/`, one client), then the bench polls the message_embedding rows of that
tenant in the runtime's key until every posted message has one. The clock: posting (first post → last answer),
then posted → all recallable (the figure the issue asks for: at most 2 minutes), and first post → all recallable.
The embedder worker embeds as the messages arrive, so part of the work is done while posting.

The embedding is done by the Procfile's `embedder` process (Celery, queue `embedding`, CELERY_EMBED_CONCURRENCY
pool processes, `nice -n 10`) while the `worker` process runs the memory strategies on the same messages.
The processes' logs are kept in bench/results/time-to-recallable-<runtime>/. Results: a table, and
bench/results/time-to-recallable.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import load  # noqa: E402
import locomo  # noqa: E402

DEFAULT_DATASET = Path("/work/data/locomo10.json")
HEADERS = ["runtime", "messages", "posting s", "posted→recallable s", "first post→recallable s", "msg/s", "x torch"]
HEADERS.append("load")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET if DEFAULT_DATASET.exists() else None)
    parser.add_argument("--runtimes", default="onnx-int8,onnx,torch")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the vectors, per runtime")
    args = parser.parse_args(argv)
    dataset = args.dataset or locomo.DEFAULT_DATASET
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    if "torch" in runtimes:
        benchlib.require_torch_runtime("--runtimes torch")

    benchlib.setup_django()
    from memory_app.embedders import onnx_export
    from memory_app.embedders.local import LocalEmbedder
    from memory_app.models import MessageEmbedding
    from sessions_app.models import Message
    from sessions_app.services.apikeys import apikey_create

    samples = locomo.load_dataset(dataset)
    turns = sum(len(t) for s in samples for _n, t, _d in locomo.sessions_of(s["conversation"]))
    concurrency = os.environ.get("CELERY_EMBED_CONCURRENCY", "1")
    print(
        f"Time to recallable: {turns} turns of {dataset} ({len(samples)} conversations), runtimes {runtimes}, "
        f"embedder concurrency {concurrency}, {os.cpu_count()} CPUs, {benchlib.database_description()}"
    )
    results = {}
    for runtime in runtimes:
        os.environ["ACE_EMBEDDER"] = "local"
        os.environ["ACE_EMBEDDER_RUNTIME"] = runtime
        embedder = LocalEmbedder(runtime=runtime)  # only to know its key (and to export once, outside the clock)
        if runtime != "torch":
            onnx_export.prepared(embedder.path, embedder.cache_dir, name=embedder.model_name)
        name = f"bench-recallable-{runtime}-{datetime.now(UTC):%Y%m%d%H%M%S}"
        key = apikey_create(tenant_name=name, name="bench/time_to_recallable.py").plain_key
        log_dir = benchlib.RESULTS_DIR / f"time-to-recallable-{runtime}"
        log_dir.mkdir(parents=True, exist_ok=True)
        port = benchlib.free_port()
        deployment = load.Deployment(port, log_dir)
        started_deployment = time.monotonic()
        deployment.start()
        ready = time.monotonic() - started_deployment
        try:
            api = locomo.HttpApi(f"http://127.0.0.1:{port}", key)
            loads = [os.getloadavg()[0]]
            first_post = time.monotonic()
            message_ids: list[str] = []
            for sample in samples:
                loaded = locomo.load_sample(api, sample, user_id=str(sample["sample_id"]), dataset_name=dataset.stem)
                message_ids += list(loaded["message_ids"].values())
            posted = time.monotonic()
            embeddable = (
                Message.objects.filter(pk__in=message_ids, role__in=("user", "assistant")).exclude(content="").count()
            )
            done, last_print = 0, posted
            while True:
                done = MessageEmbedding.objects.filter(message_id__in=message_ids, embedding_key=embedder.key).count()
                now = time.monotonic()
                if done >= embeddable or now - posted > args.timeout:
                    break
                if now - last_print >= 15:
                    loads.append(os.getloadavg()[0])
                    print(f"  {runtime}: {done}/{embeddable} recallable, {now - posted:.0f} s after the last post")
                    last_print = now
                time.sleep(0.5)
            recallable = time.monotonic()
        finally:
            deployment.stop()
        result = {
            "key": embedder.key,
            "messages": len(message_ids),
            "embeddable": embeddable,
            "embedded": done,
            "complete": done >= embeddable,
            "deployment_ready_s": round(ready, 1),
            "posting_s": round(posted - first_post, 1),
            "posted_to_recallable_s": round(recallable - posted, 1),
            "first_post_to_recallable_s": round(recallable - first_post, 1),
            "messages_per_s": round(embeddable / (recallable - first_post), 1),
            "load_average": round(sum(loads) / len(loads), 2),
        }
        results[runtime] = result
        print(
            f"  {runtime}: posted in {result['posting_s']} s; all {embeddable} recallable "
            f"{result['posted_to_recallable_s']} s later ({result['first_post_to_recallable_s']} s from the first "
            f"post){'' if result['complete'] else ' — INCOMPLETE, timed out'}"
        )
    baseline = results.get("torch")
    rows = []
    for runtime, r in results.items():
        speedup = (
            f"{baseline['first_post_to_recallable_s'] / r['first_post_to_recallable_s']:.2f}x" if baseline else "-"
        )
        rows.append(
            [
                runtime,
                r["embeddable"],
                r["posting_s"],
                r["posted_to_recallable_s"],
                r["first_post_to_recallable_s"],
                r["messages_per_s"],
                speedup,
                r["load_average"],
            ]
        )
    benchlib.print_table(
        HEADERS,
        rows,
        title="Time to recallable (target: posted → recallable ≤ 120 s)",
    )
    path = benchlib.write_results(
        "time-to-recallable",
        {
            "dataset": str(dataset),
            "turns": turns,
            "embedder_concurrency": concurrency,
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
            "runtimes": results,
        },
    )
    print(f"\nWritten to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
