#!/usr/bin/env python3
"""Convert MemDaily (Chinese; MemSim's personal-assistant memory set) to the LoCoMo layout, one sample per user.

MemDaily is a set of short "trajectories": a user tells an assistant facts about their life in a few messages
(Chinese, one message per turn, each with a timestamp and place), then asks one question whose answer is in
1..n of those messages (`target_step_id`, the evidence turns). The assistant's replies are not part of the set.
Every trajectory was generated from one of 50 user profiles (`graphs.json`; gid = tid // trajectories-per-user
of its file), and all trajectories of a profile state facts about the same people, events, items and places.
So the converter merges the ~59 trajectories of a profile into one user's history (~520 messages) and asks all
of that profile's questions against the whole history: the evidence turn must be found among ~520, not ~9.

Source
    repository  https://github.com/nuster1128/MemSim   (Zhang et al., "MemSim: A Bayesian Simulator for
                Evaluating Memory of LLM-based Personal Assistants", arXiv:2409.20163, 2024)
    commit      db9d5d552d6cb1d859f692eb7e6c0fd6d61d3815 (2024-10-10)
    paths       data_generation/final_dataset/messages_and_QAs/0K_<type>_<entity>.json  (26 files: K = 1 simple,
                2 conditional, 3 comparative, 4 aggregative, 5 post-processing, 6 noisy; entity = roles, events,
                items, places, hybrid; each a list of {tid, message_list: [{mid, message, time, place}],
                question_list: [{qid, question, answer, target_step_id: [mid...], choices, ground_truth, time}]})
                The merged data_generation/final_dataset/memdaily.json is NOT in the snapshot (its blob is
                absent); it is these files less the items whose question or answer is "[ERRORQ]"/"[ERRORA]",
                which this converter drops the same way (46 of 3,000), giving MemDaily's 2,954 questions.
    licence     the repository has NO licence file and the README states none. Treat as "all rights reserved /
                research use with citation (arXiv:2409.20163)"; do not redistribute the converted file.

Usage (stdlib only)
    python3 bench/data/convert_memdaily_zh.py                        # reads the git mirror below via `git show`
    python3 bench/data/convert_memdaily_zh.py --src-dir DIR           # or a directory holding the 26 files
    python3 bench/data/convert_memdaily_zh.py --max-turns 9000 --out /work/data/memdaily_zh.json

Field mapping
    sample_id                 "memdaily-zh-u<gid>" (gid 0..49, the profile index)
    speaker_a / speaker_b     "用户" / "助手" (all turns are the user's; no assistant turns exist)
    session_N                 one session per trajectory, sessions ordered by (first message time, file, tid);
                              turns in source order, dia_id "D<N>:<i>"; turn.text = message;
                              turn.date_time = the source time ("2024年04月01日 周一 08:39"); turn.place kept.
                              The session also keeps its origin: session_N_source = "<file>#<tid>".
                              DEDUPLICATED by default: MemDaily's messages are templated and the trajectories of a
                              profile repeat them word for word (of ~530 messages per user only ~215 are distinct),
                              so each text (compared without spaces and punctuation) is kept once, at its first
                              telling; a later repeat is dropped and its mid maps to that first turn, which may sit
                              in an earlier session. A trajectory left with no turn gets no session (its question
                              stays). --keep-duplicates keeps every message as a turn instead.
    session_N_date_time       the first message's time as LoCoMo writes it ("8:39 am on 1 April, 2024"). All
                              trajectories of a profile start around 1 April 2024, so sessions overlap in time:
                              the source has no global timeline.
    qa.question / answer      as is (answer a string; aggregative answers like "2人; 3个")
    qa.evidence               the target_step_id messages of the question's trajectory, as dia_ids (after
                              deduplication: the first telling of each of those texts)
    qa.evidence_alt           turns in OTHER sessions whose text equals an evidence turn's (after removing spaces
                              and punctuation); always empty when deduplicated, filled with --keep-duplicates.
                              Paraphrased repeats are never listed; the printed qa_with_near_repeat counts questions
                              with a char-bigram Jaccard >= 0.6 neighbour elsewhere (often a sibling fact in the same
                              template, e.g. another event's "...的地点是北京", which is the set's intended noise).
    qa.category               1 simple, 2 conditional, 3 comparative, 4 aggregative, 5 post-processing, 6 noisy
                              (MemDaily's six question types; NOT LoCoMo's numbering: 5 is not "adversarial").
    qa.category_name          "simple" | "conditional" | "comparative" | "aggregative" | "post-processing" | "noisy"
    qa.entity                 roles | events | items | places | hybrid  (the source file's entity kind)
    qa.choices, ground_truth  the multiple-choice options and the right letter, kept
    qa.question_date          the question's source time;  qa.source  "<file>#<tid>"

Size: 50 users, 2,954 trajectories / 26,003 messages / 2,954 questions in full (11,690 distinct turns in 2,337 sessions
after deduplication). Default --max-turns 9000 keeps the first users (by gid) whose turns add up to at most 9,000:
38 users, 1,771 sessions, 8,856 turns, 2,256 questions (380 per type, 356 aggregative). --users N keeps the first
N users regardless. With --keep-duplicates a user has ~530 turns (16 users fit in 9,000).
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

REPO = "nuster1128/MemSim"
COMMIT = "db9d5d552d6cb1d859f692eb7e6c0fd6d61d3815"
DEFAULT_MIRROR = "/work/.mirror/nuster1128+MemSim/repo"
SRC_DIR = "data_generation/final_dataset/messages_and_QAs"
DEFAULT_OUT = "/work/data/memdaily_zh.json"
USERS = 50
CATEGORY_NAMES = {
    1: "simple",
    2: "conditional",
    3: "comparative",
    4: "aggregative",
    5: "post-processing",
    6: "noisy",
}
_FILE = re.compile(r"^0(\d)_[a-z_]+?_(roles|events|items|places|hybrid)\.json$")
_TIME = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日\D*?(\d{1,2}):(\d{2})")
_PUNCT = re.compile(r"[\s\u3000-\u303f\uff00-\uffef.,!?;:'\"()\[\]{}<>~`@#$%^&*_+=|\\/-]+")


def read_sources(src_dir: str | None, mirror: str, commit: str) -> dict[str, list]:
    out = {}
    if src_dir:
        for p in sorted(Path(src_dir).glob("0*_*.json")):
            if _FILE.match(p.name):
                out[p.name] = json.loads(p.read_text())
        return out
    names = subprocess.run(
        ["git", "-C", mirror, "ls-tree", "--name-only", f"{commit}:{SRC_DIR}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in sorted(names):
        if _FILE.match(name):
            blob = subprocess.run(
                ["git", "-C", mirror, "show", f"{commit}:{SRC_DIR}/{name}"], check=True, capture_output=True
            ).stdout
            out[name] = json.loads(blob)
    return out


def parse_time(text: str) -> datetime | None:
    m = _TIME.search(text or "")
    if not m:
        return None
    return datetime(*(int(x) for x in m.groups()))


def locomo_time(moment: datetime) -> str:
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {moment.strftime('%B')}, {moment.year}"


def norm(text: str) -> str:
    return _PUNCT.sub("", text or "")


def bigrams(text: str) -> set[str]:
    t = norm(text)
    return {t[i : i + 2] for i in range(len(t) - 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src-dir", help="directory holding the 26 0K_<type>_<entity>.json files")
    ap.add_argument("--mirror", default=DEFAULT_MIRROR)
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--max-turns", type=int, default=9000)
    ap.add_argument("--users", type=int, help="keep the first N users (by gid) regardless of --max-turns")
    ap.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="keep word-for-word repeated messages as turns (default: each text once, at its first telling)",
    )
    args = ap.parse_args()

    sources = read_sources(args.src_dir, args.mirror, args.commit)
    if len(sources) != 26:
        print(f"warning: expected 26 source files, found {len(sources)}", file=sys.stderr)
    stats = collections.Counter()
    per_user: dict[int, list] = collections.defaultdict(list)
    for name, trajectories in sources.items():
        kind, entity = _FILE.match(name).groups()
        per_gid = len(trajectories) // USERS
        if per_gid * USERS != len(trajectories):
            print(f"warning: {name} has {len(trajectories)} trajectories, not a multiple of {USERS}", file=sys.stderr)
        for t in trajectories:
            gid = int(t["tid"]) // per_gid
            per_user[gid].append((name, int(kind), entity, t))

    samples = []
    total_turns = 0
    for gid in sorted(per_user):
        trajectories = per_user[gid]
        messages = [m["message"] for *_, t in trajectories for m in t["message_list"]]
        n_turns = len(messages) if args.keep_duplicates else len({norm(m) for m in messages})
        if args.users is not None:
            if len(samples) >= args.users:
                break
        elif total_turns + n_turns > args.max_turns:
            break
        total_turns += n_turns

        def order(item):
            name, _, _, t = item
            first = parse_time(t["message_list"][0]["time"]) if t["message_list"] else None
            return (first or datetime.max, name, int(t["tid"]))

        conv: dict = {"speaker_a": "用户", "speaker_b": "助手"}
        qa = []
        texts: dict[str, tuple[int, str]] = {}  # dia_id -> (session, text)
        pending = []
        seen: dict[str, str] = {}  # normalised text -> dia_id of its first telling (--dedupe)
        n = 0
        for name, kind, entity, t in sorted(trajectories, key=order):
            turns, mid_to_dia = [], {}
            for m in t["message_list"]:
                key = norm(m["message"])
                if not args.keep_duplicates and key in seen:
                    mid_to_dia[int(m["mid"])] = seen[key]
                    stats["turns_deduplicated"] += 1
                    continue
                turns.append(
                    {"speaker": "用户", "text": m["message"], "date_time": m.get("time"), "place": m.get("place")}
                )
                mid_to_dia[int(m["mid"])] = turns[-1]
            if turns:
                n += 1
                for i, turn in enumerate(turns, start=1):
                    turn["dia_id"] = f"D{n}:{i}"
                    texts[turn["dia_id"]] = (n, turn["text"])
                    seen.setdefault(norm(turn["text"]), turn["dia_id"])
                conv[f"session_{n}"] = [
                    {k: turn[k] for k in ("speaker", "dia_id", "text", "date_time", "place")} for turn in turns
                ]
                first = parse_time(t["message_list"][0]["time"])
                conv[f"session_{n}_date_time"] = locomo_time(first) if first else None
                conv[f"session_{n}_source"] = f"{name}#{t['tid']}"
                stats["sessions"] += 1
                stats["turns"] += len(turns)
            mid_to_dia = {mid: (v if isinstance(v, str) else v["dia_id"]) for mid, v in mid_to_dia.items()}
            for q in t["question_list"]:
                if q["question"] == "[ERRORQ]" or q["answer"] == "[ERRORA]":
                    stats["qa_dropped_error"] += 1
                    continue
                evidence = [mid_to_dia[int(s)] for s in q["target_step_id"] if int(s) in mid_to_dia]
                stats["evidence_unmapped"] += len(q["target_step_id"]) - len(evidence)
                evidence = sorted(set(evidence), key=lambda d: tuple(int(x) for x in d[1:].split(":")))
                if not evidence:
                    stats["qa_dropped_no_evidence"] += 1
                    continue
                pending.append(evidence)
                qa.append(
                    {
                        "question": q["question"],
                        "answer": str(q["answer"]),
                        "evidence": evidence,
                        "category": kind,
                        "category_name": CATEGORY_NAMES[kind],
                        "entity": entity,
                        "choices": q.get("choices"),
                        "ground_truth": q.get("ground_truth"),
                        "question_date": q.get("time"),
                        "source": f"{name}#{t['tid']}",
                    }
                )
                stats["qa"] += 1
                stats[f"cat{kind}"] += 1
        # the same fact told again elsewhere: exact repeats become evidence_alt; near repeats are only counted
        by_norm: dict[str, list[str]] = collections.defaultdict(list)
        grams = {did: bigrams(text) for did, (_, text) in texts.items()}
        for did, (_, text) in texts.items():
            by_norm[norm(text)].append(did)
        for item, evidence in zip(qa, pending, strict=True):
            alt, near = set(), set()
            for did in evidence:
                home = texts[did][0]
                for other in by_norm[norm(texts[did][1])]:
                    if other not in evidence and texts[other][0] != home:
                        alt.add(other)
                g = grams[did]
                for other, og in grams.items():
                    similar = g and og and len(g & og) / len(g | og) >= 0.6
                    if other not in evidence and texts[other][0] != home and similar:
                        near.add(other)
            item["evidence_alt"] = sorted(alt, key=lambda d: tuple(int(x) for x in d[1:].split(":")))
            stats["qa_with_exact_repeat"] += bool(alt)
            stats["qa_with_near_repeat"] += bool(near)
        samples.append({"sample_id": f"memdaily-zh-u{gid}", "conversation": conv, "qa": qa})

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(samples, ensure_ascii=False, indent=1))
    print(
        f"wrote {args.out}: {len(samples)} samples ({', '.join(s['sample_id'] for s in samples)})\n  "
        + ", ".join(f"{k}={v}" for k, v in sorted(stats.items()))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
