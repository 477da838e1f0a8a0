"""One import run: the files' rows and sessions loaded once, the files planned in phases of groups, each phase
read batch after batch in this process or in worker processes, and the summary of it all."""

from __future__ import annotations

import functools
from pathlib import Path

from ingest_app.models import ImportedFile
from ingest_app.pipeline.batch import BatchImporter
from ingest_app.pipeline.plan import BatchPlanner, FileReport, ImportOptions, bytes_to_read, work_plan
from ingest_app.pipeline.progress import ImportProgress
from ingest_app.pipeline.renames import follow_rename
from ingest_app.pipeline.sessions import SessionResolver, SpawnRounds
from ingest_app.pipeline.summary import ImportSummary
from ingest_app.pipeline.workers import fewer_gc_collections, groups_in_processes, parallel_possible

PARALLEL_MIN_BYTES = 32 * 1024 * 1024  # less to read is quicker in one process than to start others


class ImportRun:
    """One import: the files' rows and sessions loaded once, then the files read in batches (one transaction
    each: up to CHUNK_BYTES of log, up to BATCH_FILES files) by one or more workers."""

    def __init__(
        self, *, options: ImportOptions, records: dict[str, ImportedFile], progress: ImportProgress | None = None
    ):
        self.options = options
        self.records = records  # the files' rows as last committed, by path
        self.progress = progress or ImportProgress()
        self.shown = progress is not None  # its totals cost a stat of every file: only for a progress shown
        self.sessions = SessionResolver(options=options)
        self.spawns = SpawnRounds(sessions=self.sessions, tool=options.tool)
        self.reports: dict[Path, FileReport] = {}
        self.totals: list[ImportSummary] = []

    def import_all(self, files: list[Path], *, workers: int) -> ImportSummary:
        """Import every file; the summary lists them in the order given.

        With `workers` > 1, enough to read (PARALLEL_MIN_BYTES) and no transaction of the caller's open, that
        many processes (forked: they start at once, with this process's settings) read groups of files side
        by side, each with its own database connection — parsing is Python, so threads would take turns."""
        total = bytes_to_read([files], self.records) if self.shown else 0
        self.progress.start(files_total=len(files), bytes_total=total)
        try:
            with fewer_gc_collections():
                for phase in work_plan(files):
                    if self._parallel(phase, workers):
                        self._in_processes(phase, min(workers, len(phase)))
                    else:
                        self._work(functools.partial(next, iter(phase), None))
        finally:
            self.progress.finish()
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
        return (
            workers > 1
            and len(groups) > 1
            and parallel_possible()
            and bytes_to_read(groups, self.records) >= PARALLEL_MIN_BYTES
        )

    def _in_processes(self, groups: list[list[Path]], workers: int) -> None:
        progress = self.progress
        results = groups_in_processes(
            groups,
            workers=workers,
            work=self._in_worker_process,
            on_progress=lambda files, bytes_read: progress.advance(files=files, bytes_read=bytes_read),
        )
        for reports, totals in results:
            self.reports.update(reports)
            self.totals.append(totals)
        self.sessions.forget_absent()  # the workers made sessions this process has not seen

    def _in_worker_process(self, next_group, stopped, report) -> tuple[dict[Path, FileReport], ImportSummary]:
        """What one forked worker does with this run (its own copy): its groups, then its reports and totals; its
        progress goes to the process that started it (`report(files, bytes_read)`)."""
        self.reports, self.totals = {}, []
        self.progress = _ForwardedProgress(report)
        self._work(next_group, stopped=stopped)
        return self.reports, self.totals[0]

    def _work(self, next_group, stopped=lambda: False) -> None:
        """Take groups of files and import them, batch after batch, until none is left (or `stopped()`)."""
        totals = ImportSummary()
        self.totals.append(totals)
        planner = BatchPlanner(
            options=self.options, records=self.records, reports=self.reports, follow_rename=follow_rename
        )
        batches = BatchImporter(options=self.options, records=self.records, sessions=self.sessions, spawns=self.spawns)
        pending: list[Path] = []  # files of the groups taken, in order; a file read in part stays first
        while not stopped():
            batch = planner.next_batch(pending, next_group)
            if planner.skipped:  # unchanged or refused without a read: done
                self.progress.advance(files=planner.skipped)
                planner.skipped = 0
            if not batch:
                return
            done = batches.import_batch(batch, totals)
            read = sum(file.parsed.end_offset - file.start_offset for file in batch if file.parsed is not None)
            self.progress.advance(files=len(done), bytes_read=max(read, 0))  # committed
            pending[:0] = [file.path for file in batch if file not in done]


class _ForwardedProgress(ImportProgress):
    """A worker process's progress, sent to the process that started it (which shows it)."""

    def __init__(self, report):
        self.report = report

    def advance(self, *, files: int = 0, bytes_read: int = 0) -> None:
        if files or bytes_read:
            self.report(files, bytes_read)
