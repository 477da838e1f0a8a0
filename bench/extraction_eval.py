#!/usr/bin/env python
"""Precision and recall of the `rules` extractor on an evaluation set of real chat phrasing (English and Chinese).

    .venv/bin/python bench/extraction_eval.py                # both splits, per kind and language
    .venv/bin/python bench/extraction_eval.py --misses       # also list every miss and every false record

The set, bench/data/extraction_eval.jsonl (provenance in bench/README.md): one utterance per line with the
records a reader expects from it — `expect`: [{"kind": "profile"|"fact", "contains": [words]}], where a record
matches when it has that kind and every word appears in its text (or its structured fields) — and `allow`:
records that are fine to make but not required (an activity, a plan). Everything else the extractor makes counts
against precision: a greeting, a question, a third person's preference worded as the speaker's, a hedge.
Two-person chat lines (LoCoMo) carry their speaker, as `metadata.speaker` does through the API.

Each utterance is one message of its own session; the profile and fact strategies' rules run over it. The task
strategy keeps one summary per agent session, so it runs only on the `task` lines (an agent session's turn each:
its summary must hold the goal, progress or blocker named, and a greeting must make none). Figures are given for
the `dev` split (what the rules were improved on) and the `holdout` split (by source: LoCoMo conversations 5–9, the
DuMeM-derived Chinese lines and every third line of the others), so tuning on the set shows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(os.environ.get("ACE_EVAL_TREE") or Path(__file__).resolve().parent.parent)  # another tree: a baseline
sys.path.insert(0, str(ROOT))
DATA = Path(__file__).resolve().parent / "data" / "extraction_eval.jsonl"
KINDS = ("profile", "fact", "task")


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def extract(item: dict) -> list[dict]:
    """The records the rules make of one utterance: [{"kind", "content", "fields"}]."""
    from strategies_app.extractors.base import ExtractionContext, SourceMessage
    from strategies_app.extractors.rules import RulesExtractor

    try:
        message = SourceMessage(id="m1", seq=1, role="user", content=item["text"], speaker=item.get("speaker") or "")
    except TypeError:  # an older tree (the baseline) has no speaker: the "Name: " prefix stays in the text
        message = SourceMessage(id="m1", seq=1, role="user", content=item["text"])
    out = []
    for kind in item.get("strategies") or ("profile", "fact"):
        extraction = RulesExtractor().extract(
            ExtractionContext(strategy_type=kind, prompt="", messages=[message], existing=[], session_id="s1")
        )
        out += [{"kind": c.type, "content": c.content, "fields": c.fields} for c in extraction.candidates]
    return out


def _matches(record: dict, spec: dict) -> bool:
    if record["kind"] != spec["kind"]:
        return False
    text = (record["content"] + " " + json.dumps(record["fields"], ensure_ascii=False)).lower()
    return all(word.lower() in text for word in spec["contains"])


def judge(item: dict, records: list[dict]) -> dict:
    """True positives, false positives and misses of one utterance."""
    expected = list(item.get("expect", []))
    allowed = list(item.get("allow", []))
    tp, fp, neutral = [], [], []
    unmatched = list(expected)
    for record in records:
        spec = next((s for s in unmatched if _matches(record, s)), None)
        if spec is not None:
            unmatched.remove(spec)
            tp.append(record)
        elif any(_matches(record, s) for s in allowed + expected):
            neutral.append(record)  # an allowed record, or a second record for an expectation already met
        else:
            fp.append(record)
    return {"tp": tp, "fp": fp, "neutral": neutral, "missed": unmatched}


def evaluate(items: list[dict]) -> dict:
    """{(split, lang, kind): counts} plus overall figures per split."""
    counts: dict = defaultdict(lambda: {"tp": 0, "fp": 0, "missed": 0, "expected": 0})
    details = []
    for item in items:
        verdict = judge(item, extract(item))
        details.append((item, verdict))
        for split in (item["split"], "all"):
            for lang in (item["lang"], "all"):
                for kind in KINDS + ("all",):

                    def of_kind(rows, kind=kind):
                        return [r for r in rows if kind == "all" or r["kind"] == kind]

                    row = counts[(split, lang, kind)]
                    row["tp"] += len(of_kind(verdict["tp"]))
                    row["fp"] += len(of_kind(verdict["fp"]))
                    row["missed"] += len(of_kind(verdict["missed"]))
                    row["expected"] += len(of_kind(item.get("expect", [])))
    figures = {}
    for key, row in counts.items():
        made = row["tp"] + row["fp"]
        figures[key] = {
            **row,
            "precision": round(row["tp"] / made, 3) if made else None,
            "recall": round(row["tp"] / row["expected"], 3) if row["expected"] else None,
        }
    return {"figures": figures, "details": details}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--misses", action="store_true", help="list misses and false records")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")
    django.setup()
    items = load(Path(args.data))
    result = evaluate(items)
    figures = result["figures"]
    negatives = sum(1 for item in items if not item.get("expect"))
    print(f"{len(items)} utterances ({negatives} with no expected record), {args.data}")
    header = ("split", "lang", "kind", "expected", "made", "tp", "fp", "precision", "recall")
    print("{:8} {:4} {:8} {:>8} {:>5} {:>4} {:>4} {:>9} {:>7}".format(*header))
    for split in ("dev", "holdout", "all"):
        for lang in ("en", "zh", "all"):
            for kind in KINDS + ("all",):
                row = figures.get((split, lang, kind))
                if not row or not (row["expected"] or row["tp"] or row["fp"]):
                    continue
                p = "-" if row["precision"] is None else f"{row['precision']:.3f}"
                r = "-" if row["recall"] is None else f"{row['recall']:.3f}"
                made = row["tp"] + row["fp"]
                cells = (split, lang, kind, row["expected"], made, row["tp"], row["fp"], p, r)
                print("{:8} {:4} {:8} {:>8} {:>5} {:>4} {:>4} {:>9} {:>7}".format(*cells))
    if args.misses:
        for item, verdict in result["details"]:
            for record in verdict["fp"]:
                print(f"FALSE [{item['id']}] {item['text']!r} -> {record['kind']}: {record['content']!r}")
            for spec in verdict["missed"]:
                print(f"MISS  [{item['id']}] {item['text']!r} -> {spec['kind']} {spec['contains']}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"/".join(k): v for k, v in figures.items()}, ensure_ascii=False, indent=2), encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
