"""Importing agent logs (Claude Code, Qwen Code, OpenClaw) from files on disk into sessions and messages.

`import_path` walks a file or a directory tree and imports every log file it has not fully read yet:

- Each file's tool is detected on its own (a directory may mix tools); a file no parser recognises is
  refused with the reason, and nothing is read from it.
- A file is read from where the last import stopped: `ImportedFile` keeps the byte offset and the parser's
  carry. A file that was replaced or truncated (its fingerprint or size no longer match) is read again
  from the start; the messages' external ids make that safe (nothing is stored twice).
- Files are read in batches of up to `CHUNK_BYTES` of new log and `BATCH_FILES` files (a bigger file over
  several batches). Each batch is one transaction: its files' rows locked, their messages stored with one
  call of the message service (`messages_append_to_sessions`: every counter and roll-up maintained the
  usual way, one statement per table for all the batch's sessions), and the new offsets and carries, all
  commit together, so a crash loses or repeats nothing.
- A big import (more than `PARALLEL_MIN_BYTES`) runs in `ACE_IMPORT_WORKERS` forked processes, each taking
  whole groups (a session's file and its sub-agent files), each with its own database connection; the
  collector's too, from inside a Celery pool process.
- The messages of a sub-agent file (and sidechains) go to the session that spawned them, flagged in their
  metadata (see docs/accounting.md).

The CLI (`manage.py ace_import`), the upload endpoint (`POST /api/v1/imports/`) and the collector
(`sessions_app.tasks.collect_imports`, over every enabled `ImportSource`) all call this module.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import os
import pickle
import pwd
import queue
import re
import sys
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import billiard
from django.conf import settings
from django.db import OperationalError, connection, connections, transaction
from django.utils import timezone
from psycopg.errors import DeadlockDetected, SerializationFailure

from platform_kit.db import update_rows
from sessions_app.importers import ParsedSession, ParseIssue, ParseResult, describe_layout, parse_file
from sessions_app.importers.detect import explain_detection
from sessions_app.importers.jsonl import read_head
from sessions_app.models import ImportedFile, ImportSource, Message, Session, Tenant
from sessions_app.schema import TOKEN_FIELDS
from sessions_app.services.messages import messages_append_to_sessions

CHUNK_BYTES = 16 * 1024 * 1024  # log bytes read per transaction (a batch of files, or part of a big one)
BATCH_FILES = 200  # files per transaction at most
RETRIES = 3  # a batch whose transaction met a deadlock is read again
PARALLEL_MIN_BYTES = 32 * 1024 * 1024  # less to read is quicker in one process than to start others
RECORD_FIELDS = [
    "tool", "session", "agent_session_id", "offset", "carry", "pending", "head_hash", "size", "mtime", "device",
    "inode", "lines_read", "messages_imported", "issues", "last_error", "source", "first_imported_at",
    "last_imported_at",
]  # fmt: skip
FINGERPRINT_BYTES = 4096
MAX_ISSUES = 200  # issues kept in a summary (all are counted)
UNKNOWN_USER = "unknown"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HOME = re.compile(r"^(?:/home|/Users|[A-Za-z]:[\\/]+Users)[\\/]+([^\\/]+)")


class ImportPathError(Exception):
    """The path to import does not exist or cannot be read."""


@dataclass
class FileResult:
    path: str
    status: str  # imported | unchanged | refused
    tool: str = ""
    session_id: str | None = None
    messages: int = 0
    lines_read: int = 0
    reason: str = ""

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "status": self.status,
            "tool": self.tool,
            "session": self.session_id,
            "messages": self.messages,
            "lines_read": self.lines_read,
            "reason": self.reason,
        }


@dataclass
class ImportSummary:
    files_seen: int = 0
    files_imported: int = 0
    files_unchanged: int = 0
    files_refused: int = 0
    sessions_created: int = 0
    messages: int = 0
    requests: int = 0
    lines_read: int = 0
    bytes_read: int = 0
    tokens: Counter = field(default_factory=Counter)
    issues: list[ParseIssue] = field(default_factory=list)
    issues_total: int = 0
    files: list[FileResult] = field(default_factory=list)

    def add_issues(self, issues: list[ParseIssue]) -> None:
        self.issues_total += len(issues)
        room = MAX_ISSUES - len(self.issues)
        if room > 0:
            self.issues.extend(issues[:room])

    def add_refused(self, path: str, reason: str) -> None:
        self.add_issues([ParseIssue(path, 0, reason)])
        self.add_file(FileResult(path, "refused", reason=reason))

    def add_file(self, result: FileResult) -> None:
        self.files_seen += 1
        self.files.append(result)
        if result.status == "imported":
            self.files_imported += 1
        elif result.status == "unchanged":
            self.files_unchanged += 1
        else:
            self.files_refused += 1

    def line(self) -> str:
        """One parseable line: `imported 8 files (3 unchanged, 1 refused): 2 new sessions, 1,234 messages, …`."""
        return (
            f"imported {self.files_imported:,} files ({self.files_unchanged:,} unchanged, "
            f"{self.files_refused:,} refused): {self.sessions_created:,} new sessions, {self.messages:,} messages, "
            f"{self.requests:,} requests, {self.tokens['total_tokens']:,} tokens, {self.issues_total:,} issues"
        )

    def as_dict(self, *, path_name=str) -> dict:
        """JSON-ready; `path_name` turns a server path into what the caller should see."""
        return {
            "summary": self.line(),
            "files_seen": self.files_seen,
            "files_imported": self.files_imported,
            "files_unchanged": self.files_unchanged,
            "files_refused": self.files_refused,
            "sessions_created": self.sessions_created,
            "messages": self.messages,
            "requests": self.requests,
            **{name: self.tokens[name] for name in TOKEN_FIELDS},
            "lines_read": self.lines_read,
            "issues_total": self.issues_total,
            "issues": [
                {"path": path_name(i.path), "line": i.line, "level": i.level, "message": i.message} for i in self.issues
            ],
            "files": [{**f.as_dict(), "path": path_name(f.path)} for f in self.files],
        }


def format_issue(issue: ParseIssue, *, path_name=str) -> str:
    return f"{path_name(issue.path)}:{issue.line}: {issue.level}: {issue.message}"


# -- walking ------------------------------------------------------------------------------------------


def log_files(root: Path) -> list[Path]:
    """The `.jsonl` files under `root` (or `root` itself), sessions before sub-agent files so that a
    sub-agent can find the round of its parent that spawned it."""
    if root.is_file():
        return [root]
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        found.extend(Path(directory) / name for name in names if name.endswith(".jsonl"))
    return sorted(found, key=lambda path: (describe_layout(path).is_subagent, str(path)))


def import_path(
    *,
    tenant: Tenant,
    path: str | Path,
    tool: str = "auto",
    user_id: str | None = None,
    source: ImportSource | None = None,
    uploaded: bool = False,
) -> ImportSummary:
    """Import a log file or every log file under a directory. Safe to run again: only what is new is read.

    `tool` forces a format ("auto" detects it per file). `user_id` attributes new sessions to a user;
    without it, a session belongs to the user the log names (an OpenClaw Feishu sender), else the user
    whose home directory the agent ran in (`/home/<user>/…`, `/Users/<user>/…` in the log's cwd), else
    the owner of the file (not for uploads), else "unknown". `uploaded` marks files received through the
    API, which have no meaningful owner. Raises ImportPathError when `path` does not exist."""
    root = Path(path).expanduser().absolute()
    if not root.exists():
        raise ImportPathError(f"{root}: no such file or directory")
    try:
        files = log_files(root)
    except OSError as error:
        raise ImportPathError(f"{root}: {error.strerror or error}") from error
    if root.is_file():
        known = ImportedFile.objects.filter(tenant=tenant, path=str(root))
    else:
        known = ImportedFile.objects.filter(tenant=tenant, path__startswith=str(root).rstrip(os.sep) + os.sep)
    return _import_files(
        tenant=tenant, files=files, known=known, tool=tool, user_id=user_id, source=source, uploaded=uploaded
    )


def import_files(*, tenant: Tenant, paths: list[Path], tool: str = "auto", user_id: str | None = None) -> ImportSummary:
    """Import files received through the API (their owner on this server says nothing about the user),
    sessions before sub-agent files."""
    files = sorted((Path(p).absolute() for p in paths), key=lambda p: (describe_layout(p).is_subagent, str(p)))
    known = ImportedFile.objects.filter(tenant=tenant, path__in=[str(p) for p in files])
    return _import_files(tenant=tenant, files=files, known=known, tool=tool, user_id=user_id, uploaded=True)


def _import_files(*, tenant, files, known, tool, user_id, source=None, uploaded=False) -> ImportSummary:
    run = _ImportRun(tenant=tenant, tool=None if tool in ("", "auto", None) else tool, user_id=user_id or "")
    run.source, run.uploaded = source, uploaded
    run.records = {record.path: record for record in known}
    run.load_sessions(files)
    return run.import_all(files, workers=settings.ACE_IMPORT_WORKERS)


def work_plan(files: list[Path]) -> list[list[list[Path]]]:
    """The files in phases of groups. A group is one session's file and its sub-agent files, in order (one
    worker reads a group, so a sub-agent finds the round of its parent that spawned it, and a session's
    messages keep their order); groups are largest first, so workers finish together. Sub-agent files
    whose path does not name their parent come in a second phase, after every session file."""
    groups: dict[tuple, list[Path]] = {}
    orphans: dict[tuple, list[Path]] = {}
    for path in files:
        layout = describe_layout(path)
        if layout.is_subagent and not layout.parent_session_id:
            orphans.setdefault((layout.tool, str(path.parent)), []).append(path)
        else:
            groups.setdefault(_session_key(layout), []).append(path)
    for paths in groups.values():
        paths.sort(key=lambda path: (describe_layout(path).is_subagent, str(path)))
    phases = [sorted(groups.values(), key=_group_size, reverse=True)]
    if orphans:
        phases.append(sorted(orphans.values(), key=_group_size, reverse=True))
    return phases


@contextlib.contextmanager
def _fewer_collections():
    """An import makes hundreds of thousands of small dicts and lists that live until their batch is stored,
    and few reference cycles: at Python's default thresholds the cyclic garbage collector scans them again
    and again (a quarter of the parsing time). Collections are rarer for the import's duration."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 100_000), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _parallel_possible() -> bool:
    """Worker processes are forked (Linux), and not inside the caller's transaction (they could not use it).
    They are billiard's processes (Celery's own fork of multiprocessing): a Celery pool process, where the
    collector scans, is daemonic, and billiard lets a daemonic process have children where multiprocessing
    refuses."""
    return (
        sys.platform.startswith("linux")
        and "fork" in billiard.get_all_start_methods()
        and not any(conn.in_atomic_block for conn in connections.all(initialized_only=True))
    )


def _session_key(layout) -> tuple:
    """Which session a file's messages go to, as far as its path tells."""
    return (layout.tool, layout.project_dir, layout.parent_session_id if layout.is_subagent else layout.file_key)


def _group_size(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def file_refusal(path: Path, *, tool: str | None = None) -> ParseIssue | None:
    """Why a file would not be imported (not a recognised agent log, or not the `tool` asked for), or None.

    An empty file, or one whose first line is still being written, is not refused: there is nothing to
    judge yet, and the next import reads it."""
    tool = None if tool in ("", "auto") else tool
    head = read_head(path)
    if not any(line.strip() for line in head):
        return None
    detection = explain_detection(path, head)
    if detection.tool is None:
        if tool is None:
            return ParseIssue(str(path), 0, f"not a recognised agent log: {detection.reason}")
        return None  # forced: the parser reports what it cannot read, line by line
    if tool is not None and detection.tool != tool:
        return ParseIssue(str(path), 0, f"not a {tool} log: it looks like {detection.tool} ({detection.reason})")
    return None


def import_source_scan(*, source: ImportSource) -> ImportSummary | None:
    """Scan one import source; None when another scan of it is still running (the collector skips it)."""
    lock_key = int.from_bytes(
        hashlib.sha256(f"ace-import-source:{source.pk}".encode()).digest()[:8], "big", signed=True
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock_key])
        if not cursor.fetchone()[0]:
            return None
    try:
        try:
            summary = import_path(
                tenant=source.tenant, path=source.path, tool=source.tool, user_id=source.user_id, source=source
            )
        except ImportPathError as error:
            summary = ImportSummary()
            summary.add_issues([ParseIssue(source.path, 0, f"not scanned: {error}")])
        report = summary.as_dict()
        report["files"] = [f for f in report["files"] if f["status"] != "unchanged"][:MAX_ISSUES]
        ImportSource.objects.filter(pk=source.pk).update(last_scan_at=timezone.now(), last_summary=report)
        return summary
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock_key])


# -- one file -----------------------------------------------------------------------------------------


def _mtime(stat: os.stat_result) -> datetime:
    return _EPOCH + timedelta(microseconds=stat.st_mtime_ns // 1000)


def fingerprint(path: Path, offset: int) -> str:
    """SHA-256 of the first and the last 4 KB before `offset`: if the bytes already imported changed, the
    file was replaced (or rewritten) and must be read again from the start."""
    if offset <= 0:
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        digest.update(handle.read(min(offset, FINGERPRINT_BYTES)))
        tail_start = max(offset - FINGERPRINT_BYTES, FINGERPRINT_BYTES)
        if tail_start < offset:
            handle.seek(tail_start)
            digest.update(handle.read(offset - tail_start))
    return digest.hexdigest()


def _error_summary(issues: list[ParseIssue]) -> str:
    errors = [issue for issue in issues if issue.level == "error"]
    if not errors:
        return ""
    first = "; ".join(f"line {issue.line}: {issue.message}" for issue in errors[:3])
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"{len(errors)} line(s) skipped: {first}{more}"[:2000]


def user_from_cwd(cwd: str) -> str:
    match = _HOME.match(cwd or "")
    return match.group(1) if match else ""


def _file_owner(stat: os.stat_result) -> str:
    try:
        return pwd.getpwuid(stat.st_uid).pw_name
    except (KeyError, AttributeError):
        return ""


_NAME_RANK = {"": 0, "fallback": 1, "prompt": 2, "summary": 3, "title": 4}


@dataclass
class _FileReport:
    """What the import did with one file, over all the transactions that read it."""

    result: FileResult
    issues: list[ParseIssue] = field(default_factory=list)
    lines_read: int = 0
    bytes_read: int = 0


@dataclass(eq=False)
class _Unit:
    """One file's part in a batch: what was read from it and where its messages go."""

    path: Path
    stat: os.stat_result
    idle: bool
    report: _FileReport
    record: ImportedFile | None = None
    created_record: bool = False
    issues: list[ParseIssue] = field(default_factory=list)
    parsed: ParseResult | None = None
    start_offset: int = 0
    session: Session | None = None
    refused: str = ""
    created: int = 0

    @property
    def has_messages(self) -> bool:
        return bool(self.parsed is not None and self.parsed.messages)


class _ImportRun:
    """One import: the files' rows and sessions loaded once, then the files read in batches (one transaction
    each: up to CHUNK_BYTES of log, up to BATCH_FILES files) by one or more workers."""

    def __init__(self, *, tenant: Tenant, tool: str | None, user_id: str):
        self.tenant = tenant
        self.tool = tool
        self.user_id = user_id
        self.source: ImportSource | None = None
        self.uploaded = False
        self.records: dict[str, ImportedFile] = {}
        self.idle = timedelta(seconds=settings.ACE_IMPORT_IDLE_SECONDS)
        # Sessions by (tool, agent session id), and the ids known to have none yet: looked up once per run.
        self.sessions: dict[tuple[str, str], Session] = {}
        self.absent: set[str] = set()
        # The rounds in which a session spawned its sub-agents, from the files read in this run:
        # {(tool, agent session id, "agent" | "tool_use", id): conversation reference or None}.
        self.spawns: dict[tuple, str | None] = {}
        self.batch_sessions: list[tuple[str, str]] = []  # made in the current batch's transaction
        self.reports: dict[Path, _FileReport] = {}
        self.totals: list[ImportSummary] = []

    # -- the run -----------------------------------------------------------------------------------------
    def load_sessions(self, files: list[Path]) -> None:
        """The tenant's sessions that the files' paths name, in one query (a file's own content may name
        another; that one is looked up when it is met)."""
        ids = set()
        for path in files:
            layout = describe_layout(path)
            ids.add((layout.parent_session_id if layout.is_subagent else layout.file_key)[:255])
        ids.discard("")
        if not ids:
            return
        found = Session.objects.filter(tenant=self.tenant, agent_session_id__in=ids).order_by("created_at")
        for session in found:
            self.sessions.setdefault((session.tool, session.agent_session_id), session)
        self.absent = ids - {key[1] for key in self.sessions}

    def import_all(self, files: list[Path], *, workers: int) -> ImportSummary:
        """Import every file; the summary lists them in the order given.

        With `workers` > 1, enough to read (PARALLEL_MIN_BYTES) and no transaction of the caller's open, that
        many processes (forked: they start at once, with this process's settings) read groups of files side
        by side, each with its own database connection — parsing is Python, so threads would take turns."""
        with _fewer_collections():
            for phase in work_plan(files):
                if self._parallel(phase, workers):
                    self._in_processes(phase, min(workers, len(phase)))
                else:
                    self._work(functools.partial(next, iter(phase), None))
        summary = ImportSummary()
        for path in files:
            report = self.reports.get(path)
            if report is None:
                continue
            summary.add_issues(report.issues)
            summary.add_file(report.result)
            summary.lines_read += report.lines_read
            summary.bytes_read += report.bytes_read
        for totals in self.totals:
            summary.sessions_created += totals.sessions_created
            summary.messages += totals.messages
            summary.requests += totals.requests
            summary.tokens.update(totals.tokens)
        return summary

    def _parallel(self, groups: list[list[Path]], workers: int) -> bool:
        return workers > 1 and len(groups) > 1 and _parallel_possible() and self._to_read(groups) >= PARALLEL_MIN_BYTES

    def _to_read(self, groups: list[list[Path]]) -> int:
        """About how many bytes the groups have that were not imported yet."""
        total = 0
        for path in (path for group in groups for path in group):
            record = self.records.get(str(path))
            try:
                total += max(path.stat().st_size - (record.offset if record else 0), 0)
            except OSError:
                pass
        return total

    def _in_processes(self, groups: list[list[Path]], workers: int) -> None:
        context = billiard.get_context("fork")
        tasks, results, stop = context.Queue(), context.Queue(), context.Event()
        for group in groups:
            tasks.put(group)
        for _ in range(workers):
            tasks.put(None)  # one "no more" for each worker
        processes = [
            context.Process(target=self._worker, args=(tasks, results, stop), name=f"ace-import-{n}", daemon=True)
            for n in range(workers)
        ]
        for process in processes:
            process.start()
        answers = []
        try:
            while len(answers) < workers:
                try:
                    answers.append(results.get(timeout=1))
                except queue.Empty:
                    if not any(process.is_alive() for process in processes) and results.empty():
                        break
                else:
                    if answers[-1][0] == "failed":
                        stop.set()  # the others finish the batch they are in, then stop
        except BaseException:  # e.g. a task's time limit: the workers stop after their batch
            stop.set()
            raise
        finally:
            for process in processes:
                process.join()
        failed = None
        for outcome, *payload in answers:
            if outcome == "done":
                reports, totals = payload
                self.reports.update(reports)
                self.totals.append(totals)
            elif failed is None:
                failed = payload[0]
        self.absent = set()  # the workers made sessions this process has not seen
        if failed is not None:
            raise failed
        if len(answers) < workers:
            raise RuntimeError("an import worker process ended without a result (killed?); import again to go on")

    def _worker(self, tasks, results, stop) -> None:
        """One import process: groups of files from `tasks` until "no more", its reports to `results`. It
        stops after its current batch when told to, or when the process that started it is gone (killed
        by a time limit, say): what it committed stays, the next import reads the rest."""
        gc.freeze()  # what it inherited is never collected here: no scans of it, no copies of its pages
        for conn in connections.all(initialized_only=True):
            # The parent's connections stay the parent's (a scan holds its source's lock on one): this
            # process drops them unclosed (psycopg never ends a connection another process opened) and opens
            # its own.
            conn.connection = None
        parent = os.getppid()
        self.reports, self.totals = {}, []

        def stopped() -> bool:
            return stop.is_set() or os.getppid() != parent

        finished = False

        def next_group():
            nonlocal finished
            if finished or stopped():
                return None
            group = tasks.get()
            finished = group is None
            return group

        try:
            self._work(next_group, stopped=stopped)
            results.put(("done", self.reports, self.totals[0]))
        except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises it
            try:
                pickle.dumps(error)
            except Exception:  # noqa: BLE001 - an exception that cannot travel: its text does
                error = RuntimeError("".join(traceback.format_exception(error)))
            results.put(("failed", error))
        finally:
            connections.close_all()
            if os.getppid() != parent:
                results.cancel_join_thread()  # nobody will read it: exit without waiting to send

    def _work(self, next_group, stopped=lambda: False) -> None:
        """Take groups of files and import them, batch after batch, until none is left (or `stopped()`)."""
        totals = ImportSummary()
        self.totals.append(totals)
        pending: list[Path] = []  # files of the groups taken, in order; a file read in part stays first
        while not stopped():
            batch = self._plan(pending, next_group)
            if not batch:
                return
            done = self._import_batch(batch, totals)
            pending[:0] = [unit.path for unit in batch if unit not in done]

    def _plan(self, pending: list[Path], next_group) -> list[_Unit]:
        """The next batch: files with something new to read, up to CHUNK_BYTES of them (a bigger file is read
        in part) and BATCH_FILES files. Unchanged and refused files are reported on the way."""
        batch: list[_Unit] = []
        budget = CHUNK_BYTES
        while budget > 0 and len(batch) < BATCH_FILES:
            if not pending:
                group = next_group()
                if group is None:
                    break
                pending.extend(group)
            path = pending.pop(0)
            unit = self._unit(path)
            if unit is not None:
                batch.append(unit)
                budget -= max(unit.stat.st_size - (unit.record.offset if unit.record else 0), 1)
        return batch

    def _unit(self, path: Path) -> _Unit | None:
        """A file to read in the next batch, or None when there is nothing to read (reported as such)."""
        report = self.reports.get(path)
        if report is None:
            report = self.reports[path] = _FileReport(FileResult(str(path), "unchanged"))
        record = self.records.get(str(path))
        try:
            stat = path.stat()
        except OSError as error:
            self._refuse(report, f"cannot read the file: {error.strerror or error}")
            return None
        mtime = _mtime(stat)
        idle = timezone.now() - mtime >= self.idle
        if (
            record is not None
            and record.tool
            and record.size == stat.st_size
            and record.mtime == mtime
            and not (record.pending and idle)
        ):
            report.result.tool, report.result.session_id = record.tool, _str(record.session_id)
            return None
        if record is None or not record.tool:
            refusal = file_refusal(path, tool=self.tool)
            if refusal:
                self._refuse(report, refusal.message)
                return None
        return _Unit(path=path, stat=stat, idle=idle, report=report, record=record)

    @staticmethod
    def _refuse(report: _FileReport, reason: str) -> None:
        report.result.status, report.result.reason = "refused", reason
        report.issues.append(ParseIssue(report.result.path, 0, reason))

    # -- a batch -----------------------------------------------------------------------------------------
    def _import_batch(self, units: list[_Unit], totals: ImportSummary) -> list[_Unit]:
        """Read and store one batch in one transaction; the units whose file was read to the end."""
        for attempt in range(1, RETRIES + 1):
            try:
                with transaction.atomic():
                    stored = self._store_batch(units)
                break
            except OperationalError as error:
                # Another writer took the same rows in another order: the batch is read again.
                if attempt == RETRIES or not isinstance(error.__cause__, DeadlockDetected | SerializationFailure):
                    raise
                for key in self.batch_sessions:  # made by the rolled-back transaction: gone
                    self.sessions.pop(key, None)
                for unit in units:
                    unit.issues, unit.parsed, unit.session, unit.refused, unit.created = [], None, None, "", 0
        done = []
        for unit in units:
            report, parsed = unit.report, unit.parsed
            report.issues.extend(unit.issues)
            if unit.refused:
                self._refuse(report, unit.refused)
                done.append(unit)
                continue
            if parsed is None or parsed.tool is None:  # not recognisable (yet): nothing read, nothing stored
                if any(issue.level == "error" for issue in unit.issues):
                    report.result.status = "refused"
                report.result.reason = "; ".join(issue.message for issue in unit.issues if issue.line == 0)
                done.append(unit)
                continue
            self.records[str(unit.path)] = unit.record
            report.lines_read += parsed.lines_read
            report.bytes_read += parsed.end_offset - unit.start_offset
            report.result.tool = parsed.tool
            report.result.session_id = _str(unit.record.session_id)
            report.result.lines_read += parsed.lines_read
            report.result.messages += unit.created
            if parsed.lines_read or unit.created:
                report.result.status = "imported"
            if parsed.complete:
                done.append(unit)
        totals.sessions_created += stored["sessions_created"]
        totals.messages += stored["messages"]
        totals.requests += stored["counters"].get("requests", 0)
        for name in TOKEN_FIELDS:
            totals.tokens[name] += stored["counters"].get(name, 0)
        return done

    def _store_batch(self, units: list[_Unit]) -> dict:
        """Inside the batch's transaction: lock the files' rows, parse each file from its offset, find or
        create the sessions, store every message with one append, and save the files' offsets and carries."""
        self.batch_sessions = []
        self._lock_records(units)
        budget = CHUNK_BYTES
        for unit in units:
            self._parse(unit, max_bytes=max(budget, 1))
            if unit.parsed is not None:
                budget -= unit.parsed.end_offset - unit.start_offset
        readable = [unit for unit in units if unit.parsed is not None and unit.parsed.tool and not unit.refused]
        sessions_created = self._resolve_sessions(readable)
        appends: dict[uuid.UUID, tuple[Session, list[dict], list[_Unit]]] = {}
        for unit in readable:
            if unit.session is not None and unit.has_messages:
                _, items, members = appends.setdefault(unit.session.pk, (unit.session, [], []))
                items.extend(_ingest_item(message) for message in unit.parsed.messages)
                members.append(unit)
        results = messages_append_to_sessions(
            appends=[(session, items) for session, items, _ in appends.values()], index_later=True
        )
        counters: Counter = Counter()
        messages = 0
        for (_, _, members), result in zip(appends.values(), results, strict=True):
            start = 0
            for unit in members:
                count = len(unit.parsed.messages)
                unit.created = sum(result.new[start : start + count])
                start += count
            counters.update(result.counters)
            messages += result.created
        self._save_records(units)
        return {"sessions_created": sessions_created, "messages": messages, "counters": counters}

    def _lock_records(self, units: list[_Unit]) -> None:
        """Every file's row, locked for the batch (a concurrent import of the same file waits, then goes on
        from where this one stopped); rows for files met for the first time are made first."""
        new = [
            ImportedFile(tenant=self.tenant, path=str(unit.path), source=self.source, tool=self.tool or "")
            for unit in units
            if str(unit.path) not in self.records  # committed knowledge: a retried batch makes them again
        ]
        made = {record.pk for record in new}
        if new:
            ImportedFile.objects.bulk_create(new, ignore_conflicts=True)
        rows = ImportedFile.objects.select_for_update().filter(
            tenant=self.tenant, path__in=[str(unit.path) for unit in units]
        )
        by_path = {record.path: record for record in rows.order_by("pk")}
        for unit in units:
            unit.record = by_path[str(unit.path)]
            unit.created_record = unit.record.pk in made

    def _parse(self, unit: _Unit, *, max_bytes: int) -> None:
        record, path = unit.record, unit.path
        try:
            if record.offset:
                restarted = self._restart_if_replaced(path, record)
                if restarted:
                    unit.issues.append(restarted)
            unit.start_offset = record.offset
            carry = record.carry or None
            if record.offset == 0 and not carry:
                carry = self._subagent_seed(path)
            unit.parsed = parse_file(
                path, start_offset=record.offset, tool=record.tool or self.tool, carry=carry, flush=unit.idle,
                max_bytes=max_bytes,
            )  # fmt: skip
        except OSError as error:  # unreadable, or gone while being read: the next import tries again
            unit.refused = f"cannot read the file: {error.strerror or error}"
            return
        unit.issues.extend(unit.parsed.issues)
        if unit.parsed.tool:
            self._note_spawns(unit)  # for this file's sub-agents, read next

    @staticmethod
    def _restart_if_replaced(path: Path, record: ImportedFile) -> ParseIssue | None:
        """Reset the row to offset 0 when the file was truncated or replaced since the last import."""
        size = path.stat().st_size
        if size < record.offset:
            why = f"the file is shorter ({size} bytes) than what was imported ({record.offset} bytes)"
        elif fingerprint(path, record.offset) != record.head_hash:
            why = "the bytes imported before have changed"
        else:
            return None
        record.offset, record.carry, record.pending = 0, {}, 0
        message = f"{why}: it was truncated or replaced, so it is read again from the start"
        return ParseIssue(str(path), 0, message + " (messages already imported are kept once)", "warning")

    def _save_records(self, units: list[_Unit]) -> None:
        now = timezone.now()
        saved, dropped = [], []
        for unit in units:
            record, parsed = unit.record, unit.parsed
            if unit.refused or parsed is None or parsed.tool is None:
                if unit.created_record:
                    dropped.append(record.pk)  # as if never met: nothing was read from it
                continue
            record.tool = parsed.tool
            record.offset = parsed.end_offset
            record.carry = parsed.carry
            record.pending = parsed.pending
            record.head_hash = fingerprint(unit.path, parsed.end_offset)
            if parsed.complete:  # the stat says "nothing new" to the next import once the file was read through
                record.size, record.mtime = unit.stat.st_size, _mtime(unit.stat)
            record.device, record.inode = unit.stat.st_dev, unit.stat.st_ino
            record.lines_read += parsed.lines_read
            record.messages_imported += unit.created
            record.issues += len(unit.issues)
            if parsed.lines_read or unit.issues:
                record.last_error = _error_summary(unit.issues)
            if self.source is not None and record.source_id is None:
                record.source = self.source
            record.first_imported_at = record.first_imported_at or now
            record.last_imported_at = now
            saved.append(record)
        update_rows(ImportedFile, saved, RECORD_FIELDS)
        if dropped:
            ImportedFile.objects.filter(pk__in=dropped).delete()

    # -- sub-agents --------------------------------------------------------------------------------------
    def _subagent_seed(self, path: Path) -> dict | None:
        """A sub-agent file joins the round of its parent that spawned it (docs/accounting.md, Sub-agents)."""
        layout = describe_layout(path)
        if not layout.is_subagent or not layout.parent_session_id or not layout.agent_id:
            return None
        tool = layout.tool or self.tool
        if not tool:
            return None
        spawn = self._spawn_round(tool, layout.parent_session_id, "agent", layout.agent_id)
        if not spawn:
            meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
            try:
                tool_use_id = json.loads(meta.read_text(encoding="utf-8")).get("toolUseId")
            except (OSError, ValueError, AttributeError):
                tool_use_id = None
            if isinstance(tool_use_id, str) and tool_use_id:
                spawn = self._spawn_round(tool, layout.parent_session_id, "tool_use", tool_use_id)
        return {"conversation": spawn} if spawn else None

    def _spawn_round(self, tool: str, parent_id: str, kind: str, value: str) -> str | None:
        """The conversation reference of the parent's round that spawned an agent: from the parent's file as
        this run read it, else from the database (the parent was imported before)."""
        spawn = self.spawns.get((tool, parent_id[:255], kind, value))
        if spawn:
            return spawn
        parent = self._find_session(tool, parent_id)
        if parent is None:
            return None
        messages = Message.objects.filter(session=parent).exclude(conversation=None)
        if kind == "agent":
            messages = messages.filter(metadata__spawned_agent_id=value)
        else:
            messages = messages.filter(role="assistant", tool_calls__contains=[{"id": value}])
        return messages.values_list("conversation__conversation_id", flat=True).first()

    def _note_spawns(self, unit: _Unit) -> None:
        """Remember the rounds that spawned sub-agents, for the sub-agent files read after this one. A
        message without a reference of its own (None) leaves the lookup to the database."""
        parsed = unit.parsed
        key = (parsed.tool, parsed.session.attributed_session_id[:255])
        for message in parsed.messages:
            agent = message.metadata.get("spawned_agent_id")
            if agent:
                self.spawns.setdefault((*key, "agent", agent), message.conversation)
            if message.tool_calls and message.role == "assistant":
                for call in message.tool_calls:
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        self.spawns.setdefault((*key, "tool_use", call["id"]), message.conversation)

    # -- sessions ----------------------------------------------------------------------------------------
    def _find_session(self, tool: str, agent_session_id: str) -> Session | None:
        key = agent_session_id[:255]
        session = self.sessions.get((tool, key))
        if session is None and key not in self.absent:
            session = self._sessions_lookup([(tool, key)]).get((tool, key))
        return session

    def _sessions_lookup(self, keys) -> dict[tuple[str, str], Session]:
        """The tenant's oldest session for each (tool, agent session id), in one query; remembered."""
        keys = set(keys)
        found: dict[tuple[str, str], Session] = {}
        rows = Session.objects.filter(tenant=self.tenant, agent_session_id__in={key[1] for key in keys})
        for session in rows.order_by("created_at"):
            key = (session.tool, session.agent_session_id)
            if key in keys:
                found.setdefault(key, session)
        self.sessions.update(found)
        return found

    def _resolve_sessions(self, units: list[_Unit]) -> int:
        """Give each unit the session its messages go to, locked for the batch; create those that do not
        exist yet (described from their files). Returns how many were created."""
        wanted: dict[_Unit, tuple[str, str] | uuid.UUID] = {}
        for unit in units:
            record, info = unit.record, unit.parsed.session
            if not unit.has_messages and record.session_id is None:
                continue
            key = info.attributed_session_id[:255]
            if record.session_id is not None and key == record.agent_session_id:
                wanted[unit] = record.session_id
            else:
                wanted[unit] = (unit.parsed.tool, key)
        keys = {key for key in wanted.values() if isinstance(key, tuple)}
        missing = [key for key in keys if key not in self.sessions and key[1] not in self.absent]
        if missing:
            self._sessions_lookup(missing)
        to_create = sorted(key for key in keys if key not in self.sessions)
        if to_create:
            with connection.cursor() as cursor:  # one creator per (tenant, tool, id) at a time, in one order
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(key)) FROM unnest(%s::text[]) WITH ORDINALITY AS t(key, n) "
                    "ORDER BY n",
                    [[f"{self.tenant.pk}:{tool}:{key}" for tool, key in to_create]],
                )
            self._sessions_lookup(to_create)  # created by another import meanwhile?
        new: dict[tuple[str, str], Session] = {}
        for unit, key in wanted.items():
            if isinstance(key, tuple) and key not in self.sessions and key not in new:
                new[key] = self._new_session(unit)
        existing_ids = {
            key if not isinstance(key, tuple) else self.sessions[key].pk for key in wanted.values() if key not in new
        }
        locked = {
            session.pk: session
            for session in Session.objects.select_for_update().filter(pk__in=existing_ids).order_by("pk")
        }
        by_pk = {**locked, **{session.pk: session for session in new.values()}}
        with_messages: set[uuid.UUID] = {pk for pk, session in locked.items() if session.last_seq}
        changed: dict[uuid.UUID, set] = {}
        for unit, key in wanted.items():
            session_id = key if not isinstance(key, tuple) else (new[key] if key in new else self.sessions[key]).pk
            session = by_pk.get(session_id)
            if session is None or session.deleted_at is not None:
                unit.refused = "its session was deleted through the API; not imported"
                continue
            unit.session = session
            unit.record.session_id = session.pk
            unit.record.agent_session_id = unit.parsed.session.attributed_session_id[:255]
            if unit.has_messages:
                fields = self._describe_session(
                    session, unit.parsed.session, unit.parsed.messages, has_messages=session.pk in with_messages
                )
                if session.pk in locked:
                    changed.setdefault(session.pk, set()).update(fields)
                with_messages.add(session.pk)
        self.batch_sessions = list(new)
        if new:
            Session.objects.bulk_create(new.values())
            self.sessions.update(new)
        described = [by_pk[pk] for pk, fields in changed.items() if fields]
        if described:
            now = timezone.now()
            for session in described:
                session.updated_at = now
            fields = set().union(*changed.values())
            update_rows(Session, described, [*sorted(fields), "updated_at"])
        return len(new)

    def _new_session(self, unit: _Unit) -> Session:
        info, stat = unit.parsed.session, unit.stat
        user = (
            self.user_id
            or info.user
            or user_from_cwd(info.cwd)
            or ("" if self.uploaded else _file_owner(stat))
            or UNKNOWN_USER
        )
        return Session(
            tenant=self.tenant,
            tool=unit.parsed.tool,
            agent_session_id=info.attributed_session_id[:255],
            user_id=user[:255],
            project=info.project[:255],
            started_at=info.started_at or timezone.now(),
            metadata={"imported": True},
        )

    def _describe_session(self, session: Session, info: ParsedSession, messages, *, has_messages: bool) -> set:
        """Name, project, start and metadata from what the log says; the fields that changed."""
        metadata = dict(session.metadata)
        changed = set()
        if info.is_subagent:
            agent = {"agent_session_id": info.agent_session_id, **info.metadata.get("agent_meta", {})}
            subagents = dict(metadata.get("subagents") or {})
            if subagents.get(info.agent_session_id) != agent and len(subagents) < 200:
                subagents[info.agent_session_id] = agent
                metadata["subagents"] = subagents
        else:
            for name, value in (("cwd", info.cwd), ("git_branch", info.git_branch), ("version", info.version)):
                if value:
                    metadata[name] = value
            for name, value in info.metadata.items():
                if name not in ("agent_meta",) and isinstance(value, str | int | bool | list | dict):
                    metadata[name] = value
            # Roll-ups are keyed by project: once the session has messages its project is fixed.
            if info.project and not session.project and not has_messages:
                session.project = info.project[:255]
                changed.add("project")
        name, source = "", ""
        if isinstance(info.metadata.get("title"), str) and info.metadata["title"].strip():
            name, source = info.metadata["title"], "title"
        elif isinstance(info.metadata.get("summary"), str) and info.metadata["summary"].strip():
            name, source = info.metadata["summary"], "summary"
        elif not info.is_subagent:
            prompt = next(
                (m.metadata.get("body") or m.content for m in messages if m.role == "user" and m.content.strip()), ""
            )
            if prompt:
                name, source = prompt, "prompt"
            elif not session.name and info.project:
                name, source = f"{info.project} {info.agent_session_id[:8]}", "fallback"
        current = metadata.get("name_source", "" if not session.name else "user")
        if name and current != "user" and _NAME_RANK[source] > _NAME_RANK.get(current, 0):
            session.name = " ".join(name.split())[:255]
            metadata["name_source"] = source
            changed.add("name")
        if info.started_at and info.started_at < session.started_at:
            session.started_at = info.started_at
            changed.add("started_at")
        if metadata != session.metadata:
            session.metadata = metadata
            changed.add("metadata")
        return changed


def _ingest_item(message) -> dict:
    item = message.to_ingest()
    if message.created_at is not None:
        item["created_at"] = message.created_at  # the ingest takes datetimes (the API's serializer makes them)
    return item


def _str(value) -> str | None:
    return None if value is None else str(value)
