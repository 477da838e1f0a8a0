"""Importing agent logs (of the tools of `importers.registry`) from files on disk into sessions and messages.

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
(`ingest_app.tasks.collect_imports`, over every enabled `ImportSource`) all call this package. Its modules:
`plan` (which files, in which order, what is new in each), `renames` (a file renamed since it was imported
keeps its row), `batch` (one batch in one transaction),
`sessions` (the sessions the files go to), `pairing` (a call counted once when it also arrived as OpenTelemetry
events: the OTLP receiver, ingest_app.otlp, uses it too), `workers` (the forked processes), `run` (one import,
from the plan to the summary), `progress` (how far it has got, for a caller that shows it) and `summary` (what an
import reports).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest_app.importers import ParseIssue, describe_layout
from ingest_app.models import ImportedFile, ImportSource
from ingest_app.pipeline.paths import record_path
from ingest_app.pipeline.plan import ImportOptions, file_refusal, log_files
from ingest_app.pipeline.progress import ImportProgress
from ingest_app.pipeline.run import PARALLEL_MIN_BYTES, ImportRun
from ingest_app.pipeline.summary import MAX_ISSUES, FileResult, ImportSummary, format_issue
from ingest_app.push_client import default_machine_name
from ingest_app.signals import import_finished
from platform_kit.db import held_lock, statistics_refreshed
from sessions_app.models import Message, Session, Tenant

__all__ = [
    "MAX_ISSUES",
    "PARALLEL_MIN_BYTES",
    "FileResult",
    "ImportPathError",
    "ImportProgress",
    "ImportSummary",
    "file_refusal",
    "format_issue",
    "import_files",
    "import_path",
    "import_source_scan",
    "local_machine",
]


class ImportPathError(Exception):
    """The path to import does not exist or cannot be read."""


def import_path(
    *,
    tenant: Tenant,
    path: str | Path,
    tool: str = "auto",
    user_id: str | None = None,
    source: ImportSource | None = None,
    uploaded: bool = False,
    machine: str | None = None,
    progress: ImportProgress | None = None,
) -> ImportSummary:
    """Import a log file or every log file under a directory. Safe to run again: only what is new is read.

    `tool` forces a format ("auto" detects it per file). `user_id` attributes new sessions to a user;
    without it, a session belongs to the user the log names (an OpenClaw Feishu sender), else the user
    whose home directory the agent ran in (`/home/<user>/…`, `/Users/<user>/…` in the log's cwd), else
    the owner of the file (not for uploads), else "unknown". `uploaded` marks files received through the
    API, which have no meaningful owner. New sessions ran on `machine` (default: this host, `local_machine()`).
    `progress` hears how far the import has got (see `progress.ImportProgress`).
    Files that are not regular files (a FIFO), and links to files outside `path`, are skipped, not read: the
    summary names each (`plan.log_files`). Raises ImportPathError when `path` does not exist."""
    root = Path(path).expanduser().absolute()
    if not root.exists():
        raise ImportPathError(f"{root}: no such file or directory")
    skipped: list[tuple[Path, str]] = []
    try:
        files = log_files(root, skipped)
    except OSError as error:
        raise ImportPathError(f"{root}: {error.strerror or error}") from error
    if root.is_file():  # a store's sessions (an OpenCode database's) are `<db>#<session>`
        known = ImportedFile.objects.filter(tenant=tenant, path__in=[str(root), *map(str, files)])
    else:
        known = ImportedFile.objects.filter(tenant=tenant, path__startswith=str(root).rstrip(os.sep) + os.sep)
    summary = _import_files(
        tenant=tenant,
        files=files,
        known=known,
        tool=tool,
        user_id=user_id,
        source=source,
        uploaded=uploaded,
        machine=local_machine() if machine is None else machine,
        progress=progress,
    )
    for path, reason in skipped:
        summary.add_skipped(str(path), reason)
    return summary


def import_files(
    *, tenant: Tenant, paths: list[Path], tool: str = "auto", user_id: str | None = None, machine: str = ""
) -> ImportSummary:
    """Import files received through the API (their owner on this server says nothing about the user),
    sessions before sub-agent files. New sessions ran on `machine`: the upload's label ('' when it has none)."""
    files = sorted((Path(p).absolute() for p in paths), key=lambda p: (describe_layout(p).is_subagent, str(p)))
    known = ImportedFile.objects.filter(tenant=tenant, path__in=[record_path(p) for p in files])
    return _import_files(
        tenant=tenant, files=files, known=known, tool=tool, user_id=user_id, uploaded=True, machine=machine
    )


def local_machine() -> str:
    """This host's name as a machine label (`schema.MACHINE_PATTERN`): what local imports (`ace_import`, the
    collector) label their new sessions with; `ace_push` labels its uploads the same way by default."""
    return default_machine_name()


def _import_files(
    *, tenant, files, known, tool, user_id, source=None, uploaded=False, machine="", progress=None
) -> ImportSummary:
    options = ImportOptions(
        tenant=tenant,
        tool=None if tool in ("", "auto", None) else tool,
        user_id=user_id or "",
        source=source,
        uploaded=uploaded,
        idle=timedelta(seconds=settings.ACE_IMPORT_IDLE_SECONDS),
        machine=machine,
    )
    run = ImportRun(options=options, records={record.path: record for record in known}, progress=progress)
    run.sessions.load(files)
    summary = run.import_all(files, workers=settings.ACE_IMPORT_WORKERS)
    _announce_finished(
        tenant=tenant, summary=summary, origin="source" if source else "upload" if uploaded else "path", source=source
    )
    return summary


def _announce_finished(*, tenant: Tenant, summary: ImportSummary, origin: str, source: ImportSource | None) -> None:
    """signals.import_finished, once the import's writes are committed (every batch commits on its own; a
    caller's transaction, if any, commits last). First the tables a big import has outgrown get their planner
    statistics, rather than when autovacuum comes by: until then PostgreSQL may plan for the tables as they were
    (for an emptied table: no rows), and a count over the new messages can take minutes."""
    report = summary.as_dict()
    del report["files"], report["issues"]  # server paths: the counts are what a listener needs

    def finished():
        if summary.messages:
            statistics_refreshed(Session._meta.db_table, Message._meta.db_table)
        import_finished.send(
            sender=ImportedFile,
            tenant_id=tenant.pk,
            origin=origin,
            source_id=None if source is None else source.pk,
            summary=report,
        )

    transaction.on_commit(finished)


def import_source_scan(*, source: ImportSource) -> ImportSummary | None:
    """Scan one import source; None when another scan of it is still running (the collector skips it)."""
    with held_lock(f"ace-import-source:{source.pk}") as taken:
        if not taken:
            return None
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
