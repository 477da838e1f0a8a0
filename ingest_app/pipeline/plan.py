"""Which files an import reads, in which order, and what is new in each.

`log_files` walks a path; `work_plan` groups the files (a session's file with its sub-agent files) into
phases; `BatchPlanner` takes files from those groups into batches of what is new in them, up to
`CHUNK_BYTES` of log and `BATCH_FILES` files (a bigger file is read in part), and reports the unchanged and
refused files on the way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from stat import S_ISBLK, S_ISCHR, S_ISFIFO, S_ISREG, S_ISSOCK

from django.utils import timezone

from ingest_app.importers import ParseIssue, ParseResult, describe_layout, registry
from ingest_app.importers.detect import explain_detection, head_objects, is_log_name
from ingest_app.importers.dispatch import stat_source
from ingest_app.importers.jsonl import read_head
from ingest_app.importers.limits import LogLimitExceeded
from ingest_app.models import ImportedFile, ImportSource
from ingest_app.pipeline.paths import record_path
from ingest_app.pipeline.summary import FileResult
from sessions_app.models import Session, Tenant

CHUNK_BYTES = 16 * 1024 * 1024  # log bytes read per transaction (a batch of files, or part of a big one)
BATCH_FILES = 200  # files per transaction at most
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ImportOptions:
    """What the caller asked for, the same for every file of the import."""

    tenant: Tenant
    tool: str | None  # the format forced; None: detected per file
    user_id: str  # "": the user the log names, else the cwd's home directory, else the file's owner
    source: ImportSource | None
    uploaded: bool  # received through the API: the file's owner on this server says nothing about the user
    idle: timedelta  # a file unchanged for this long is flushed (its last response emitted)
    machine: str = ""  # the machine new sessions ran on (services.imports.sessions.SessionResolver)


@dataclass
class FileReport:
    """What the import did with one file, over all the transactions that read it."""

    result: FileResult
    issues: list[ParseIssue] = field(default_factory=list)
    lines_read: int = 0
    bytes_read: int = 0

    def refuse(self, reason: str) -> None:
        self.result.status, self.result.reason = "refused", reason
        self.issues.append(ParseIssue(self.result.path, 0, reason))


@dataclass(eq=False)
class FileInBatch:
    """One file's part in a batch: what was read from it and where its messages go."""

    path: Path
    stat: os.stat_result
    idle: bool
    report: FileReport
    record: ImportedFile | None = None
    created_record: bool = False
    issues: list[ParseIssue] = field(default_factory=list)
    parsed: ParseResult | None = None
    start_offset: int = 0
    session: Session | None = None
    refused: str = ""
    created: int = 0
    detected_tool: str | None = None  # what the plan recognised the file as (first read only)

    @property
    def has_messages(self) -> bool:
        return bool(self.parsed is not None and self.parsed.messages)

    def forget_read(self) -> None:
        """What the batch's transaction read and decided, forgotten: it was rolled back, the batch is read again."""
        self.issues, self.parsed, self.session, self.refused, self.created = [], None, None, "", 0


# -- walking ------------------------------------------------------------------------------------------


def log_files(root: Path, skipped: list[tuple[Path, str]] | None = None) -> list[Path]:
    """The log files under `root` (or `root` itself; see `detect.is_log_name`), sessions before sub-agent files
    so that a sub-agent can find the round of its parent that spawned it. A tool's store (OpenCode's database
    or storage folder) gives one source per session (`registry.expand`, `registry.sources_in`).

    Only regular files are read (a FIFO would block the read forever), and a symbolic link only when the file
    it points to lies inside `root` (links to folders are not followed): the others, named like logs, are
    added to `skipped` with the reason. `root` itself is taken as given, a link or not."""
    sources = registry.expand(root)
    if sources is not None:
        return sorted(sources, key=lambda path: (describe_layout(path).is_subagent, str(path)))
    if root.is_file():
        return [root]
    if not root.is_dir():
        if skipped is not None:
            skipped.append((root, _not_regular(root.stat())))
        return []
    inside = root.resolve()
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        found.extend(registry.sources_in(Path(directory), subdirs, names))
        for path in (Path(directory) / name for name in names):
            if not is_log_name(path):
                continue
            why = _why_not_read(path, inside)
            if not why:
                found.append(path)
            elif skipped is not None:
                skipped.append((path, why))
    return sorted(found, key=lambda path: (describe_layout(path).is_subagent, str(path)))


def _why_not_read(path: Path, root: Path) -> str:
    """Why a file found in the walk of `root` (resolved) is not read, or "" when it is."""
    try:
        link = path.is_symlink()
        if link:
            target = path.resolve(strict=True)
            if target != root and root not in target.parents:
                return f"a symbolic link to {target}, outside the folder imported"
        stat = path.stat()
    except (OSError, RuntimeError) as error:  # a broken link, a loop of links, gone
        return f"a symbolic link that cannot be followed ({getattr(error, 'strerror', None) or error})"
    return "" if S_ISREG(stat.st_mode) else _not_regular(stat)


def _not_regular(stat: os.stat_result) -> str:
    kind = (
        "a FIFO" if S_ISFIFO(stat.st_mode) else "a socket" if S_ISSOCK(stat.st_mode)
        else "a device" if S_ISCHR(stat.st_mode) or S_ISBLK(stat.st_mode) else "not a file"
    )  # fmt: skip
    return f"not a regular file ({kind}): not read"


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
            total += stat_source(path).st_size
        except OSError:
            pass
    return total


def file_refusal(path: Path, *, tool: str | None = None) -> ParseIssue | None:
    """Why a file would not be imported (not a recognised agent log, or not the `tool` asked for), or None.

    An empty file, or one whose first line is still being written, is not refused: there is nothing to
    judge yet, and the next import reads it. A forced `tool` is taken where detection cannot tell (JSON
    lines of no shape known here, or a path in another tool's layout): its parser reads what it can, line
    by line. It does not make a file whose first lines hold no JSON object a log: that is refused too."""
    return file_detection(path, tool=tool)[0]


def file_detection(path: Path, *, tool: str | None = None) -> tuple[ParseIssue | None, str | None]:
    """`file_refusal`'s answer, and the tool detection recognised (None when it could not tell): the parse
    takes it rather than reading and judging the file's first lines a second time."""
    tool = None if tool in ("", "auto") else tool
    try:
        head = read_head(path)
    except LogLimitExceeded as error:  # a first line too long, a compression bomb: named, never read
        return ParseIssue(str(path), 0, str(error)), None
    if not any(line.strip() for line in head):
        return None, None
    detection = explain_detection(path, head)
    if detection.tool is None:
        if tool is None:
            return ParseIssue(str(path), 0, f"not a recognised agent log: {detection.reason}"), None
        objects, other = head_objects(head)
        if not objects:
            return ParseIssue(str(path), 0, f"not a {tool} log: none of its first {other} lines is a JSON object"), None
        return None, None
    if tool is not None and detection.tool != tool:
        return ParseIssue(
            str(path), 0, f"not a {tool} log: it looks like {detection.tool} ({detection.reason})"
        ), detection.tool
    return None, detection.tool


# -- what is new in each file -------------------------------------------------------------------------


def file_mtime(stat: os.stat_result) -> datetime:
    return _EPOCH + timedelta(microseconds=stat.st_mtime_ns // 1000)


def bytes_to_read(groups: list[list[Path]], records: dict[str, ImportedFile]) -> int:
    """About how many bytes the groups have that were not imported yet."""
    total = 0
    for path in (path for group in groups for path in group):
        record = records.get(record_path(path))
        try:
            total += max(stat_source(path).st_size - (record.offset if record else 0), 0)
        except OSError:
            pass
    return total


class BatchPlanner:
    """Takes the files of the groups a worker was given, in order, into batches of what is new in them.

    `records` are the files' rows as last committed (by path), `reports` what the import did with each file
    so far (by path): a file met for the first time gets its report here. `follow_rename` (`renames.py`)
    gives a file without a row the row of the file it was renamed from, with that file's path."""

    def __init__(
        self,
        *,
        options: ImportOptions,
        records: dict[str, ImportedFile],
        reports: dict[Path, FileReport],
        follow_rename=None,
    ):
        self.options = options
        self.records = records
        self.reports = reports
        self.follow_rename = follow_rename
        self.skipped = 0  # files met with nothing to read (unchanged, refused), since the caller last reset it

    def next_batch(self, pending: list[Path], next_group) -> list[FileInBatch]:
        """The next batch: files with something new to read, up to CHUNK_BYTES of them (a bigger file is read
        in part) and BATCH_FILES files. Unchanged and refused files are reported on the way."""
        batch: list[FileInBatch] = []
        budget = CHUNK_BYTES
        while budget > 0 and len(batch) < BATCH_FILES:
            if not pending:
                group = next_group()
                if group is None:
                    break
                pending.extend(group)
            path = pending.pop(0)
            file = self._file_in_batch(path)
            if file is None:
                self.skipped += 1
            else:
                batch.append(file)
                budget -= max(file.stat.st_size - (file.record.offset if file.record else 0), 1)
        return batch

    def _file_in_batch(self, path: Path) -> FileInBatch | None:
        """A file to read in the next batch, or None when there is nothing to read (reported as such)."""
        report = self.reports.get(path)
        if report is None:
            report = self.reports[path] = FileReport(FileResult(str(path), "unchanged"))
        record = self.records.get(record_path(path))
        try:
            stat = stat_source(path)
        except OSError as error:
            report.refuse(f"cannot read the file: {error.strerror or error}")
            return None
        if record is None and self.follow_rename is not None:
            record = self._renamed(path, stat, report)
        mtime = file_mtime(stat)
        idle = timezone.now() - mtime >= self.options.idle
        if (
            record is not None
            and record.tool
            and record.size == stat.st_size
            and record.mtime == mtime
            and not (record.pending and idle)
        ):
            report.result.note_session(tool=record.tool, session_id=record.session_id)
            report.result.streaming = record.pending
            return None
        detected = None
        if record is None or not record.tool:
            refusal, detected = file_detection(path, tool=self.options.tool)
            if refusal:
                report.refuse(refusal.message)
                return None
        return FileInBatch(path=path, stat=stat, idle=idle, report=report, record=record, detected_tool=detected)

    def _renamed(self, path: Path, stat: os.stat_result, report: FileReport) -> ImportedFile | None:
        """The row of the file `path` was imported as before a rename, now `path`'s (see `renames`)."""
        renamed = self.follow_rename(tenant=self.options.tenant, path=path, stat=stat, uploaded=self.options.uploaded)
        if renamed is None:
            return None
        record, old_path = renamed
        self.records.pop(record_path(old_path), None)
        self.records[record_path(path)] = record
        report.result.renamed_from = old_path
        return record
