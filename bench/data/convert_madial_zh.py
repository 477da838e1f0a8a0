#!/usr/bin/env python3
"""Convert MADial-Bench (Chinese) - memory recall for memory-augmented companion dialogue - to the LoCoMo layout.

NOT a multi-session conversation set: the "memories" of MADial-Bench are dated one-sentence event records of a
user (a memory archive), and each test item is a short current dialogue whose next assistant turn should recall
some of them. It is converted so the same recall harness can run on Chinese text; read its numbers as
"event-memory recall from a Chinese chit-chat context", not as LoCoMo-style QA.

Source
    repository  https://github.com/hejunqing/MADial-Bench   (He et al., "MADial-Bench: Towards Real-world
                Evaluation of Memory-Augmented Dialogue Generation", NAACL 2025)
    commit      572e3a10d6d01852a65e4508e0b3ab2a00d0710c (2025-04-30)
    paths       data/ch/MADial-Bench-zh-memory.json    (JSON lines: {"<id>": {time, scene, emotion, event,
                                                        user-id, id}}, 171 memories, 2 users)
                data/ch/MADial-Bench-zh-dialogue.json  (JSON lines: {dialogue: ["<BOD>", "<Name>:\"...\"", ...,
                                                        "<EOD>"], test-turn: [i, ...], relevant-id: [...],
                                                        user-id, id}, 160 dialogues)
                (data/en/ has an English translation whose memory file lacks user-id; not converted.)
    licence     MIT (LICENSE in the repository, "Copyright (c) 2025 Nicole").

Usage (stdlib only)
    python3 bench/data/convert_madial_zh.py [--src-dir DIR] [--query {user,last}] [--out /work/data/madial_zh.json]

Field mapping
    sample_id                 "madial-zh-user<user-id>" (one sample per user: 2 samples)
    speaker_a / speaker_b     the user's name as written in the dialogues (e.g. "Bart", "Lisa") / "Assistant"
    session_N                 one session per memory, sorted by (time, id); ONE turn: speaker = the user,
                              text = the memory's "event" (Chinese), plus extra fields memory_id, scene, emotion.
                              dia_id "D<N>:1". So a "session" here is a memory record, not a chat.
    session_N_date_time       memory "time" (a date) written "12:00 pm on D Month, YYYY" (time of day synthetic)
    qa (one per dialogue)     question  = (--query user, default) the user's utterances before the first
                                          test turn, joined with " "; (--query last) only the last of them
                              context   = all dialogue lines before the first test turn (with speakers)
                              answer    = the assistant's test-turn line(s) (the reference memory-recalling reply)
                              evidence  = dia_ids of the memories in relevant-id (all of them; the list is
                                          MADial's set of memories relevant to the dialogue)
                              category  = 1 if one relevant memory, 2 if several -> category_name
                                          "single-memory" / "multi-memory". (MADial has no question types; these
                                          ints are NOT LoCoMo's categories - use category_name.)
                              dialogue_id, test_turns kept.

Size: 171 turns, 160 questions: tiny; no sampling.
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

REPO = "hejunqing/MADial-Bench"
COMMIT = "572e3a10d6d01852a65e4508e0b3ab2a00d0710c"
DEFAULT_MIRROR = "/work/.mirror/hejunqing+MADial-Bench/repo"
MEM_PATH = "data/ch/MADial-Bench-zh-memory.json"
DLG_PATH = "data/ch/MADial-Bench-zh-dialogue.json"
DEFAULT_OUT = "/work/data/madial_zh.json"
_LINE = re.compile(r'^<([^>]+)>\s*:\s*"?(.*?)"?\s*$', re.S)


def read_text(src_dir: str | None, mirror: str, commit: str, path: str) -> str:
    if src_dir:
        return (Path(src_dir) / Path(path).name).read_text()
    return subprocess.run(
        ["git", "-C", mirror, "show", f"{commit}:{path}"], check=True, capture_output=True
    ).stdout.decode("utf-8")


def json_lines(text: str) -> list:
    text = text.strip()
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def split_line(line: str) -> tuple[str | None, str]:
    m = _LINE.match(line.strip())
    return (m.group(1).strip(), m.group(2).strip()) if m else (None, line.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src-dir", help="directory holding the two zh files (default: read the git mirror)")
    ap.add_argument("--mirror", default=DEFAULT_MIRROR)
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--query", choices=("user", "last"), default="user")
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()

    memories: dict[str, dict] = {}
    for rec in json_lines(read_text(args.src_dir, args.mirror, args.commit, MEM_PATH)):
        for key, m in rec.items():
            memories[str(m.get("id", key))] = m
    dialogues = json_lines(read_text(args.src_dir, args.mirror, args.commit, DLG_PATH))

    names: dict[int, str] = {}
    for dlg in dialogues:
        for line in dlg["dialogue"]:
            who, _ = split_line(line)
            if who and who != "Assistant" and dlg["user-id"] not in names:
                names[dlg["user-id"]] = who

    samples, stats = [], collections.Counter()
    for uid in sorted({m["user-id"] for m in memories.values()}):
        user = names.get(uid, f"user{uid}")
        mems = sorted((m for m in memories.values() if m["user-id"] == uid), key=lambda m: (m["time"], int(m["id"])))
        conv: dict = {"speaker_a": user, "speaker_b": "Assistant"}
        mem_dia: dict[str, str] = {}
        for n, m in enumerate(mems, start=1):
            did = f"D{n}:1"
            mem_dia[str(m["id"])] = did
            conv[f"session_{n}"] = [
                {
                    "speaker": user,
                    "dia_id": did,
                    "text": m["event"],
                    "memory_id": str(m["id"]),
                    "scene": m.get("scene"),
                    "emotion": m.get("emotion"),
                }
            ]
            try:
                day = datetime.strptime(m["time"], "%Y-%m-%d")
                conv[f"session_{n}_date_time"] = f"12:00 pm on {day.day} {day.strftime('%B')}, {day.year}"
            except (ValueError, TypeError):
                conv[f"session_{n}_date_time"] = m.get("time")
            stats["turns"] += 1
        qa = []
        for dlg in (d for d in dialogues if d["user-id"] == uid):
            first = min(dlg["test-turn"])
            before = [split_line(x) for x in dlg["dialogue"][:first] if x.strip() not in ("<BOD>", "<EOD>")]
            user_lines = [t for who, t in before if who and who != "Assistant"]
            question = " ".join(user_lines) if args.query == "user" else (user_lines[-1] if user_lines else "")
            evidence = [mem_dia[str(r)] for r in dlg["relevant-id"] if str(r) in mem_dia]
            stats["missing_relevant"] += len(dlg["relevant-id"]) - len(evidence)
            cat = 1 if len(evidence) == 1 else 2
            qa.append(
                {
                    "question": question,
                    "answer": " ".join(
                        split_line(dlg["dialogue"][i])[1] for i in dlg["test-turn"] if i < len(dlg["dialogue"])
                    ),
                    "evidence": evidence,
                    "category": cat,
                    "category_name": "single-memory" if cat == 1 else "multi-memory",
                    "context": [f"{who}: {t}" if who else t for who, t in before],
                    "dialogue_id": dlg.get("id"),
                    "test_turns": dlg["test-turn"],
                }
            )
            stats["qa"] += 1
            stats[f"cat{cat}"] += 1
        samples.append({"sample_id": f"madial-zh-user{uid}", "conversation": conv, "qa": qa})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(samples, ensure_ascii=False, indent=1))
    print(f"wrote {args.out}: {len(samples)} samples; " + ", ".join(f"{k}={v}" for k, v in sorted(stats.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
