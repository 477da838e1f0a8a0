"""One batch of files in one transaction: their rows locked, each file parsed from its offset, the sessions found
or created, every message stored with one call of the message service, the new offsets and carries saved. A
batch whose transaction meets a deadlock is read again."""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from pathlib import Path

from django.db import OperationalError, transaction
from django.utils import timezone
from psycopg.errors import DeadlockDetected, SerializationFailure

from ingest_app.importers import ParseIssue, parse_file, registry
from ingest_app.importers.dispatch import is_document_log
from ingest_app.importers.jsonl import is_compressed
from ingest_app.models import ImportedFile
from ingest_app.pipeline import plan
from ingest_app.pipeline.pairing import pair_import_items
from ingest_app.pipeline.paths import record_path
from ingest_app.pipeline.plan import FileInBatch, ImportOptions, file_mtime
from ingest_app.pipeline.sessions import SessionResolver, SpawnRounds
from ingest_app.pipeline.summary import ImportSummary
from platform_kit.db import update_rows
from platform_kit.redaction import redact
from sessions_app.models import Session
from sessions_app.schema import TOKEN_FIELDS
from sessions_app.services.ledger import Way
from sessions_app.services.messages import messages_append_to_sessions

RETRIES = 3  # a batch whose transaction met a deadlock is read again
RECORD_FIELDS = [
    "tool", "session", "agent_session_id", "offset", "carry", "pending", "head_hash", "size", "mtime", "device",
    "inode", "lines_read", "messages_imported", "issues", "last_error", "source", "first_imported_at",
    "last_imported_at",
]  # fmt: skip
FINGERPRINT_BYTES = 4096


class BatchImporter:
    """Reads and stores batches of files, one transaction each. `records` are the files' rows as last committed
    (by path): a batch updates them once its transaction committed."""

    def __init__(
        self,
        *,
        options: ImportOptions,
        records: dict[str, ImportedFile],
        sessions: SessionResolver,
        spawns: SpawnRounds,
    ):
        self.options = options
        self.records = records
        self.sessions = sessions
        self.spawns = spawns

    def import_batch(self, files: list[FileInBatch], totals: ImportSummary) -> list[FileInBatch]:
        """Read and store one batch in one transaction; the files that were read to the end."""
        for attempt in range(1, RETRIES + 1):
            try:
                with transaction.atomic():
                    stored = self._store_batch(files)
                break
            except OperationalError as error:
                # Another writer took the same rows in another order: the batch is read again.
                if attempt == RETRIES or not isinstance(error.__cause__, DeadlockDetected | SerializationFailure):
                    raise
                self.sessions.forget_made_in_batch()  # made by the rolled-back transaction: gone
                for file in files:
                    file.forget_read()
        done = self._report(files)
        totals.sessions_created += stored["sessions_created"]
        totals.messages += stored["messages"]
        totals.requests += stored["counters"].get("requests", 0)
        for name in TOKEN_FIELDS:
            totals.tokens[name] += stored["counters"].get(name, 0)
        return done

    def _report(self, files: list[FileInBatch]) -> list[FileInBatch]:
        """What the committed batch did, onto each file's report; the files that were read to the end."""
        done = []
        for file in files:
            report, parsed = file.report, file.parsed
            report.issues.extend(file.issues)
            if file.refused:
                report.refuse(file.refused)
                done.append(file)
                continue
            if parsed is None or parsed.tool is None:  # not recognisable (yet): nothing read, nothing stored
                if any(issue.level == "error" for issue in file.issues):
                    report.result.status = "refused"
                report.result.reason = "; ".join(issue.message for issue in file.issues if issue.line == 0)
                done.append(file)
                continue
            self.records[record_path(file.path)] = file.record
            report.lines_read += parsed.lines_read
            report.bytes_read += parsed.end_offset - file.start_offset
            report.result.note_session(tool=parsed.tool, session_id=file.record.session_id)
            report.result.lines_read += parsed.lines_read
            report.result.messages += file.created
            report.result.streaming = parsed.pending  # as of the file's last read
            if parsed.lines_read or file.created or parsed.end_offset > file.start_offset:
                report.result.status = "imported"  # a file that grew was read, if only by a line's newline
            if parsed.complete:
                done.append(file)
        return done

    def _store_batch(self, files: list[FileInBatch]) -> dict:
        """Inside the batch's transaction: lock the files' rows, parse each file from its offset, find or
        create the sessions, store every message with one append, and save the files' offsets and carries."""
        self.sessions.start_batch()
        self._lock_records(files)
        budget = plan.CHUNK_BYTES  # read when used: one setting for the plan and the parse
        for file in files:
            self._parse(file, max_bytes=max(budget, 1))
            if file.parsed is not None:
                budget -= file.parsed.end_offset - file.start_offset
        readable = [file for file in files if file.parsed is not None and file.parsed.tool and not file.refused]
        sessions_created = self.sessions.resolve(readable)
        appends: dict[uuid.UUID, tuple[Session, list[dict], list[FileInBatch]]] = {}
        for file in readable:
            if file.session is not None and file.has_messages:
                _, items, members = appends.setdefault(file.session.pk, (file.session, [], []))
                items.extend(_ingest_item(message) for message in file.parsed.messages)
                members.append(file)
        # A Claude Code session whose OpenTelemetry events arrived first: the log's responses and prompts
        # that pair with them complete those messages instead of being counted again (ingest_app.otlp).
        pair_import_items([(session, items) for session, items, _ in appends.values()])
        # A message stored by an earlier import and emitted again (a streamed response that grew or closed,
        # a record its tool rewrote) is completed in place: never a second message or request.
        results = messages_append_to_sessions(
            appends=[(session, items) for session, items, _ in appends.values()],
            way=Way.IMPORT,
            index_later=True,
            amend=True,
        )
        counters: Counter = Counter()
        messages = 0
        for (_, _, members), result in zip(appends.values(), results, strict=True):
            start = 0
            for file in members:
                count = len(file.parsed.messages)
                file.created = sum(result.new[start : start + count])
                start += count
            counters.update(result.counters)
            messages += result.created
        self._save_records(files)
        return {"sessions_created": sessions_created, "messages": messages, "counters": counters}

    def _lock_records(self, files: list[FileInBatch]) -> None:
        """Every file's row, locked for the batch (a concurrent import of the same file waits, then goes on
        from where this one stopped); rows for files met for the first time are made first."""
        options = self.options
        new = [
            ImportedFile(
                tenant=options.tenant, path=record_path(file.path), source=options.source, tool=options.tool or ""
            )
            for file in files
            if record_path(file.path) not in self.records  # committed knowledge: a retried batch makes them again
        ]
        made = {record.pk for record in new}
        if new:
            ImportedFile.objects.bulk_create(new, ignore_conflicts=True)
        rows = ImportedFile.objects.select_for_update().filter(
            tenant=options.tenant, path__in=[record_path(file.path) for file in files]
        )
        by_path = {record.path: record for record in rows.order_by("pk")}
        for file in files:
            file.record = by_path[record_path(file.path)]
            file.created_record = file.record.pk in made

    def _parse(self, file: FileInBatch, *, max_bytes: int) -> None:
        record, path = file.record, file.path
        try:
            if is_document_log(path, record.tool or self.options.tool):
                record.offset, record.carry, record.pending = 0, {}, 0  # a document is read whole each time
            elif is_compressed(path):
                record.offset, record.carry, record.pending = 0, {}, 0  # written once: read whole when it changed
            elif record.offset:
                restarted = _restart_if_replaced(path, record)
                if restarted:
                    file.issues.append(restarted)
            file.start_offset = record.offset
            carry = record.carry or None
            if record.offset == 0 and set(carry or {}) <= {"tail"}:  # nothing read yet but an unfinished line
                carry = {**(self.spawns.subagent_seed(path) or {}), **(carry or {})} or None
            file.parsed = parse_file(
                path, start_offset=record.offset, tool=record.tool or self.options.tool or file.detected_tool,
                carry=carry, flush=file.idle, max_bytes=None if is_compressed(path) else max_bytes,
            )  # fmt: skip
        except OSError as error:  # unreadable, or gone while being read: the next import tries again
            file.refused = f"cannot read the file: {error.strerror or error}"
            return
        file.issues.extend(file.parsed.issues)
        if file.parsed.tool:
            self.spawns.note(file.parsed)  # for this file's sub-agents, read next

    def _save_records(self, files: list[FileInBatch]) -> None:
        now = timezone.now()
        saved, dropped = [], []
        for file in files:
            record, parsed = file.record, file.parsed
            if file.refused or parsed is None or parsed.tool is None:
                if parsed is not None and not file.refused and parsed.carry.get("tail"):
                    # No complete line yet: the row remembers the unfinished line reported, to say it once.
                    record.carry = parsed.carry
                    record.last_imported_at = now
                    saved.append(record)
                elif file.created_record:
                    dropped.append(record.pk)  # as if never met: nothing was read from it
                continue
            record.tool = parsed.tool
            record.offset = parsed.end_offset
            record.carry = redact(parsed.carry)  # the messages still streaming: stored redacted, as they will be
            record.pending = parsed.pending
            record.head_hash = fingerprint(file.path, parsed.end_offset)
            if parsed.complete:  # the stat says "nothing new" to the next import once the file was read through
                record.size, record.mtime = file.stat.st_size, file_mtime(file.stat)
            record.device, record.inode = file.stat.st_dev, file.stat.st_ino
            record.lines_read += parsed.lines_read
            record.messages_imported += file.created
            record.issues += len(file.issues)
            if parsed.lines_read or file.issues:
                record.last_error = _error_summary(file.issues)
            if self.options.source is not None and record.source_id is None:
                record.source = self.options.source
            record.first_imported_at = record.first_imported_at or now
            record.last_imported_at = now
            saved.append(record)
        update_rows(ImportedFile, saved, RECORD_FIELDS)
        if dropped:
            ImportedFile.objects.filter(pk__in=dropped).delete()


def fingerprint(path: Path, offset: int) -> str:
    """SHA-256 of the first and the last 4 KB before `offset`: if the bytes already imported changed, the
    file was replaced (or rewritten) and must be read again from the start. A store's session (OpenCode's) has
    no file (it is read whole each time it changed): none."""
    if offset <= 0 or registry.is_store_source(path):
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        digest.update(handle.read(min(offset, FINGERPRINT_BYTES)))
        tail_start = max(offset - FINGERPRINT_BYTES, FINGERPRINT_BYTES)
        if tail_start < offset:
            handle.seek(tail_start)
            digest.update(handle.read(offset - tail_start))
    return digest.hexdigest()


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


def _error_summary(issues: list[ParseIssue]) -> str:
    errors = [issue for issue in issues if issue.level == "error"]
    if not errors:
        return ""
    first = "; ".join(f"line {issue.line}: {issue.message}" for issue in errors[:3])
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"{len(errors)} line(s) skipped: {first}{more}"[:2000]


def _ingest_item(message) -> dict:
    item = message.to_ingest()
    if message.created_at is not None:
        item["created_at"] = message.created_at  # the ingest takes datetimes (the API's serializer makes them)
    return item
