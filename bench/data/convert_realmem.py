#!/usr/bin/env python3
"""Convert RealMem (multi-session user-assistant dialogues with memory-driven queries) to the LoCoMo layout.

Source
    repository  https://github.com/zhiyuan5986/RealMemBench   ("RealMem: Benchmarking LLMs in Real-World
                Memory-Driven Interaction", arXiv:2601.06966, QuantaAlpha team)
    commit      067c486a525b0811ef9cb8cb5ad258e286d0ce7e (2026-02-28)
    paths       dataset/<Person>_dialogues_256k.json  (10 personas; ~14k turns, 1,415 queries in all)
    licence     Apache-2.0 (LICENSE file in the repository; the README badge says MIT - the LICENSE file wins).
                The dialogues are LLM-generated (multi-agent simulation), English.

Usage (stdlib only)
    python3 bench/data/convert_realmem.py                        # reads the git mirror below via `git show`
    python3 bench/data/convert_realmem.py --src-dir DIR           # or a directory with the *_dialogues_256k.json
    python3 bench/data/convert_realmem.py --max-turns 9000 --out /work/data/realmem.json

Source layout (one file per persona)
    {"_metadata": {"person_name", "total_sessions", "total_tokens"},
     "dialogues": [{"session_identifier": "Project_Management_10:S1_01", "session_uuid": "092efc87",
                    "current_time": "2025-12-21 (Sunday)",
                    "extracted_memory": [{"index", "type", "content", "source_turn": 3 (1-based turn index
                                          in this session), "source_content_snapshot", "source_role_snapshot",
                                          "session_uuid"}],
                    "dialogue_turns": [{"speaker": "User"|"Assistant", "content", "is_query", "query_id",
                                        # on query turns (User):   "topic", "category_name", "session_type"
                                        # on the Assistant turn answering a query:
                                        "memory_used": [{"session_uuid", "content"}], "memory_session_uuids"}]}]}

What a question is
    Every User turn with is_query=true (e.g. "Regarding the WhatsApp project tool from last time, ... what do you
    need from me to move forward?") is one qa item: question = that turn's text. Its gold memories are the
    `memory_used` of the Assistant turn right after it; each memory is looked up (exact content match) in the
    `extracted_memory` of the session it names, whose `source_turn` (1-based) gives the turn the memory was
    extracted from -> that turn's new dia_id is the evidence. So evidence is TURN level (derived through the
    dataset's own memory -> source turn links). The recorded source_turn index is unreliable (about half point
    past the end of their session), so the source turn is found by text: the turn of that session holding
    >= 80% of the words of the memory's source_content_snapshot (2,921 of 2,949 memory uses match at ~100%).
    There is no gold short answer: qa.answer is the text of the memories used (joined with " | "), which is
    what a correct recall must surface; qa.assistant_reply keeps the dataset's reply for reference.

Query turns are removed from the conversation (default)
    The query turn and the Assistant reply after it are left OUT of the sessions (kept only inside the qa item),
    otherwise the question would sit verbatim in the memory store and the reply (which restates the memories)
    would crowd the top hits - EXCEPT when that turn is itself the evidence of some question (memories are
    often extracted from what the user says in a query turn, or from the reply): such turns stay, and a qa
    item whose own query turn stayed names it in qa.query_dia_id (a harness may exclude that hit; about a
    third of the items). --keep-query-turns keeps every turn.

Field mapping
    sample_id                 "realmem-<person_name>"
    speaker_a / speaker_b     "User" / "Assistant" (the source roles; the product's loader maps a->user, b->assistant)
    session_N                 the persona's sessions sorted by current_time (stable on file order), N = 1..
    session_N_date_time       current_time is a date only; written "H:MM am on D Month, YYYY" with a SYNTHETIC time
                              of day: 9:00 am + 30 min x (rank of the session among that persona's sessions on the
                              same date), so sessions keep their order. session_N_source_time keeps the raw value;
                              session_N_identifier keeps session_identifier.
    turn.dia_id               "D<N>:<i>", i = 1-based position in the (filtered) session; turn.speaker, turn.text
    qa.category (int)         source category_name -> int (ints equal LoCoMo's only where the meaning is the same):
                                  2 "Temporal-reasoning"      (LoCoMo 2 = temporal)
                                  6 "Dynamic Incremental"     (builds on facts from earlier sessions)
                                  7 "Dynamic Updating"        (facts that changed later; latest one wanted)
                                  8 "Implicit Preference"     (preference never stated as a question)
    qa.category_name          the source name; qa.session_type = "single_session" | "multi_session" (evidence from
                              one vs several sessions); qa.query_id, qa.topic kept.

Sampling (deterministic)
    Personas are taken in alphabetical order of file name and whole personas are kept while the running total of
    (filtered) turns stays <= --max-turns (default 9000): with the defaults this keeps the first 7 personas
    (Adeleke_Okonjo, Ethan_Hunt, Kenta_Tanaka, Kim_Ji_young, Liam_O_Connor, Lin_Wanyu, Oliver_Smith: 1,410
    sessions, 8,162 turns, 935 questions). --personas N overrides.
    Questions left without any mappable evidence are dropped (counted).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

REPO = "zhiyuan5986/RealMemBench"
COMMIT = "067c486a525b0811ef9cb8cb5ad258e286d0ce7e"
DEFAULT_MIRROR = "/work/.mirror/zhiyuan5986+RealMemBench/repo"
DEFAULT_OUT = "/work/data/realmem.json"
CATEGORIES = {"Temporal-reasoning": 2, "Dynamic Incremental": 6, "Dynamic Updating": 7, "Implicit Preference": 8}
_FILE = re.compile(r"^(.+)_dialogues_256k\.json$")


def read_sources(src_dir: str | None, mirror: str, commit: str) -> dict[str, dict]:
    out = {}
    if src_dir:
        for p in sorted(Path(src_dir).glob("*_dialogues_256k.json")):
            out[p.name] = json.loads(p.read_text())
        return out
    names = subprocess.run(
        ["git", "-C", mirror, "ls-tree", "--name-only", commit, "dataset/"], check=True, capture_output=True, text=True
    ).stdout.split()
    for name in names:
        base = name.rsplit("/", 1)[-1]
        if _FILE.match(base):
            blob = subprocess.run(
                ["git", "-C", mirror, "show", f"{commit}:{name}"], check=True, capture_output=True
            ).stdout
            out[base] = json.loads(blob)
    return out


def parse_day(text: str) -> datetime | None:
    m = re.match(r"(\d{4}-\d{2}-\d{2})", text or "")
    return datetime.strptime(m.group(1), "%Y-%m-%d") if m else None


def locomo_time(dt: datetime) -> str:
    hour = dt.strftime("%I").lstrip("0") or "12"
    return f"{hour}:{dt.strftime('%M')} {dt.strftime('%p').lower()} on {dt.day} {dt.strftime('%B')}, {dt.year}"


def _tokens(text: str | None) -> set[str]:
    return set(re.findall(r"\w+", (text or "").lower()))


def source_turn(session: dict, mem: dict) -> int | None:
    """1-based index of the turn a memory was extracted from.

    The recorded source_turn is unreliable (about half point past the end of the session: the turns were
    edited after extraction), so the turn is found by text: the turn of that session containing the largest
    share of the words of source_content_snapshot (accepted at >= 0.8). Without a snapshot, source_turn is
    used when it is in range and its speaker matches source_role_snapshot."""
    turns = session.get("dialogue_turns", [])
    snap = _tokens(mem.get("source_content_snapshot"))
    if snap:
        score, k = max(
            ((len(snap & _tokens(t.get("content"))) / len(snap), j + 1) for j, t in enumerate(turns)),
            default=(0.0, None),
        )
        return k if score >= 0.8 else None
    k = mem.get("source_turn")
    if (
        isinstance(k, int)
        and 1 <= k <= len(turns)
        and str(turns[k - 1].get("speaker", "")).lower() == str(mem.get("source_role_snapshot", "")).lower()
    ):
        return k
    return None


def convert_persona(d: dict, keep_query_turns: bool) -> tuple[dict, collections.Counter]:
    st: collections.Counter = collections.Counter()
    person = d.get("_metadata", {}).get("person_name", "unknown")
    dialogues = d["dialogues"]
    order = sorted(
        range(len(dialogues)), key=lambda i: (parse_day(dialogues[i].get("current_time", "")) or datetime.max, i)
    )
    by_uuid = {s["session_uuid"]: s for s in dialogues}
    # source turns that are evidence of some question: never removed from the conversation
    evidence_src: set[tuple[str, int]] = set()
    for s in dialogues:
        for t in s.get("dialogue_turns", []):
            for mu in t.get("memory_used") or []:
                src = by_uuid.get(mu.get("session_uuid"))
                mem = src and next(
                    (m for m in src.get("extracted_memory", []) if m.get("content") == mu.get("content")), None
                )
                k = source_turn(src, mem) if mem else None
                if k is not None:
                    evidence_src.add((src["session_uuid"], k))
    # pass 1: which source turns stay, and their new dia_ids
    new_id: dict[tuple[str, int], str] = {}  # (session_uuid, 1-based source turn) -> dia_id
    conv: dict = {"speaker_a": "User", "speaker_b": "Assistant"}
    per_day: collections.Counter = collections.Counter()
    queries = []  # (session N, query turn, reply turn, query dia_id or None)
    for n, idx in enumerate(order, start=1):
        s = dialogues[idx]
        turns_src = s.get("dialogue_turns", [])
        drop = set()
        for i, t in enumerate(turns_src):
            if t.get("is_query"):
                reply = (
                    turns_src[i + 1] if i + 1 < len(turns_src) and turns_src[i + 1].get("speaker") != "User" else None
                )
                queries.append((n, s, t, reply, i))
                if not keep_query_turns:
                    for j in (i, i + 1) if reply is not None else (i,):
                        if (s["session_uuid"], j + 1) in evidence_src:
                            st["query_or_reply_turn_kept_as_evidence"] += 1
                        else:
                            drop.add(j)
        turns = []
        for i, t in enumerate(turns_src):
            if i in drop:
                continue
            did = f"D{n}:{len(turns) + 1}"
            new_id[(s["session_uuid"], i + 1)] = did
            turns.append({"speaker": t.get("speaker", "User"), "dia_id": did, "text": t.get("content", "")})
        day = parse_day(s.get("current_time", ""))
        if day is None:
            stamp = None
        else:
            stamp = locomo_time(day + timedelta(hours=9, minutes=30 * per_day[day]))
            per_day[day] += 1
        conv[f"session_{n}"] = turns
        conv[f"session_{n}_date_time"] = stamp
        conv[f"session_{n}_source_time"] = s.get("current_time")
        conv[f"session_{n}_identifier"] = s.get("session_identifier")
        st["sessions"] += 1
        st["turns"] += len(turns)
    # pass 2: questions
    qa = []
    for n, s, t, reply, i in queries:
        st["queries"] += 1
        used = (reply or {}).get("memory_used") or []
        evidence, texts = [], []
        for mu in used:
            texts.append(mu.get("content", ""))
            src = by_uuid.get(mu.get("session_uuid"))
            mem = None
            if src is not None:
                mem = next((m for m in src.get("extracted_memory", []) if m.get("content") == mu.get("content")), None)
            k = source_turn(src, mem) if mem is not None else None
            if k is None:
                st["memory_unresolved"] += 1
                continue
            did = new_id.get((src["session_uuid"], k))
            if did is None:
                st["evidence_turn_removed_or_out_of_range"] += 1
                continue
            if did not in evidence:
                evidence.append(did)
        if not evidence:
            st["queries_dropped_no_evidence"] += 1
            continue
        name = t.get("category_name") or "unknown"
        cat = CATEGORIES.get(name, 9)
        item = {
            "question": t.get("content", ""),
            "answer": " | ".join(texts),
            "evidence": evidence,
            "category": cat,
            "category_name": name,
            "session_type": t.get("session_type"),
            "topic": t.get("topic"),
            "query_id": t.get("query_id"),
            "asked_in_session": n,
            "assistant_reply": (reply or {}).get("content"),
        }
        if new_id.get((s["session_uuid"], i + 1)):
            item["query_dia_id"] = new_id[(s["session_uuid"], i + 1)]  # the query turn itself is in the conversation
            st["qa_with_query_turn_in_conversation"] += 1
        qa.append(item)
        st[f"cat{cat}:{name}"] += 1
        st["qa"] += 1
        st["evidence_ids"] += len(evidence)
        sess_of = [int(e[1:].split(":")[0]) for e in evidence]
        st["evidence_in_later_session"] += sum(1 for x in sess_of if x > n)
    return {"sample_id": f"realmem-{person}", "conversation": conv, "qa": qa}, st


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src-dir")
    ap.add_argument("--mirror", default=DEFAULT_MIRROR)
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--max-turns", type=int, default=9000)
    ap.add_argument("--personas", type=int, help="keep the first N personas (alphabetical) regardless of --max-turns")
    ap.add_argument("--keep-query-turns", action="store_true")
    args = ap.parse_args()
    sources = read_sources(args.src_dir, args.mirror, args.commit)
    if not sources:
        print("no *_dialogues_256k.json found", file=sys.stderr)
        return 1
    samples, total = [], collections.Counter()
    for fname in sorted(sources):
        sample, st = convert_persona(sources[fname], args.keep_query_turns)
        if args.personas is not None:
            if len(samples) >= args.personas:
                break
        elif total["turns"] + st["turns"] > args.max_turns:
            break
        samples.append(sample)
        total.update(st)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(samples, ensure_ascii=False, indent=1))
    print(f"wrote {args.out}: {len(samples)} samples ({', '.join(s['sample_id'] for s in samples)})")
    print("  " + ", ".join(f"{k}={v}" for k, v in sorted(total.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
