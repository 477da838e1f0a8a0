#!/usr/bin/env python
"""Throughput and agreement of the local embedder's runtimes on real chat turns (LoCoMo), in one process.

    .venv/bin/python bench/embed_speed.py                          # /work/data/locomo10.json if present
    .venv/bin/python bench/embed_speed.py --dataset bench/data/synthetic_locomo.json --rounds 3
    .venv/bin/python bench/embed_speed.py --threads 1              # as a web process (ACE_EMBEDDER_THREADS=1)

Texts: every turn of the dataset as bench/locomo.py posts it ("<speaker>: <text>" plus the photo caption), in
conversation order; `--texts N` takes the first N. Queries: the dataset's questions that have evidence.

Runtimes (memory_app.embedders.local.LocalEmbedder, the product's code):
- `torch`: sentence-transformers on PyTorch (the baseline: what ACE_EMBEDDER=local ran before);
- `onnx`: ONNX Runtime fp32, batches sorted by length (the default now);
- `onnx-unsorted`: the same in the texts' order (what sorting by length buys);
- `onnx-int8`: the export quantised to int8 (its own embedding key).

Each runtime embeds the texts in calls of `--task` texts (an embedding task: up to ACE_EMBEDDER_BATCH = 128
messages), after a warm-up call. Rounds alternate the runtimes (torch, onnx, ..., torch, onnx, ...) so that
other load on the machine falls on all of them; the figures are the best round and the median of the rounds.
Reported: texts/s, ms per task, the speed-up over torch measured in the same run, load time, and against torch's
vectors: cosine per text (min, 1st percentile, mean), and for the questions, the top-10 turns of their own
conversation by cosine (overlap with torch's top-10, same top-1) and dense evidence recall@10 (the evidence
dia_ids among those top-10 turns: vectors alone, no keyword side, no records; a figure of the vectors, which the
API's ranking then builds on).

The export (ACE_DATA_DIR/models, ACE_DATA_DIR=.ace/bench unless set) is made first if missing, outside the
clock. Results: a table, and bench/results/embed-speed.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import locomo  # noqa: E402

DEFAULT_DATASET = Path("/work/data/locomo10.json")
RUNTIMES = ("torch", "onnx", "onnx-unsorted", "onnx-int8")


def corpus(path: Path):
    """(texts, text conversation index, dia_ids), and questions as (conversation index, question, evidence)."""
    texts, owner, dia = [], [], []
    questions = []
    for index, sample in enumerate(locomo.load_dataset(path)):
        known = set()
        for _number, turns, _date in locomo.sessions_of(sample.get("conversation") or {}):
            for turn in turns:
                texts.append(locomo.turn_text(turn))
                owner.append(index)
                dia.append(str(turn.get("dia_id")))
                known.add(str(turn.get("dia_id")))
        for qa in sample.get("qa") or []:
            evidence = [e for e in locomo.evidence_ids(qa.get("evidence")) if e in known]
            if evidence and str(qa.get("question") or "").strip():
                questions.append((index, str(qa["question"]), evidence))
    return texts, owner, dia, questions


def make_embedder(runtime: str, threads: int):
    from memory_app.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(runtime="onnx" if runtime == "onnx-unsorted" else runtime, threads=threads)
    embedder.sort_by_length = runtime != "onnx-unsorted"
    return embedder


def embed_all(embedder, texts: list[str], task: int):
    import numpy as np

    started = time.perf_counter()
    vectors = []
    for start in range(0, len(texts), task):
        vectors.extend(embedder.embed(texts[start : start + task]))
    return time.perf_counter() - started, np.asarray(vectors, dtype=np.float64)


def top10(query_vectors, text_vectors, owner, questions):
    import numpy as np

    owner = np.asarray(owner)
    out = []
    for vector, (conversation, _q, _e) in zip(query_vectors, questions, strict=True):
        candidates = np.flatnonzero(owner == conversation)
        scores = text_vectors[candidates] @ vector
        out.append(candidates[np.argsort(-scores, kind="stable")[:10]].tolist())
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET if DEFAULT_DATASET.exists() else None)
    parser.add_argument("--texts", type=int, default=0, help="the first N turns only (0: all)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--task", type=int, default=128, help="texts per embed() call (an embedding task)")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: the runtime's default)")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    args = parser.parse_args(argv)
    if args.dataset is None:
        args.dataset = locomo.DEFAULT_DATASET
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    if "torch" not in runtimes:
        runtimes.insert(0, "torch")  # the baseline of the figures
    benchlib.require_torch_runtime("bench/embed_speed.py (torch is the baseline of its figures)")

    benchlib.setup_django(migrate=False)
    import numpy as np

    texts, owner, dia, questions = corpus(args.dataset)
    if args.texts:
        texts, owner, dia = texts[: args.texts], owner[: args.texts], dia[: args.texts]
        present = set(owner)
        questions = [q for q in questions if q[0] in present]
    print(
        f"Embedding speed on {len(texts)} turns of {args.dataset} ({len(questions)} questions), "
        f"{args.rounds} rounds, calls of {args.task} texts, threads {args.threads or 'default'}, "
        f"{os.cpu_count()} CPUs, load average before: {os.getloadavg()[0]:.2f}"
    )

    embedders, load_seconds = {}, {}
    for runtime in runtimes:
        embedder = make_embedder(runtime, args.threads)
        if runtime != "torch":  # the export, once, outside every clock
            from memory_app.embedders import onnx_export

            onnx_export.prepared(embedder.path, embedder.cache_dir, name=embedder.model_name)
        load_seconds[runtime] = embedder.load()
        embedder.embed(texts[: args.task])  # warm-up
        embedders[runtime] = embedder

    seconds: dict[str, list[float]] = {r: [] for r in runtimes}
    vectors: dict[str, np.ndarray] = {}
    loads = []
    for _round in range(args.rounds):
        for runtime in runtimes:
            took, got = embed_all(embedders[runtime], texts, args.task)
            seconds[runtime].append(took)
            vectors[runtime] = got
            loads.append(os.getloadavg()[0])
            print(f"  round {_round + 1} {runtime:14} {len(texts) / took:7.1f} texts/s", flush=True)

    query_vectors = {r: np.asarray(embedders[r].embed([q for _c, q, _e in questions])) for r in runtimes}
    tops = {r: top10(query_vectors[r], vectors[r], owner, questions) for r in runtimes}
    batches = -(-len(texts) // args.task)
    rows, results = [], {}
    torch_best = min(seconds["torch"])
    torch_median = statistics.median(seconds["torch"])
    for runtime in runtimes:
        best, median = min(seconds[runtime]), statistics.median(seconds[runtime])
        cosines = (vectors[runtime] * vectors["torch"]).sum(axis=1)
        overlap = [len(set(a) & set(b)) / 10 for a, b in zip(tops[runtime], tops["torch"], strict=True)]
        same_top1 = [a[:1] == b[:1] for a, b in zip(tops[runtime], tops["torch"], strict=True)]
        recall = [
            sum(1 for e in evidence if e in {dia[i] for i in top}) / len(evidence)
            for top, (_c, _q, evidence) in zip(tops[runtime], questions, strict=True)
        ]
        result = {
            "key": embedders[runtime].key,
            "texts_per_s_best": round(len(texts) / best, 1),
            "texts_per_s_median": round(len(texts) / median, 1),
            "ms_per_task_best": round(best * 1000 / batches, 1),
            "speedup_best": round(torch_best / best, 2),
            "speedup_median": round(torch_median / median, 2),
            "load_seconds": round(load_seconds[runtime], 2),
            "cosine_min": round(float(cosines.min()), 6),
            "cosine_p1": round(float(np.percentile(cosines, 1)), 6),
            "cosine_mean": round(float(cosines.mean()), 6),
            "top10_overlap": round(statistics.fmean(overlap), 4),
            "same_top1": round(statistics.fmean(same_top1), 4),
            "dense_recall@10": round(statistics.fmean(recall), 4),
        }
        results[runtime] = result
        rows.append(
            [
                runtime,
                result["texts_per_s_best"],
                result["texts_per_s_median"],
                result["ms_per_task_best"],
                f"{result['speedup_best']}x",
                f"{result['speedup_median']}x",
                result["load_seconds"],
                f"{result['cosine_min']:.6f}",
                f"{result['cosine_mean']:.6f}",
                f"{result['top10_overlap']:.3f}",
                f"{result['same_top1']:.3f}",
                f"{result['dense_recall@10']:.4f}",
            ]
        )
    benchlib.print_table(
        [
            "runtime",
            "texts/s best",
            "median",
            f"ms/{args.task}",
            "x torch",
            "x median",
            "load s",
            "cos min",
            "cos mean",
            "top10 ovl",
            "top1 same",
            "dense R@10",
        ],
        rows,
        title=f"{len(texts)} LoCoMo turns; vectors compared with torch's; load average during: "
        f"{statistics.fmean(loads):.2f}",
    )
    path = benchlib.write_results(
        "embed-speed",
        {
            "dataset": str(args.dataset),
            "texts": len(texts),
            "questions": len(questions),
            "rounds": args.rounds,
            "task": args.task,
            "threads": args.threads,
            "load_average_during": round(statistics.fmean(loads), 2),
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
            "runtimes": results,
        },
    )
    print(f"\nWritten to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
