#!/usr/bin/env python3
"""Convert REALTALK (real 21-day messaging-app conversations with memory-probing QA) to the LoCoMo layout.

Source
    repository  https://github.com/danny911kr/REALTALK
    commit      b903e06a9770bf4e5fe9018c3e132889666d3b4a (2025-07-03)
    paths       data/Chat_<n>_<A>_<B>.json  (10 files; data/locomo/ is a re-split of LoCoMo and is NOT used)
    paper       Lee, Maharana, Pujara, Ren, Barbieri. "REALTALK: A 21-Day Real-World Dataset for
                Long-Term Conversation", arXiv:2502.13270 (2025)
    licence     the repository has NO licence file and the README states none. Treat as "all rights
                reserved / research use with citation"; do not redistribute the converted file.

Usage (stdlib only)
    python3 bench/data/convert_realtalk.py                       # reads the git mirror below via `git show`
    python3 bench/data/convert_realtalk.py --src-dir DIR          # or a directory holding the Chat_*.json files
    python3 bench/data/convert_realtalk.py --out /work/data/realtalk.json

Source layout (one file per conversation)
    {"name": {"speaker_1", "speaker_2"},
     "session_N": [{"clean_text", "speaker", "date_time": "29.12.2023, 22:42:04", "img_file", "img_url",
                    "dia_id": "D3:30"}, ...],
     "events_session_N": {...},                    # not used
     "session_N_date_time": "29.12.2023, 22:42:04",
     "qa": [{"question", "answer", "evidence": ["D1:6", ...], "category": 1|2|3}]}

Field mapping
    sample_id                      "realtalk-<n>" from the file name Chat_<n>_...
    conversation.speaker_a/_b      the first two distinct turn speakers in order of appearance (they are the
                                   strings used in turn.speaker, e.g. "Emi", "elise"); the README-level names
                                   are kept in conversation.speaker_names.
    session_N                      same N as the source (1..), turns in source order
    session_N_date_time            source "DD.MM.YYYY, HH:MM:SS" rewritten LoCoMo-style "10:42 pm on 29 December, 2023"
    turn.dia_id                    RENUMBERED "D<N>:<i>" (i = 1-based position in session N). The source's own
                                   dia_ids are unique but their session part does not follow the session
                                   numbering (session_4 starts at "D3:30"), so they are kept in turn.orig_dia_id.
    turn.text                      clean_text;  turn.speaker  speaker;  turn.date_time  per-message timestamp
    turn.img_url                   source img_url when non-empty (REALTALK has no captions, so no blip_caption)
    qa.question / answer           as is (answer stringified)
    qa.evidence                    source evidence strings normalised and mapped to the new dia_ids:
                                   lists like "D1:11; D3:18", "D12:3-D12:5" / "D13:43-46" ranges (expanded over
                                   the turns between the two ends in conversation order), stray spaces/dots
                                   ("D 2:18", "D20:17.") are parsed; ids that do not exist in the conversation are
                                   dropped (the raw strings stay in qa.evidence_raw, counts printed).
    qa.category                    kept: 1 multi-hop, 2 temporal reasoning, 3 commonsense / world knowledge
                                   (open-domain inference). This numbering coincides with LoCoMo's 1/2/3;
                                   REALTALK has no category 4 (single-hop) or 5 (adversarial).
    qa.category_name               "multi-hop" | "temporal" | "commonsense"

Size: all 10 conversations are kept (~8.9k turns, 728 questions), within the 6k-10k turn budget; no sampling.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

REPO = "danny911kr/REALTALK"
COMMIT = "b903e06a9770bf4e5fe9018c3e132889666d3b4a"
DEFAULT_MIRROR = "/work/.mirror/danny911kr+REALTALK/repo"
DEFAULT_OUT = "/work/data/realtalk.json"
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "commonsense"}
_FILE = re.compile(r"^Chat_(\d+)_.*\.json$")
_SESSION = re.compile(r"^session_(\d+)$")
_ID = re.compile(r"D\s*(\d+)\s*:\s*(\d+)")
_RANGE = re.compile(r"D\s*(\d+)\s*:\s*(\d+)\s*[-\u2013]\s*(?:D\s*(\d+)\s*:\s*)?(\d+)")


def read_sources(src_dir: str | None, mirror: str, commit: str) -> dict[str, dict]:
    out = {}
    if src_dir:
        for p in sorted(Path(src_dir).glob("Chat_*.json")):
            out[p.name] = json.loads(p.read_text())
        return out
    names = subprocess.run(
        ["git", "-C", mirror, "ls-tree", "--name-only", commit, "data/"], check=True, capture_output=True, text=True
    ).stdout.split()
    for name in names:
        base = name.rsplit("/", 1)[-1]
        if _FILE.match(base):
            blob = subprocess.run(
                ["git", "-C", mirror, "show", f"{commit}:{name}"], check=True, capture_output=True
            ).stdout
            out[base] = json.loads(blob)
    return out


def locomo_date(text: str | None) -> str | None:
    if not text:
        return None
    try:
        dt = datetime.strptime(text.strip(), "%d.%m.%Y, %H:%M:%S")
    except ValueError:
        return text
    hour = dt.strftime("%I").lstrip("0") or "12"
    return f"{hour}:{dt.strftime('%M')} {dt.strftime('%p').lower()} on {dt.day} {dt.strftime('%B')}, {dt.year}"


def parse_evidence(raw: list, order: list[str], new_id: dict[str, str]) -> list[str]:
    """Source evidence strings -> new dia_ids (deduplicated, in order)."""
    pos = {oid: i for i, oid in enumerate(order)}
    found: list[str] = []
    for item in raw:
        s = str(item)
        for m in _RANGE.finditer(s):
            a = f"D{int(m.group(1))}:{int(m.group(2))}"
            b = f"D{int(m.group(3) or m.group(1))}:{int(m.group(4))}"
            if a in pos and b in pos and pos[a] <= pos[b] and pos[b] - pos[a] <= 60:
                found.extend(order[pos[a] : pos[b] + 1])
            else:
                found.extend([a, b])
        s = _RANGE.sub(" ", s)
        found.extend(f"D{int(m.group(1))}:{int(m.group(2))}" for m in _ID.finditer(s))
    out, seen = [], set()
    for oid in found:
        if oid in new_id and new_id[oid] not in seen:
            seen.add(new_id[oid])
            out.append(new_id[oid])
    return out


def convert_one(fname: str, d: dict) -> tuple[dict, collections.Counter]:
    stats: collections.Counter = collections.Counter()
    num = int(_FILE.match(fname).group(1))
    sessions = sorted((int(m.group(1)), k) for k in d if (m := _SESSION.match(k)))
    conv: dict = {}
    speakers: list[str] = []
    order: list[str] = []
    new_id: dict[str, str] = {}
    for n, key in sessions:
        turns = []
        for i, t in enumerate(d[key], start=1):
            did = f"D{n}:{i}"
            spk = t.get("speaker", "")
            if spk not in speakers:
                speakers.append(spk)
            turn = {"speaker": spk, "dia_id": did, "text": t.get("clean_text", "")}
            if t.get("dia_id"):
                turn["orig_dia_id"] = t["dia_id"]
                new_id.setdefault(t["dia_id"], did)
                order.append(t["dia_id"])
            if t.get("date_time"):
                turn["date_time"] = t["date_time"]
            if t.get("img_url"):
                turn["img_url"] = t["img_url"]
            turns.append(turn)
        conv[f"session_{n}"] = turns
        conv[f"session_{n}_date_time"] = locomo_date(
            d.get(f"{key}_date_time") or (d[key][0].get("date_time") if d[key] else None)
        )
        stats["turns"] += len(turns)
    stats["sessions"] = len(sessions)
    conv = {
        "speaker_a": speakers[0] if speakers else "A",
        "speaker_b": speakers[1] if len(speakers) > 1 else "B",
        "speaker_names": [d.get("name", {}).get("speaker_1"), d.get("name", {}).get("speaker_2")],
        **conv,
    }
    qa = []
    for q in d.get("qa", []):
        raw = q.get("evidence", []) or []
        ev = parse_evidence(raw if isinstance(raw, list) else [raw], order, new_id)
        cat = int(q.get("category", 0))
        stats[f"cat{cat}"] += 1
        stats["qa"] += 1
        stats["qa_no_evidence"] += 0 if ev else 1
        stats["evidence_ids"] += len(ev)
        stats["raw_evidence_items"] += len(raw) if isinstance(raw, list) else 1
        qa.append(
            {
                "question": q.get("question", ""),
                "answer": str(q.get("answer", "")),
                "evidence": ev,
                "category": cat,
                "category_name": CATEGORY_NAMES.get(cat, f"category-{cat}"),
                "evidence_raw": raw,
            }
        )
    sample = {
        "sample_id": f"realtalk-{num}",
        "source": f"{REPO}@{COMMIT[:12]}:data/{fname}",
        "conversation": conv,
        "qa": qa,
    }
    return sample, stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src-dir", help="directory with Chat_*.json (default: read the git mirror)")
    ap.add_argument("--mirror", default=DEFAULT_MIRROR)
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    sources = read_sources(args.src_dir, args.mirror, args.commit)
    if not sources:
        print("no Chat_*.json found", file=sys.stderr)
        return 1
    samples, total = [], collections.Counter()
    for fname in sorted(sources, key=lambda f: int(_FILE.match(f).group(1))):
        s, st = convert_one(fname, sources[fname])
        samples.append(s)
        total.update(st)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(samples, ensure_ascii=False, indent=1))
    print(
        f"wrote {args.out}: {len(samples)} samples, {total['sessions']} sessions, {total['turns']} turns, "
        f"{total['qa']} questions ({', '.join(f'{k}={v}' for k, v in sorted(total.items()) if k.startswith('cat'))}); "
        f"{total['evidence_ids']} mapped evidence ids from {total['raw_evidence_items']} raw evidence strings; "
        f"{total['qa_no_evidence']} questions left without evidence"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
