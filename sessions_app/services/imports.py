"""Importing agent logs (Claude Code, Qwen Code, OpenClaw) from files on disk into sessions and messages.

`import_path` walks a file or a directory tree and imports every log file it has not fully read yet:

- Each file's tool is detected on its own (a directory may mix tools); a file no parser recognises is
  refused with the reason, and nothing is read from it.
- A file is read from where the last import stopped: `ImportedFile` keeps the byte offset and the parser's
  carry. A file that was replaced or truncated (its fingerprint or size no longer match) is read again
  from the start; the messages' external ids make that safe (nothing is stored twice).
- Big files are read in chunks of `CHUNK_BYTES`. Each chunk is one transaction: its messages (through
  `messages_append`, in batches of at most 1000, so every counter and roll-up is maintained the usual
  way) and the new offset and carry commit together, so a crash loses or repeats nothing.
- The messages of a sub-agent file (and sidechains) go to the session that spawned them, flagged in their
  metadata (see docs/accounting.md).

The CLI (`manage.py ace_import`), the upload endpoint (`POST /api/v1/imports/`) and the collector
(`sessions_app.tasks.collect_imports`, over every enabled `ImportSource`) all call this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import queue
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone
from psycopg.errors import DeadlockDetected, SerializationFailure

from sessions_app.importers import ParsedSession, ParseIssue, ParseResult, describe_layout, parse_file
from sessions_app.importers.core import read_head
from sessions_app.importers.detect import explain_detection
from sessions_app.models import TOKEN_FIELDS, ImportedFile, ImportSource, Message, Session, Tenant
from sessions_app.services.messages import messages_append_to_sessions

CHUNK_BYTES = 16 * 1024 * 1024  # read per transaction
RETRIES = 3  # a chunk whose transaction met a deadlock is read again
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

    def merge(self, other: ImportSummary) -> None:
        """Add what another summary counted (one file's, from a worker thread) to this one."""
        for name in (
            "files_seen",
            "files_imported",
            "files_unchanged",
            "files_refused",
            "sessions_created",
            "messages",
            "requests",
            "lines_read",
            "bytes_read",
            "issues_total",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.tokens.update(other.tokens)
        room = MAX_ISSUES - len(self.issues)
        if room > 0:
            self.issues.extend(other.issues[:room])
        self.files.extend(other.files)

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
    reports = run.import_all(files, workers=settings.ACE_IMPORT_WORKERS)
    summary = ImportSummary()
    for report in reports:  # in the order of `files`, whichever worker read them
        summary.merge(report)
    return summary


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
class _Chunk:
    """What one chunk's transaction read and stored."""

    record_id: object
    start_offset: int
    parsed: ParseResult
    issues: list[ParseIssue]
    created: int = 0
    counters: dict = field(default_factory=dict)
    sessions_created: int = 0
    session_id: object = None


class _ImportRun:
    """One import: the files' rows and sessions loaded once, then the files read by one or more workers."""

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
        # The rounds in which a session spawned its sub-agents, from the messages read in this run:
        # {(session pk, "agent" | "tool_use", id): conversation reference}.
        self.spawns: dict[tuple, str | None] = {}

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

    def import_all(self, files: list[Path], *, workers: int) -> list[ImportSummary]:
        """Import every file; one summary per file, in the order given. With `workers` > 1 (and not inside
        a transaction of the caller's), that many threads read groups of files side by side, each with its
        own database connection: parsing in one overlaps PostgreSQL storing another's rows."""
        reports: dict[Path, ImportSummary] = {}
        for phase in work_plan(files):
            if workers > 1 and len(phase) > 1 and not connection.in_atomic_block:
                self._in_threads(phase, reports, min(workers, len(phase)))
            else:
                for group in phase:
                    for path in group:
                        reports[path] = self.import_file(path)
        return [reports[path] for path in files]

    def _in_threads(self, groups: list[list[Path]], reports: dict, workers: int) -> None:
        pending: queue.SimpleQueue = queue.SimpleQueue()
        for group in groups:
            pending.put(group)
        failures: list[BaseException] = []

        def work():
            try:
                while not failures:
                    try:
                        group = pending.get_nowait()
                    except queue.Empty:
                        return
                    for path in group:
                        reports[path] = self.import_file(path)
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread below
                failures.append(error)
            finally:
                connection.close()  # this thread's own connection

        threads = [threading.Thread(target=work, name=f"ace-import-{n}", daemon=True) for n in range(workers)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException as error:  # e.g. a task's soft time limit: the workers stop after their chunk
            failures.append(error)
            for thread in threads:
                thread.join()
            raise
        if failures:
            raise failures[0]

    # -- one file ----------------------------------------------------------------------------------------
    def import_file(self, path: Path) -> ImportSummary:
        summary = ImportSummary()
        record = self.records.get(str(path))
        try:
            stat = path.stat()
        except OSError as error:
            summary.add_refused(str(path), f"cannot read the file: {error.strerror or error}")
            return summary
        mtime = _mtime(stat)
        idle = timezone.now() - mtime >= self.idle
        if (
            record is not None
            and record.tool
            and record.size == stat.st_size
            and record.mtime == mtime
            and not (record.pending and idle)
        ):
            summary.add_file(FileResult(str(path), "unchanged", record.tool, _str(record.session_id)))
            return summary
        if record is None or not record.tool:
            refusal = file_refusal(path, tool=self.tool)
            if refusal:
                summary.add_refused(str(path), refusal.message)
                return summary
        result = FileResult(str(path), "unchanged")
        try:
            self._read(path, stat, idle, result, summary)
        except Session.DoesNotExist:
            result.status, result.reason = "refused", "its session was deleted through the API; not imported"
            summary.add_issues([ParseIssue(str(path), 0, result.reason)])
        except OSError as error:  # unreadable, or gone while being read: the next import tries again
            result.status, result.reason = "refused", f"cannot read the file: {error.strerror or error}"
            summary.add_issues([ParseIssue(str(path), 0, result.reason)])
        summary.add_file(result)
        return summary

    def _read(self, path: Path, stat: os.stat_result, idle: bool, result: FileResult, summary: ImportSummary) -> None:
        """Read the file chunk by chunk from its stored offset; one transaction per chunk."""
        record_id = None
        while True:
            for attempt in range(1, RETRIES + 1):
                try:
                    with transaction.atomic():
                        chunk = self._read_chunk(path, stat, idle, record_id)
                    break
                except OperationalError as error:
                    # Another writer took the same roll-up rows in another order: the chunk is read again.
                    if attempt == RETRIES or not isinstance(error.__cause__, DeadlockDetected | SerializationFailure):
                        raise
            record_id = chunk.record_id
            summary.add_issues(chunk.issues)
            parsed = chunk.parsed
            if parsed.tool is None:  # not recognisable (yet): nothing read, nothing stored
                refused = any(issue.level == "error" for issue in chunk.issues)
                result.status = "refused" if refused else "unchanged"
                result.reason = "; ".join(issue.message for issue in chunk.issues if issue.line == 0)
                return
            summary.sessions_created += chunk.sessions_created
            summary.messages += chunk.created
            summary.requests += chunk.counters.get("requests", 0)
            for name in TOKEN_FIELDS:
                summary.tokens[name] += chunk.counters.get(name, 0)
            summary.lines_read += parsed.lines_read
            summary.bytes_read += parsed.end_offset - chunk.start_offset
            result.tool = parsed.tool
            result.session_id = _str(chunk.session_id)
            result.lines_read += parsed.lines_read
            result.messages += chunk.created
            if parsed.lines_read or chunk.created:
                result.status = "imported"
            if parsed.complete:
                return

    def _read_chunk(self, path: Path, stat: os.stat_result, idle: bool, record_id) -> _Chunk:
        """One chunk, inside its transaction: lock the file's row, parse from its offset, store the messages
        and the new offset and carry."""
        record, restarted = self._lock_record(path, record_id)
        offset, carry = record.offset, record.carry or None
        if offset == 0 and not carry:
            carry = self._subagent_seed(path)
        parsed = parse_file(
            path, start_offset=offset, tool=record.tool or self.tool, carry=carry, flush=idle, max_bytes=CHUNK_BYTES
        )
        chunk = _Chunk(record_id=record.pk, start_offset=offset, parsed=parsed, issues=list(restarted) + parsed.issues)
        if parsed.tool is None:
            transaction.set_rollback(True)
            return chunk
        chunk.created, chunk.counters, chunk.sessions_created = self._ingest(record, parsed, path, stat)
        chunk.session_id = record.session_id
        self._save_record(record, parsed, stat, chunk.issues, chunk.created)
        return chunk

    def _lock_record(self, path: Path, record_id) -> tuple[ImportedFile, list[ParseIssue]]:
        """The file's row, locked for this chunk (a concurrent import of the same file waits, then goes on
        from where this one stopped); reset to offset 0 when the file was truncated or replaced."""
        if record_id is not None:
            return ImportedFile.objects.select_for_update().get(pk=record_id), []
        known = self.records.get(str(path))
        if known is None:
            ImportedFile.objects.bulk_create(
                [ImportedFile(tenant=self.tenant, path=str(path), source=self.source, tool=self.tool or "")],
                ignore_conflicts=True,
            )
            record = ImportedFile.objects.select_for_update().get(tenant=self.tenant, path=str(path))
        else:
            record = ImportedFile.objects.select_for_update().get(pk=known.pk)
        if record.offset:
            size = path.stat().st_size
            if size < record.offset:
                why = f"the file is shorter ({size} bytes) than what was imported ({record.offset} bytes)"
            elif fingerprint(path, record.offset) != record.head_hash:
                why = "the bytes imported before have changed"
            else:
                return record, []
            record.offset, record.carry, record.pending = 0, {}, 0
            message = f"{why}: it was truncated or replaced, so it is read again from the start"
            return record, [ParseIssue(str(path), 0, message + " (messages already imported are kept once)", "warning")]
        return record, []

    def _subagent_seed(self, path: Path) -> dict | None:
        """A sub-agent file joins the round of its parent that spawned it (docs/accounting.md, Sub-agents)."""
        layout = describe_layout(path)
        if not layout.is_subagent or not layout.parent_session_id:
            return None
        tool = layout.tool or self.tool
        parent = self._find_session(tool, layout.parent_session_id) if tool else None
        if parent is None or not layout.agent_id:
            return None
        spawn = self._spawn_round(parent, "agent", layout.agent_id)
        if not spawn:
            meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
            try:
                tool_use_id = json.loads(meta.read_text(encoding="utf-8")).get("toolUseId")
            except (OSError, ValueError, AttributeError):
                tool_use_id = None
            if isinstance(tool_use_id, str) and tool_use_id:
                spawn = self._spawn_round(parent, "tool_use", tool_use_id)
        return {"conversation": spawn} if spawn else None

    def _spawn_round(self, parent: Session, kind: str, value: str) -> str | None:
        """The conversation reference of the parent's round that spawned an agent: from the messages this
        run stored, else from the database (the parent was imported before)."""
        key = (parent.pk, kind, value)
        if key in self.spawns and self.spawns[key] is not None:
            return self.spawns[key]
        messages = Message.objects.filter(session=parent).exclude(conversation=None)
        if kind == "agent":
            messages = messages.filter(metadata__spawned_agent_id=value)
        else:
            messages = messages.filter(role="assistant", tool_calls__contains=[{"id": value}])
        return messages.values_list("conversation__conversation_id", flat=True).first()

    def _note_spawns(self, session: Session, messages) -> None:
        """Remember the rounds that spawned sub-agents, for the sub-agent files read after this one. A
        message with no reference of its own (None) sends the lookup to the database."""
        for message in messages:
            agent = message.metadata.get("spawned_agent_id")
            if agent:
                self.spawns.setdefault((session.pk, "agent", agent), message.conversation)
            if message.tool_calls and message.role == "assistant":
                for call in message.tool_calls:
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        self.spawns.setdefault((session.pk, "tool_use", call["id"]), message.conversation)

    # -- sessions ----------------------------------------------------------------------------------------
    def _find_session(self, tool: str, agent_session_id: str) -> Session | None:
        key = agent_session_id[:255]
        session = self.sessions.get((tool, key))
        if session is None and key not in self.absent:
            session = self._session_lookup(tool, key)
            if session is not None:
                self.sessions[(tool, key)] = session
        return session

    def _session_lookup(self, tool: str, key: str) -> Session | None:
        sessions = Session.objects.filter(tenant=self.tenant, tool=tool, agent_session_id=key)
        return sessions.order_by("created_at").first()

    def _session_for(self, parsed: ParseResult, path: Path, stat: os.stat_result) -> tuple[Session, bool]:
        """The session the chunk's messages go to, and whether this call created it (described from the log)."""
        info = parsed.session
        key = info.attributed_session_id[:255]
        session = self._find_session(parsed.tool, key)
        created = False
        if session is None:
            with connection.cursor() as cursor:  # one creator per (tenant, tool, id) at a time
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{self.tenant.pk}:{parsed.tool}:{key}"])
            session = self._session_lookup(parsed.tool, key)
        if session is None:
            user = (
                self.user_id
                or info.user
                or user_from_cwd(info.cwd)
                or ("" if self.uploaded else _file_owner(stat))
                or UNKNOWN_USER
            )
            session = Session(
                tenant=self.tenant,
                tool=parsed.tool,
                agent_session_id=key,
                user_id=user[:255],
                project=info.project[:255],
                started_at=info.started_at or timezone.now(),
                metadata={"imported": True},
            )
            self._describe_session(session, info, parsed.messages, has_messages=False)
            session.save(force_insert=True)
            created = True
        self.sessions[(parsed.tool, key)] = session
        return session, created

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

    # -- a chunk ------------------------------------------------------------------------------------------
    def _ingest(self, record: ImportedFile, parsed: ParseResult, path: Path, stat) -> tuple[int, dict, int]:
        """Store the chunk's messages: how many were new, what they added to the counters, sessions created."""
        if not parsed.messages and record.session_id is None:
            return 0, {}, 0
        created_session = False
        if record.session_id is not None and parsed.session.attributed_session_id[:255] == record.agent_session_id:
            session_id = record.session_id
        else:
            session, created_session = self._session_for(parsed, path, stat)
            session_id = session.pk
        if not created_session:  # as it is now, locked for the chunk (another file may have added to it)
            session = Session.objects.select_for_update().get(pk=session_id)
            if session.deleted_at is not None:
                raise Session.DoesNotExist
        record.session_id, record.agent_session_id = session.pk, parsed.session.attributed_session_id[:255]
        if not parsed.messages:
            return 0, {}, int(created_session)
        if not created_session:
            changed = self._describe_session(
                session, parsed.session, parsed.messages, has_messages=bool(session.last_seq)
            )
            if changed:
                session.save(update_fields=[*changed, "updated_at"])
        items = [_ingest_item(message) for message in parsed.messages]
        (appended,) = messages_append_to_sessions(appends=[(session, items)], index_later=True)
        self._note_spawns(session, parsed.messages)
        return appended.created, appended.counters, int(created_session)

    def _save_record(self, record, parsed: ParseResult, stat, issues: list[ParseIssue], created: int) -> None:
        now = timezone.now()
        record.tool = parsed.tool
        record.offset = parsed.end_offset
        record.carry = parsed.carry
        record.pending = parsed.pending
        record.head_hash = fingerprint(Path(record.path), parsed.end_offset)
        if parsed.complete:  # the stat says "nothing new" to the next import only once the file was read through
            record.size, record.mtime = stat.st_size, _mtime(stat)
        record.device, record.inode = stat.st_dev, stat.st_ino
        record.lines_read += parsed.lines_read
        record.messages_imported += created
        record.issues += len(issues)
        if parsed.lines_read or issues:
            record.last_error = _error_summary(issues)
        if self.source is not None and record.source_id is None:
            record.source = self.source
        record.first_imported_at = record.first_imported_at or now
        record.last_imported_at = now
        record.save()


def _ingest_item(message) -> dict:
    item = message.to_ingest()
    if message.created_at is not None:
        item["created_at"] = message.created_at  # the ingest takes datetimes (the API's serializer makes them)
    return item


def _str(value) -> str | None:
    return None if value is None else str(value)
