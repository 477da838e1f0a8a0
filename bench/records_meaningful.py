#!/usr/bin/env python
"""Records that mean something on their own: the built-in strategies over real two-person chat (LoCoMo).

    .venv/bin/python bench/records_meaningful.py --label after            # 3 conversations, a 100-record sample
    .venv/bin/python bench/records_meaningful.py --samples 5 --size 100 --label before

A few LoCoMo conversations are loaded through the public API in this process (bench/locomo.py's loader: one
session per LoCoMo session, every turn a message, "<speaker>: <text>" with metadata.speaker), the strategies'
triggers off while loading; then the three built-in strategies (the `rules` extractor) run over every session
through the services a Celery worker runs (run_request + run_execute: extract, consolidate, write records).
Every valid record is collected, a seeded random sample of `--size` is written to
bench/results/records_meaningful-<label>.jsonl with an empty "verdict" for a human reader, who marks each one
"yes" (meaningful alone: names its subject, no pronoun pointing outside it, not small talk, worth remembering)
or "no" with a note. `--score FILE` prints the share of "yes" of a judged file.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TENANT = "bench-records-meaningful"


def score(path: Path) -> dict:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    judged = [r for r in rows if r.get("verdict") in ("yes", "no")]
    yes = sum(r["verdict"] == "yes" for r in judged)
    return {"records": len(rows), "judged": len(judged), "meaningful": yes, "share": round(yes / len(judged), 3)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="/work/data/locomo10.json")
    parser.add_argument("--samples", type=int, default=3, help="how many conversations (from the first)")
    parser.add_argument("--size", type=int, default=100, help="records in the judged sample")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--label", default="after")
    parser.add_argument("--score", default=None, help="a judged jsonl: print its share of meaningful records")
    args = parser.parse_args(argv)
    if args.score:
        print(json.dumps(score(Path(args.score)), indent=2))
        return 0

    import os

    os.environ.setdefault("ACE_EMBEDDER", "hash")
    benchlib.setup_django()
    from django.conf import settings

    settings.ACE_EMBEDDER = os.environ["ACE_EMBEDDER"]
    settings.ACE_STRATEGY_BATCH = 10_000
    from locomo import DjangoApi, load_dataset, load_sample

    from memory_app.models import Record
    from sessions_app.models import Message, Session, Tenant
    from sessions_app.services.apikeys import apikey_create
    from strategies_app.models import Strategy, Trigger
    from strategies_app.services.runs import run_execute, run_request

    created = apikey_create(tenant_name=f"{TENANT}-{args.label}-{random.randrange(10**6)}", name="records_meaningful")
    tenant = Tenant.objects.get(pk=created.api_key.tenant_id)
    Strategy.objects.filter(tenant=tenant).update(enabled=False)  # no triggers while loading
    api = DjangoApi(created.plain_key)
    samples = load_dataset(args.dataset)[: args.samples]
    for sample in samples:
        info = load_sample(api, sample, user_id=str(sample["sample_id"]), dataset_name=Path(args.dataset).name)
        print(f"  loaded {sample['sample_id']}: {info['sessions']} sessions, {len(info['message_ids'])} turns")
    Strategy.objects.filter(tenant=tenant).update(enabled=True, extractor="rules")
    strategies = list(Strategy.objects.filter(tenant=tenant, builtin=True).order_by("name"))
    for session in Session.objects.filter(tenant=tenant).order_by("created_at"):
        for strategy in strategies:
            run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
    records = list(Record.objects.filter(tenant=tenant, valid=True).order_by("created_at"))
    print(f"  {len(records)} valid records from {Message.objects.filter(tenant=tenant).count()} messages")
    rng = random.Random(args.seed)
    sample = rng.sample(records, min(args.size, len(records)))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"records_meaningful-{args.label}.jsonl"
    with path.open("w") as out:
        for record in sample:
            sources = list(record.source_messages.values_list("content", flat=True)[:3])
            row = {
                "user": record.user_id,
                "type": record.type,
                "content": record.content,
                "reason": record.fields.get("slot", ""),
                "sources": sources,
                "verdict": "",
                "note": "",
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            print(f"[{record.type}] {record.content}  <=  {sources[:1]}")
    without_source = sum(1 for r in records if not r.source_messages.exists())
    print(f"\n{len(records)} records, {without_source} without a source message; sample written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
