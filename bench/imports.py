#!/usr/bin/env python
"""Agent-log import throughput on a generated Claude Code tree, against reading and `json.loads`-ing it.

    .venv/bin/python bench/imports.py            # a 200 MB tree
    .venv/bin/python bench/imports.py --quick    # a 20 MB tree
    .venv/bin/python bench/imports.py --profile  # also: cProfile of the import, top functions

The tree (`.ace/bench-imports/<size>mb/.claude/projects/…`, generated once per size and seed, then reused)
has the shapes of real Claude Code logs: many projects and sessions; responses streamed over several
lines (thinking, text, tool_use) that share `message.id` with `output_tokens` growing; tool_use /
tool_result pairs whose output is repeated in `toolUseResult` (file reads, shell output, a few KB to
tens of KB); parallel tool calls; Task calls whose sub-agent writes `<session>/subagents/agent-<id>.jsonl`
(with its `.meta.json`); older sessions with inline `isSidechain` lines; meta, command, summary,
file-history-snapshot, turn_duration and api_error lines.

Measured in the same run, on the same files (the page cache warm):
  (a) bare: open each file, iterate its lines, `json.loads` every one (one process);
  (b) parse: `importers.parse_file` on every file, no database (what the parsers cost, one process);
  (c) import: `services.imports.import_path` of the whole tree into a fresh tenant of the bench database
      (ACE_DATA_DIR=.ace/bench), exactly as `ace_import` does — batches of up to 16 MB of log per
      transaction, every counter and roll-up, offsets and carries — with ACE_IMPORT_WORKERS worker
      processes (default: the CPU count, at most 4; `--workers N`) and with one process; the CPU both
      sides used (this process and its workers, every PostgreSQL process);
  (d) the database floor: the imported message rows, exported as binary COPY beforehand, copied into a
      scratch table made like the message table (indexes, constraints, foreign keys, the search-vector
      trigger deferred as in an import) and committed, over one connection and over one per core: what
      PostgreSQL alone needs to store them;
  (f) the search indexing the import leaves to the workers (migration 0008): `messages_index` over every
      imported message, as the indexing tasks run it — the time until all of it is found by keyword;
  (e) re-import: the same tree again (every file unchanged: a stat and no read).
(a), (b) and (c) with the default workers run `--repeats` times (3), interleaved, and each keeps its best
run: on a shared VM the same work takes ±20% from one minute to the next; every run's time is printed.
Target: (c) at no less than a third of (a) in MB/s. The run also prints a bound: (b) + (d)'s PostgreSQL
CPU spread over every core, the fastest any import storing these rows could be on this machine.

The signals `messages_append` sends after commit run as in production (strategy triggers, the embedding
and indexing tasks are queued), on a private in-memory broker so that no queued task reaches a worker of
the shared bench database. The tenants and their rows are deleted afterwards (--keep keeps the last one).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import resource
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import versus_ccusage  # noqa: E402

TARGET_RATIO = 1 / 3
TREE_ROOT = benchlib.PROJECT_DIR / ".ace" / "bench-imports"
VERSIONS = ["1.0.98", "2.0.14", "2.0.37", "2.1.3"]
MODELS = ["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-haiku-4-5-20251001"]
PROJECT_NAMES = [
    "billing-api",
    "web-frontend",
    "data-pipeline",
    "infra",
    "mobile-app",
    "search-service",
    "auth",
    "docs-site",
    "ml-training",
    "payments",
    "notifications",
    "admin-console",
    "etl-jobs",
    "cli-tools",
    "monorepo",
    "analytics",
    "gateway",
    "scheduler",
    "crawler",
    "chat-bot",
    "reporting",
    "devops-scripts",
    "sdk-python",
    "sdk-go",
]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200, help="size of the generated tree in MB (default 200)")
    parser.add_argument("--quick", action="store_true", help="a 20 MB tree")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--profile", action="store_true", help="profile the import (cProfile), print the top")
    parser.add_argument("--keep", action="store_true", help="keep the imported tenant (default: delete it)")
    parser.add_argument("--workers", type=int, default=0, help="import worker processes (default ACE_IMPORT_WORKERS)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of (a), (b) and the default import, the best kept (default 3)"
    )
    parser.add_argument(
        "--ccusage-only", action="store_true", help="only the comparison with ccusage (bench/versus_ccusage.py)"
    )
    parser.add_argument("--no-ccusage", action="store_true", help="skip the comparison with ccusage")
    parser.add_argument("--name", default=None, help="results file name (default imports or imports-quick)")
    parser.add_argument("--tree-dir", type=Path, default=TREE_ROOT, help=f"where trees are generated ({TREE_ROOT})")
    parser.add_argument(
        "--from-logs",
        type=Path,
        default=None,
        help="build the tree from these real Claude Code logs (a folder of .jsonl) instead of generating it: each "
        "copied as new sessions with fresh ids until the tree has --mb MB (see replicate_tree)",
    )
    args = parser.parse_args()
    if args.quick:
        args.mb = 20
    args.name = args.name or (
        ("imports-quick" if args.quick else "imports")
        + ("-real" if args.from_logs else "")
        + ("-ccusage" if args.ccusage_only else "")
    )
    return args


# -- the generated tree -----------------------------------------------------------------------------------


class SessionWriter:
    """Writes one Claude Code session file (and its sub-agent files) line by line."""

    def __init__(self, rng: random.Random, project_dir: Path, project: str, start: datetime, inline_sidechains: bool):
        self.rng = rng
        self.session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.project_dir = project_dir
        self.cwd = f"/home/dev/{project}"
        self.version = rng.choice(VERSIONS)
        self.branch = rng.choice(["main", "main", "develop", f"feature/{rng.randint(100, 999)}"])
        self.model = rng.choice(MODELS)
        self.now = start
        self.inline_sidechains = inline_sidechains
        self.path = project_dir / f"{self.session_id}.jsonl"
        self.lines: list[str] = []
        self.parent: str | None = None
        self.bytes = 0

    # ids and stamps
    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def stamp(self, seconds: float = 3.0) -> str:
        self.now += timedelta(seconds=seconds * (0.3 + self.rng.random()))
        return self.now.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def base(self, *, sidechain: bool = False, agent_id: str | None = None) -> dict:
        entry = {
            "parentUuid": self.parent,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": self.branch,
        }
        if agent_id:
            entry["agentId"] = agent_id
        return entry

    def emit(self, lines: list[str], entry: dict) -> None:
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        lines.append(text)
        self.bytes += len(text.encode()) + 1
        if "uuid" in entry:
            self.parent = entry["uuid"]

    # entries
    def user(self, lines, content, *, sidechain=False, agent_id=None, **extra) -> None:
        entry = self.base(sidechain=sidechain, agent_id=agent_id)
        entry.update(type="user", message={"role": "user", "content": content}, uuid=self.uuid(), **extra)
        entry["timestamp"] = self.stamp(20)
        self.emit(lines, entry)

    def response(self, lines, *, blocks: list[dict], sidechain=False, agent_id=None, final: bool) -> list[dict]:
        """One API response streamed as one line per content block, usage repeated with output growing."""
        rng = self.rng
        message_id = f"msg_01{uuid.UUID(int=rng.getrandbits(128)).hex[:22]}"
        request_id = f"req_011C{uuid.UUID(int=rng.getrandbits(128)).hex[:20]}" if rng.random() > 0.1 else None
        usage = {
            "input_tokens": rng.randint(3, 3000),
            "cache_creation_input_tokens": rng.choice([0, 0, rng.randint(200, 20000)]),
            "cache_read_input_tokens": rng.randint(5000, 150000),
            "output_tokens": 0,
            "service_tier": "standard",
        }
        total_output = rng.randint(20, 4000)
        model = "claude-haiku-4-5-20251001" if agent_id else self.model
        for index, block in enumerate(blocks):
            last = index == len(blocks) - 1
            usage = {**usage, "output_tokens": total_output if last else max(1, total_output * (index + 1) // 4)}
            stop = ("end_turn" if final else "tool_use") if last else None
            entry = self.base(sidechain=sidechain, agent_id=agent_id)
            entry.update(
                type="assistant",
                message={
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [block],
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
                uuid=self.uuid(),
                timestamp=self.stamp(2),
            )
            if request_id:
                entry["requestId"] = request_id
            self.emit(lines, entry)
        return blocks

    def tool_call(self) -> tuple[dict, str, dict]:
        """A tool_use block, the tool's output text and its `toolUseResult`."""
        rng = self.rng
        call_id = f"toolu_01{uuid.UUID(int=rng.getrandbits(128)).hex[:22]}"
        kind = rng.random()
        if kind < 0.45:
            folder, module = rng.choice(["api", "core", "jobs", "models"]), rng.choice(["views", "tasks", "utils"])
            path = f"{self.cwd}/src/{folder}/{module}.py"
            content = code_block(rng, rng.randint(40, 400))
            numbered = "\n".join(f"{i + 1:>6}→{line}" for i, line in enumerate(content.splitlines()))
            result = {
                "type": "text",
                "file": {"filePath": path, "content": content, "numLines": content.count("\n") + 1, "startLine": 1},
            }
            return {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}, numbered, result
        if kind < 0.8:
            command = rng.choice(["pytest -x -q", "git diff --stat", "ruff check .", "npm test", "ls -la src"])
            output = "\n".join(rng.choice(benchlib.CODE_LINES) for _ in range(rng.randint(5, 200)))
            result = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
            block = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
            return block, output, result
        if kind < 0.93:
            pattern = rng.choice(["def retry", "TODO", "transaction.atomic", "import requests"])
            files = [f"src/{rng.choice(['a', 'b', 'c'])}/{rng.randint(1, 99)}.py" for _ in range(rng.randint(1, 40))]
            output = "\n".join(files)
            result = {"mode": "files_with_matches", "filenames": files, "numFiles": len(files)}
            return {"type": "tool_use", "id": call_id, "name": "Grep", "input": {"pattern": pattern}}, output, result
        old = code_block(rng, rng.randint(3, 20))
        new = code_block(rng, rng.randint(3, 20))
        path = f"{self.cwd}/src/core/utils.py"
        block = {
            "type": "tool_use",
            "id": call_id,
            "name": "Edit",
            "input": {"file_path": path, "old_string": old, "new_string": new},
        }
        result = {
            "filePath": path,
            "oldString": old,
            "newString": new,
            "structuredPatch": [{"lines": new.splitlines()}],
        }
        return block, f"The file {path} has been updated.", result

    def tool_result(self, lines, call: dict, output: str, result: dict, *, sidechain=False, agent_id=None) -> None:
        content = [{"tool_use_id": call["id"], "type": "tool_result", "content": output}]
        self.user(lines, content, sidechain=sidechain, agent_id=agent_id, toolUseResult=result)

    def steps(self, lines, *, sidechain=False, agent_id=None, count: int) -> None:
        """Tool-using responses with their results, then the final answer."""
        rng = self.rng
        for _ in range(count):
            blocks = []
            if rng.random() < 0.5:
                blocks.append({"type": "thinking", "thinking": benchlib.prose(rng, 100, 1200), "signature": "EqQB"})
            if rng.random() < 0.6:
                blocks.append({"type": "text", "text": benchlib.prose(rng, 40, 400)})
            calls = [self.tool_call() for _ in range(2 if rng.random() < 0.15 else 1)]
            blocks += [call for call, _, _ in calls]
            self.response(lines, blocks=blocks, sidechain=sidechain, agent_id=agent_id, final=False)
            for call, output, result in calls:
                self.tool_result(lines, call, output, result, sidechain=sidechain, agent_id=agent_id)
        final = [{"type": "text", "text": benchlib.prose(rng, 100, 1500)}]
        self.response(lines, blocks=final, sidechain=sidechain, agent_id=agent_id, final=True)

    def subagent(self, lines) -> None:
        """A Task call: the sub-agent's own file under <session>/subagents/, then its result in the parent."""
        rng = self.rng
        agent_id = uuid.UUID(int=rng.getrandbits(128)).hex[:8]
        call_id = f"toolu_01{uuid.UUID(int=rng.getrandbits(128)).hex[:22]}"
        prompt = benchlib.prose(rng, 100, 600)
        call = {
            "type": "tool_use",
            "id": call_id,
            "name": "Task",
            "input": {"description": "explore", "prompt": prompt},
        }
        self.response(lines, blocks=[call], final=False)
        saved_parent, saved_now = self.parent, self.now
        agent_lines: list[str] = []
        self.parent = None
        self.user(agent_lines, prompt, sidechain=True, agent_id=agent_id)
        self.steps(agent_lines, sidechain=True, agent_id=agent_id, count=rng.randint(2, 8))
        folder = self.project_dir / self.session_id / "subagents"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"agent-{agent_id}.jsonl").write_text("\n".join(agent_lines) + "\n", encoding="utf-8")
        (folder / f"agent-{agent_id}.meta.json").write_text(
            json.dumps({"agentType": "general-purpose", "description": "explore", "toolUseId": call_id})
        )
        self.parent = saved_parent
        self.now = max(self.now, saved_now)
        answer = benchlib.prose(rng, 200, 2000)
        result = {"agentId": agent_id, "content": [{"type": "text", "text": answer}], "totalDurationMs": 61000}
        self.tool_result(lines, call, answer, result)

    def inline_sidechain(self, lines) -> None:
        """Older versions: the sub-agent's lines in the session file itself, flagged isSidechain."""
        saved = self.parent
        self.parent = None
        self.user(lines, benchlib.prose(self.rng, 80, 300), sidechain=True)
        self.steps(lines, sidechain=True, count=self.rng.randint(1, 3))
        self.parent = saved

    def round(self, lines) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.05:
            self.user(lines, "<command-name>/model</command-name>\n<command-message>model</command-message>")
            self.user(lines, "<local-command-stdout>Set model to sonnet</local-command-stdout>")
        elif roll < 0.08:
            self.user(lines, "Caveat: The messages below were generated by the user.", isMeta=True)
        self.user(lines, benchlib.prose(rng, 30, 800))
        if rng.random() < 0.03:
            entry = self.base()
            entry.update(type="system", subtype="api_error", level="error", uuid=self.uuid(), timestamp=self.stamp())
            entry.update(error={"status": 529, "message": "Overloaded"}, retryAttempt=1, retryInMs=1000)
            self.emit(lines, entry)
        if rng.random() < 0.08:
            self.subagent(lines)
        if self.inline_sidechains and rng.random() < 0.15:
            self.inline_sidechain(lines)
        self.steps(lines, count=rng.choice([0, 1, 2, 3, 4, 6, 8]))
        entry = self.base()
        entry.update(type="system", subtype="turn_duration", durationMs=rng.randint(2000, 300000))
        entry.update(isMeta=False, uuid=self.uuid(), timestamp=self.stamp())
        self.emit(lines, entry)

    def write(self, target_bytes: int) -> int:
        lines: list[str] = []
        if self.rng.random() < 0.3:
            leaf = self.uuid()
            self.emit(lines, {"type": "summary", "summary": benchlib.prose(self.rng, 20, 80), "leafUuid": leaf})
        snapshot = {"type": "file-history-snapshot", "messageId": self.uuid(), "snapshot": {"trackedFileBackups": {}}}
        self.emit(lines, snapshot)
        while self.bytes < target_bytes:
            self.round(lines)
        self.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return self.bytes


def code_block(rng: random.Random, lines: int) -> str:
    return "\n".join(rng.choice(benchlib.CODE_LINES) for _ in range(lines))


def generate_tree(root: Path, megabytes: int, seed: int) -> Path:
    """The tree under root/<size>mb (reused when its marker says it was made with these parameters)."""
    tree = root / f"{megabytes}mb"
    marker = tree / "generated.json"
    params = {"mb": megabytes, "seed": seed, "generator": 2}
    if marker.exists() and json.loads(marker.read_text()) == params:
        return tree
    if tree.exists():
        import shutil

        shutil.rmtree(tree)
    rng = random.Random(seed)
    target, written = megabytes * 1_000_000, 0
    start = datetime(2025, 9, 1, tzinfo=UTC)
    projects = tree / ".claude" / "projects"
    while written < target:
        project = rng.choice(PROJECT_NAMES)
        folder = projects / f"-home-dev-{project}"
        folder.mkdir(parents=True, exist_ok=True)
        size = int(rng.lognormvariate(13.3, 0.8))  # median ~0.6 MB, a few sessions of several MB
        session = SessionWriter(
            rng, folder, project, start + timedelta(hours=rng.randint(0, 24 * 60)), inline_sidechains=rng.random() < 0.3
        )
        written += session.write(min(size, target - written + 10_000))  # sub-agent files included
    marker.write_text(json.dumps(params))
    return tree


def replicate_tree(root: Path, logs: Path, megabytes: int) -> Path:
    """A Claude Code tree of about `megabytes` MB made of real logs (every .jsonl under `logs`): copy after copy of
    each, as sessions of their own, in 24 project folders, until the size is reached. A copy keeps every line as
    it was written but its ids: the session id, each line's `uuid` and `parentUuid` (so its chain holds), and
    `message.id` / `requestId` (so that no response counts in two sessions). Made once per size and set of logs
    (root/real-<size>mb), then reused."""
    sources = sorted(logs.rglob("*.jsonl"))
    if not sources:
        raise SystemExit(f"--from-logs {logs}: no .jsonl file there")
    tree = root / f"real-{megabytes}mb"
    marker = tree / "generated.json"
    params = {"mb": megabytes, "logs": [f"{p.name}:{p.stat().st_size}" for p in sources], "generator": 2}
    if marker.exists() and json.loads(marker.read_text()) == params:
        return tree
    if tree.exists():
        import shutil

        shutil.rmtree(tree)
    projects = tree / ".claude" / "projects"
    lines_of = [path.read_text(encoding="utf-8", errors="replace").splitlines() for path in sources]
    target, written, copy = megabytes * 1_000_000, 0, 0
    while written < target:
        for source_lines in lines_of:
            session, ids = str(uuid.UUID(int=copy + 1)), {}
            out = []
            for text in source_lines:
                try:
                    line = json.loads(text)
                except ValueError:
                    out.append(text)  # as written: a real log's broken line stays broken
                    continue
                if isinstance(line, dict):
                    _fresh_ids(line, session, ids, copy)
                out.append(json.dumps(line, ensure_ascii=False))
            folder = projects / f"-home-dev-{PROJECT_NAMES[copy % len(PROJECT_NAMES)]}"
            folder.mkdir(parents=True, exist_ok=True)
            data = ("\n".join(out) + "\n").encode()
            path = folder / f"{session}.jsonl"
            path.write_bytes(data)
            os.utime(path, (time.time() - 86_400, time.time() - 86_400))  # finished yesterday, as most of a tree is
            written += len(data)
            copy += 1
            if written >= target:
                break
    marker.write_text(json.dumps(params))
    return tree


def _fresh_ids(line: dict, session: str, ids: dict, copy: int) -> None:
    if "sessionId" in line:
        line["sessionId"] = session
    for key in ("uuid", "parentUuid", "leafUuid", "logicalParentUuid", "sourceToolAssistantUUID"):
        value = line.get(key)
        if isinstance(value, str):
            line[key] = ids.setdefault(value, str(uuid.uuid4()))
    if isinstance(line.get("requestId"), str):
        line["requestId"] = f"{line['requestId']}-{copy}"
    message = line.get("message")
    if isinstance(message, dict) and isinstance(message.get("id"), str):
        line["message"] = {**message, "id": f"{message['id']}-{copy}"}


def tree_files(tree: Path) -> list[Path]:
    return sorted(tree.rglob("*.jsonl"))


# -- the measurements ---------------------------------------------------------------------------------------


def bare_parse(files: list[Path]) -> dict:
    lines = size = 0
    loads = json.loads
    started = time.perf_counter()
    for path in files:
        with path.open("rb") as handle:
            for raw in handle:
                size += len(raw)
                loads(raw)
                lines += 1
    return {"seconds": time.perf_counter() - started, "bytes": size, "lines": lines}


def parser_only(files: list[Path]) -> dict:
    from ingest_app.importers import parse_file

    lines = messages = size = 0
    started = time.perf_counter()
    for path in files:
        result = parse_file(path, flush=True)
        lines += result.lines_read
        messages += len(result.messages)
        size += result.end_offset
    return {"seconds": time.perf_counter() - started, "bytes": size, "lines": lines, "messages": messages}


def cpu_seconds() -> dict:
    """CPU time used so far by this process and its finished children (the import's worker processes),
    and by every PostgreSQL process of the machine (from /proc)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    tick = os.sysconf("SC_CLK_TCK")
    python = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return {"python": python, "postgres": _postgres_ticks() / tick}


def _postgres_ticks() -> int:
    """Every PostgreSQL process's CPU ticks, its reaped children's included (a server's children's go to
    the server process, `cutime`/`cstime`, once it has reaped them). A backend reaped while the processes are
    read would be in neither reading (its connection closed just before: the import's workers', the
    floor's): the servers are read again after the others, and the whole read is made again until they have
    reaped nothing meanwhile."""

    def stat(pid: str) -> list[int] | None:
        try:
            with open(f"/proc/{pid}/comm") as handle:
                if not handle.read().startswith("postgres"):
                    return None
            with open(f"/proc/{pid}/stat") as handle:
                return [int(value) for value in handle.read().rsplit(")", 1)[1].split()[11:15]]
        except OSError:
            return None

    for _ in range(100):
        ticks = {pid: values for pid in os.listdir("/proc") if pid.isdigit() and (values := stat(pid)) is not None}
        reaped = {pid: values[2:] for pid, values in ticks.items() if values[2] or values[3]}
        if all((stat(pid) or [0, 0, -1, -1])[2:] == before for pid, before in reaped.items()):
            break
        time.sleep(0.01)
    return sum(sum(values) for values in ticks.values())


def import_tree(tenant, tree: Path, profile: bool, workers: int) -> tuple[dict, str | None]:
    from django.conf import settings

    from ingest_app.pipeline import import_path

    settings.ACE_IMPORT_WORKERS = workers
    profiler = cProfile.Profile() if profile else None
    before = cpu_seconds()
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    try:
        summary = import_path(tenant=tenant, path=tree)
    finally:
        if profiler:
            profiler.disable()
    seconds = time.perf_counter() - started
    after = cpu_seconds()
    report = None
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
        out.write("\n--- by own time ---\n")
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        report = out.getvalue()
    return {
        "seconds": seconds,
        "workers": workers,
        "python_cpu": after["python"] - before["python"],
        "postgres_cpu": after["postgres"] - before["postgres"],
        "bytes": summary.bytes_read,
        "lines": summary.lines_read,
        "messages": summary.messages,
        "requests": summary.requests,
        "sessions": summary.sessions_created,
        "files": summary.files_imported,
        "refused": summary.files_refused,
        "issues": summary.issues_total,
        "summary": summary.line(),
    }, report


def storage_floor(tenant, tree_bytes: int, connections: int = 1) -> dict:
    """What PostgreSQL alone needs to store the imported message rows: the rows, exported beforehand as binary
    COPY, copied into a scratch table made like the message table (columns, indexes, constraints, foreign
    keys, the search-vector trigger, deferred as in an import) and committed; the rows split over
    `connections` connections copying at once. No Python, no bookkeeping: no import can be faster."""
    import threading

    from django.db import connection

    from platform_kit.db import FlushingCopyWriter
    from sessions_app.models import Message

    columns = ", ".join(f'"{f.column}"' for f in Message._meta.concrete_fields if not f.generated)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'sessions_app_message'::regclass "
            "AND contype = 'f'"
        )
        foreign_keys = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = 'sessions_app_message'::regclass AND NOT tgisinternal"
        )
        triggers = [row[0].replace(" ON public.sessions_app_message ", " ON bench_imports_floor ") for row in cursor]
        query = f"SELECT {columns} FROM sessions_app_message WHERE tenant_id = %s"
        parts = []
        for n in range(connections):
            # binary COPY, as the import writes: the rows of connection n are every n-th in (session, seq)
            part = io.BytesIO()
            numbered = f"SELECT *, row_number() OVER (ORDER BY session_id, seq) AS n FROM ({query}) AS m"
            ordered = f"SELECT {columns} FROM ({numbered}) AS r WHERE n %% {connections} = {n} ORDER BY n"
            with cursor.cursor.copy(f"COPY ({ordered}) TO STDOUT (FORMAT BINARY)", [tenant.pk]) as copy:
                for data in copy:
                    part.write(data)
            parts.append(part.getvalue())
        cursor.execute(f"SELECT count(*) FROM ({query}) AS m", [tenant.pk])
        messages = cursor.fetchone()[0]
        cursor.execute("DROP TABLE IF EXISTS bench_imports_floor")
        cursor.execute("CREATE TABLE bench_imports_floor (LIKE sessions_app_message INCLUDING ALL)")
        for definition in foreign_keys:
            cursor.execute(f"ALTER TABLE bench_imports_floor ADD {definition}")
        for definition in triggers:
            cursor.execute(definition)

    def store(part: bytes) -> None:
        with benchlib.psycopg_connect() as conn, conn.cursor() as cursor:
            cursor.execute("SET ace.defer_search = 'on'")  # as an import does
            sql = f"COPY bench_imports_floor ({columns}) FROM STDIN (FORMAT BINARY)"
            with cursor.copy(sql, writer=FlushingCopyWriter(cursor)) as copy:
                for start in range(0, len(part), 1 << 20):
                    copy.write(part[start : start + (1 << 20)])
            conn.commit()  # the deferred foreign-key checks run here

    try:
        before = cpu_seconds()
        started = time.perf_counter()
        threads = [threading.Thread(target=store, args=(part,)) for part in parts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        postgres_cpu = cpu_seconds()["postgres"] - before["postgres"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bench_imports_floor")
    return {"seconds": seconds, "bytes": tree_bytes, "lines": 0, "messages": messages, "postgres_cpu": postgres_cpu}


def search_indexing(tenant, tree_bytes: int) -> dict:
    """What the import leaves to the workers: every imported message's search vector (sessions_app.search),
    built here in one process as the indexing tasks would, 200 messages per statement."""
    from sessions_app.models import Message
    from sessions_app.search import messages_index

    ids = list(Message.objects.filter(tenant=tenant, search_vector__isnull=True).values_list("pk", flat=True))
    started = time.perf_counter()
    done = messages_index(ids)
    return {"seconds": time.perf_counter() - started, "bytes": tree_bytes, "lines": 0, "messages": done}


def delete_tenant(tenant) -> None:
    """Remove the tenant and every row that names it or its sessions (foreign-key triggers off meanwhile:
    the ORM's cascade would load every message into memory)."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND column_name IN ('tenant_id', 'session_id')"
        )
        columns: dict[str, set[str]] = {}
        for table, column in cursor.fetchall():
            columns.setdefault(table, set()).add(column)
        cursor.execute("SET LOCAL session_replication_role = replica")
        for table, names in columns.items():
            if "session_id" in names and "tenant_id" not in names:
                cursor.execute(
                    f'DELETE FROM "{table}" WHERE session_id IN '
                    "(SELECT id FROM sessions_app_session WHERE tenant_id = %s)",
                    [tenant.pk],
                )
        for table, names in columns.items():
            if "tenant_id" in names:
                cursor.execute(f'DELETE FROM "{table}" WHERE tenant_id = %s', [tenant.pk])
        cursor.execute("DELETE FROM sessions_app_tenant WHERE id = %s", [tenant.pk])


def rate(part: dict) -> dict:
    seconds = part["seconds"]
    out = {
        "seconds": round(seconds, 2),
        "mb_per_s": round(part["bytes"] / 1e6 / seconds, 1),
        "lines_per_s": round(part["lines"] / seconds),
    }
    if "messages" in part:
        out["messages_per_s"] = round(part["messages"] / seconds)
    return out


def main():
    args = parse_args()
    # Queued tasks (embeddings, strategy runs, indexing) go to a private in-memory broker, never to a worker.
    os.environ.setdefault("CELERY_BROKER_URL", "memory://localhost/")
    benchlib.setup_django()
    from django.conf import settings

    from ingest_app.pipeline import PARALLEL_MIN_BYTES
    from sessions_app.services.apikeys import tenant_get_or_create

    started = time.perf_counter()
    if args.from_logs:
        tree = replicate_tree(args.tree_dir, args.from_logs, args.mb)
    else:
        tree = generate_tree(args.tree_dir, args.mb, args.seed)
    generated_in = time.perf_counter() - started
    files = tree_files(tree)
    size = sum(path.stat().st_size for path in files)
    subagents = sum(1 for path in files if "subagents" in path.parts)
    workers = args.workers or settings.ACE_IMPORT_WORKERS
    cores = len(os.sched_getaffinity(0))
    print(
        f"Tree: {tree} — {len(files):,} files ({subagents:,} sub-agent files), {size / 1e6:,.1f} MB "
        f"(ready in {generated_in:.1f} s). Database: {benchlib.database_description()}, {benchlib.server_version()}. "
        f"{cores} cores."
    )

    bare_parse(files)  # warm the page cache: every measurement reads from memory
    if args.ccusage_only:
        versus = versus_ccusage.compare(
            tree=tree, files=files, size=size, repeats=args.repeats, keep=args.keep, delete_tenant=delete_tenant
        )
        path = benchlib.write_results(args.name, {"machine": benchlib.machine(), "versus_ccusage": versus})
        print(f"\nResults written to {path}")
        return
    # This machine's speed drifts by ±20% within a minute: (a), (b) and the default import each run
    # `repeats` times, interleaved, and each keeps its best run (as timeit does).
    repeats = max(1, args.repeats)
    bares, parses, imports_default, profile = [], [], [], None
    for attempt in range(repeats):
        bares.append(bare_parse(files))
        parses.append(parser_only(files))
        last = attempt == repeats - 1
        tenant = tenant_get_or_create(name=f"bench-imports-{datetime.now(UTC):%Y%m%d%H%M%S}-{workers}-{attempt}")
        try:
            run, _ = import_tree(tenant, tree, False, workers)
            imports_default.append(run)
            if last:  # the stored rows are the same every time: measure the rest on the last run's
                floor = storage_floor(tenant, run["bytes"])
                floor_parallel = storage_floor(tenant, run["bytes"], connections=cores) if cores > 1 else None
                indexing = search_indexing(tenant, run["bytes"])
                reimport_started = time.perf_counter()
                again, _ = import_tree(tenant, tree, False, workers)
                again["seconds"] = time.perf_counter() - reimport_started
        finally:
            if not (args.keep and last):
                delete_tenant(tenant)
    bare = min(bares, key=lambda part: part["seconds"])
    parsed = min(parses, key=lambda part: part["seconds"])
    imported = min(imports_default, key=lambda part: part["seconds"])
    runs, serial = [imported], imported
    if workers != 1 or args.profile:
        tenant = tenant_get_or_create(name=f"bench-imports-{datetime.now(UTC):%Y%m%d%H%M%S}-1")
        try:
            serial, profile = import_tree(tenant, tree, args.profile, 1)
        finally:
            delete_tenant(tenant)
        runs.append(serial)

    rows = [["(a) read + json.loads, one process", *rate_row(bare)], ["(b) parse_file, one process", *rate_row(parsed)]]
    for run in runs:
        if run["workers"] == 1:
            label = "(c) import_path, one process (ACE_IMPORT_WORKERS=1)"
        elif size < PARALLEL_MIN_BYTES:
            label = f"(c) import_path, {run['workers']} workers asked, one used (< {PARALLEL_MIN_BYTES >> 20} MB)"
        else:
            label = f"(c) import_path, {run['workers']} worker processes"
        rows.append([label, *rate_row(run)])
    rows.append(["(d) database floor: the rows alone, 1 connection", *rate_row(floor)[:2], "", rate_row(floor)[3]])
    if floor_parallel:
        rows.append(
            [f"(d) the same over {cores} connections", *rate_row(floor_parallel)[:2], "", rate_row(floor_parallel)[3]]
        )
    rows.append(["(f) search indexing left to the workers", *rate_row(indexing)[:2], "", rate_row(indexing)[3]])
    benchlib.print_table(
        ["", "seconds", "MB/s", "lines/s", "messages/s"],
        rows,
        title=f"Claude Code tree import ((a), (b), (c) with {workers} workers: best of {repeats})",
    )
    spread = [
        (label, [part["seconds"] for part in parts])
        for label, parts in (("(a)", bares), ("(b)", parses), ("(c)", imports_default))
    ]
    print("runs: " + "; ".join(f"{label} " + " / ".join(f"{x:.2f}" for x in times) + " s" for label, times in spread))
    ratio = rate(imported)["mb_per_s"] / rate(bare)["mb_per_s"]
    verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
    print(f"\nimport / bare parse = {ratio:.3f} (target ≥ {TARGET_RATIO:.2f}: {verdict})")
    print(f"import: {imported['summary']}")
    for run in runs:
        busy = (run["python_cpu"] + run["postgres_cpu"]) / (run["seconds"] * cores)
        print(
            f"CPU, {run['workers']} worker(s): Python {run['python_cpu']:.2f} s, "
            f"PostgreSQL {run['postgres_cpu']:.2f} s in {run['seconds']:.2f} s on {cores} cores ({busy:.0%} busy)"
        )
    parse_cpu = parsed["seconds"]
    needed = parse_cpu + floor["postgres_cpu"]
    best = needed / cores
    print(
        f"bound: parsing ({parse_cpu:.2f} s) and storing the rows ({floor['postgres_cpu']:.2f} s of PostgreSQL CPU) "
        f"need {needed:.2f} CPU-seconds: on {cores} cores no import is faster than {best:.2f} s = "
        f"{size / 1e6 / best:.0f} MB/s = {size / 1e6 / best / rate(bare)['mb_per_s']:.2f} of the bare parse"
    )
    print(f"re-import of the unchanged tree: {again['seconds']:.2f} s — {again['summary']}")
    if parsed["messages"] != imported["messages"] or serial["summary"] != imported["summary"]:
        print(f"WARNING: parsers {parsed['messages']:,} messages; {serial['summary']} / {imported['summary']}")
    if profile:
        print("\n" + profile)
    versus = None
    if not args.no_ccusage:
        versus = versus_ccusage.compare(
            tree=tree, files=files, size=size, repeats=args.repeats, keep=args.keep, delete_tenant=delete_tenant
        )

    path = benchlib.write_results(
        args.name,
        {
            "machine": benchlib.machine(),
            "database": benchlib.server_version(),
            "tree": {"files": len(files), "subagent_files": subagents, "bytes": size, "lines": bare["lines"]},
            "bare_parse": rate(bare),
            "parse_file": rate(parsed),
            "imports": [
                {
                    **rate(run),
                    **{k: run[k] for k in ("workers", "messages", "requests", "sessions", "files")},
                    "python_cpu": round(run["python_cpu"], 2),
                    "postgres_cpu": round(run["postgres_cpu"], 2),
                }
                for run in runs
            ],
            "database_floor": {k: v for k, v in rate(floor).items() if k != "lines_per_s"},
            "database_floor_parallel": floor_parallel and rate(floor_parallel),
            "search_indexing": {k: v for k, v in rate(indexing).items() if k != "lines_per_s"},
            "reimport_seconds": round(again["seconds"], 2),
            "repeats": repeats,
            "runs_seconds": {label: [round(x, 2) for x in times] for label, times in spread},
            "import_to_bare_ratio": round(ratio, 3),
            "target_ratio": round(TARGET_RATIO, 3),
            "target_met": ratio >= TARGET_RATIO,
            "versus_ccusage": versus,
        },
    )
    print(f"\nResults written to {path}")


def rate_row(part: dict) -> list:
    r = rate(part)
    messages = f"{r['messages_per_s']:,}" if "messages_per_s" in r else ""
    return [f"{r['seconds']:.2f}", f"{r['mb_per_s']:.1f}", f"{r['lines_per_s']:,}", messages]


if __name__ == "__main__":
    main()
