"""Storing uploaded log files (`POST /api/v1/imports/`) before they are imported, and what the server holds.

What the server has received of a client's file is kept for every host (`upload_copies`: segments in the storage
every host reads, and this host's copy of the file, brought up to them under the file's lock before anything is
compared, checked or imported); the importer then reads the copy from where it stopped (`ImportedFile`, which
names it the same on every host: `paths.record_path`).

A part is either a whole file (it replaces the stored copy: a rewritten `.json` document, a truncated or
rotated log) or the bytes of the client's file from an `offset` on. Appending is idempotent: bytes the server
already holds (a retry after a lost response) are compared with the stored ones and skipped, so nothing is
stored twice; an offset past the end of the stored copy, or bytes that differ from it, are refused before
anything is written. Every file of a request is checked, under a lock per stored file, before any is written:
its path against the files and folders the server holds (`a.jsonl/b.jsonl` cannot be stored next to a file
`a.jsonl`), and its bytes against the reading limits (`importers.limits`: a line too long is a 400, a compressed
log that decompresses to too much a 413, both naming the setting). A part is streamed to a staging file, never
held in memory whole.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from ingest_app.importers.jsonl import is_compressed
from ingest_app.importers.limits import (
    READ_CHUNK,
    LineTooLong,
    LogLimitExceeded,
    check_document_size,
    check_log_bytes,
    read_limits,
)
from ingest_app.models import UploadSegment
from ingest_app.pipeline import upload_copies
from ingest_app.pipeline.plan import file_refusal
from ingest_app.pipeline.upload_copies import (
    STAGING_PREFIX,
    copy_mark,
    copy_refresh,
    forgotten_copies_prune,
    segment_save,
    segments_merge,
    upload_lock,
    upload_root,
)
from platform_kit.files import private_folder, private_open
from platform_kit.storage import ace_storage
from sessions_app.models import Tenant

HEAD_BYTES = 4096  # what `head_sha256` covers: the client compares its own file's first bytes with it
_REFUSAL_HEAD = 64 * 1024  # a stored copy shorter than this may not have had a complete first line yet


def head_sha256(path: Path, size: int | None = None) -> str:
    """SHA-256 of a file's first HEAD_BYTES bytes (of its first `size` bytes, if fewer); "" for no bytes."""
    limit = HEAD_BYTES if size is None else min(size, HEAD_BYTES)
    if limit <= 0:
        return ""
    try:
        with path.open("rb") as handle:
            head = handle.read(limit)
    except OSError:
        return ""
    return hashlib.sha256(head).hexdigest() if head else ""


def content_sha256(path: Path) -> str:
    """SHA-256 of a whole file ("" when it cannot be read): for a whole-document log, whose bytes change in place
    (a token count rewritten with as many digits keeps the size and the head)."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return ""
    return digest.hexdigest()


def stored_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass
class UploadPart:
    """One uploaded file: its clean relative `name`, its bytes (`chunks`), and where they start in the client's
    file (`offset`; None: the whole file)."""

    name: str
    chunks: Iterable[bytes]
    offset: int | None = None


class UploadRejected(Exception):
    """A part cannot be stored as sent: `errors` by field, `status` 400 (an offset the server cannot continue
    from, a path the server holds a file or folder in the way of, a line too long), 409 (the bytes the server
    holds differ: send the file whole) or 413 (a compressed log that decompresses to too much)."""

    def __init__(self, detail: str, errors: dict[str, list[str]], status: int):
        super().__init__(detail)
        self.detail, self.errors, self.status = detail, errors, status


@dataclass
class StoredPart:
    name: str
    path: Path  # the stored copy
    appended: int = 0  # new bytes stored
    skipped: int = 0  # bytes the server already held (a retry)
    refused: str = ""


def uploads_store(*, tenant: Tenant, machine: str, parts: list[UploadPart], tool: str | None) -> list[StoredPart]:
    """Store the parts (see the module's docstring); a part whose file no parser recognises is refused (not
    stored). Raises UploadRejected, having written nothing, when a part cannot be stored as sent."""
    forgotten_copies_prune(tenant=tenant)
    root = private_folder(upload_root(tenant, machine), within=settings.ACE_DATA_DIR)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    try:
        with transaction.atomic():
            upload_lock(tenant, machine, [part.name for part in parts])
            for part in parts:
                copy_refresh(tenant, machine, root, part.name)
            plans = [_plan(tenant, machine, root, staging, index, part, tool) for index, part in enumerate(parts)]
            errors = {key: messages for plan in plans for key, messages in plan.errors.items()}
            if errors:
                statuses = {plan.status for plan in plans if plan.errors}
                raise UploadRejected(
                    "; ".join(message for messages in errors.values() for message in messages),
                    errors,
                    413 if 413 in statuses else 409 if 409 in statuses else 400,
                )
            for plan in plans:
                plan.write(tenant=tenant, machine=machine)
        return [plan.stored for plan in plans]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class _PartPlan:
    """What storing one part will do, decided (and checked) before anything is written."""

    def __init__(self, stored: StoredPart):
        self.stored = stored
        self.errors: dict[str, list[str]] = {}
        self.status = 400  # the answer when `errors` has any: 409 for bytes that differ, 413 for a bomb
        self.staged: Path | None = None  # a whole new copy, moved into place
        self.appended: Path | None = None  # or the part, whose bytes from `skip` on are appended to the stored copy
        self.skip = 0
        self.start = 0  # where the appended bytes start in the file

    def refuse(self, key: str, message: str, status: int = 400) -> None:
        self.errors[key] = [message]
        self.status = status

    def write(self, *, tenant: Tenant, machine: str) -> None:
        """The part's segment into the storage (a whole file's replacing the file's segments, whose bytes go after
        the commit), then into this host's copy."""
        if self.stored.refused:
            return
        final, name = self.stored.path, self.stored.name
        if self.staged is not None:
            replaced = UploadSegment.objects.filter(tenant=tenant, machine=machine, path=name)
            gone = [segment.storage_name for segment in replaced]
            replaced.delete()
            transaction.on_commit(lambda: [ace_storage().delete(stored) for stored in gone])
            segment = segment_save(tenant, machine, name, start=0, source=self.staged)
            private_folder(final.parent)
            os.replace(self.staged, final)
        elif self.appended is not None and self.stored.appended:
            segment = segment_save(tenant, machine, name, start=self.start, source=self.appended, skip=self.skip)
            with private_open(final, "ab") as handle, self.appended.open("rb") as part:
                part.seek(self.skip)
                shutil.copyfileobj(part, handle, READ_CHUNK)
                handle.flush()
                os.fsync(handle.fileno())
            segments = UploadSegment.objects.filter(tenant=tenant, machine=machine, path=name)
            if segments.count() > upload_copies.MAX_SEGMENTS:
                segment = segments_merge(tenant, machine, name, final)
        else:
            return
        copy_mark(final, segment.created_at)


def _plan(
    tenant: Tenant, machine: str, root: Path, staging: Path, index: int, part: UploadPart, tool: str | None
) -> _PartPlan:
    final = root / part.name
    plan = _PartPlan(StoredPart(name=part.name, path=final))
    in_the_way = _in_the_way(tenant, machine, part.name)
    if in_the_way:
        plan.refuse(f"files.{index}", f"{part.name}: {in_the_way}")
        return plan
    have = stored_size(final)
    staged = staging / part.name
    private_folder(staged.parent)
    with private_open(staged, "wb") as handle:
        for chunk in part.chunks:
            handle.write(chunk)
    size = staged.stat().st_size
    if part.offset is None or have == 0:
        if part.offset:
            plan.refuse(
                f"offsets.{index}",
                f"{part.name}: offset {part.offset} is beyond the 0 bytes the server has; send from offset 0.",
            )
            return plan
        plan.staged = staged
        plan.stored.appended = size
        if _check_limits(plan, index, staged):
            _check_refusal(plan, staged, tool)
        return plan
    if part.offset > have:
        plan.refuse(
            f"offsets.{index}",
            f"{part.name}: offset {part.offset} is beyond the {have} bytes the server has; send from offset {have}.",
        )
        return plan
    overlap = min(have - part.offset, size)
    if overlap and not _same_bytes(final, part.offset, staged, overlap):
        plan.refuse(
            f"files.{index}",
            f"{part.name}: the bytes from offset {part.offset} differ from those the server has: the file was "
            "replaced or rewritten; send it whole (without an offset).",
            409,
        )
        return plan
    plan.appended, plan.skip, plan.start = staged, overlap, have
    plan.stored.skipped, plan.stored.appended = overlap, size - overlap
    if not plan.stored.appended or not _check_limits(plan, index, staged, skip=overlap, continued=final):
        return plan
    if have < _REFUSAL_HEAD:
        # The stored copy may have held only part of a first line: judge the file as it will be.
        head = staging / (part.name + ".head")
        with final.open("rb") as source, staged.open("rb") as new, private_open(head, "wb") as handle:
            handle.write(source.read(have))
            new.seek(overlap)
            handle.write(new.read(_REFUSAL_HEAD))
        _check_refusal(plan, head, tool)
    return plan


def _in_the_way(tenant: Tenant, machine: str, name: str) -> str:
    """Why a file cannot be stored at `name` ("" when it can): a file the server holds where the path needs a
    folder (`a.jsonl` for `a.jsonl/b.jsonl`), or files held under it as a folder."""
    parts = name.split("/")
    folders = ["/".join(parts[:end]) for end in range(1, len(parts))]
    held = UploadSegment.objects.filter(tenant=tenant, machine=machine)
    for folder in folders:
        if held.filter(path=folder).exists():
            return (
                f"the server holds a file {folder!r} (uploaded before), so {folder!r} cannot be a folder; upload "
                "this file under another path."
            )
    if held.filter(path__startswith=name + "/").exists():
        return (
            f"the server holds a folder {name!r} (of files uploaded under it), so no file can be stored there; "
            "upload this file under another path."
        )
    return ""


def _same_bytes(stored: Path, offset: int, staged: Path, length: int) -> bool:
    """Whether `length` bytes of the stored copy from `offset` are the staged part's first ones."""
    with stored.open("rb") as held, staged.open("rb") as sent:
        held.seek(offset)
        while length > 0:
            step = min(length, READ_CHUNK)
            if held.read(step) != sent.read(step):
                return False
            length -= step
    return True


def _check_limits(plan: _PartPlan, index: int, part: Path, *, skip: int = 0, continued: Path | None = None) -> bool:
    """Whether the file as it will be stored is within the reading limits (`importers.limits`); if not, the
    plan is refused naming the limit (413 for a compressed log that decompresses to too much, 400 for a line too
    long). The file is the staged `part` from `skip` on, after the stored copy it `continued` if any: a plain
    file is checked from that copy's last unfinished line on (its lines are counted only to name a line too
    long), a compressed one whole. A compressed file that does not decompress is refused as not a log, as the
    import would refuse it."""
    name = plan.stored.name
    limits = read_limits()
    compressed = is_compressed(Path(name))
    sources, carried = [(part, skip)], 0
    if continued is not None and compressed:
        sources.insert(0, (continued, 0))
    elif continued is not None:
        carried = _unfinished_line_length(continued, limits.max_line_bytes)
    stream = _Concatenated(sources)
    try:
        if name.endswith(".json"):  # a whole-document log: read whole, so no larger than a line
            check_document_size(stored_size(continued) + stream.size if continued else stream.size, limits)
        with stream:
            check_log_bytes(
                stream, compressed=compressed, compressed_size=stream.size, carried=carried, limits=limits
            )  # fmt: skip
    except LineTooLong as error:
        plain_append = continued is not None and not compressed
        line = error.line + (_lines_before_unfinished(continued) if plain_append else 0)
        plan.refuse(f"files.{index}", f"{name}: {LineTooLong(line, error.limit)}", error.status)
        return False
    except LogLimitExceeded as error:
        plan.refuse(f"files.{index}", f"{name}: {error}", error.status)
        return False
    except OSError:
        raise
    except Exception as error:  # zstandard.ZstdError: not an archive the import could read
        if not compressed:
            raise
        plan.stored.refused = f"not a readable zstd archive ({error})"
        plan.stored.appended = 0
        return False
    return True


def _unfinished_line_length(path: Path, limit: int) -> int:
    """How many bytes the stored copy's last line holds after its last newline (counted up to `limit` + 1)."""
    size = stored_size(path)
    length = 0
    with path.open("rb") as handle:
        while length <= limit and size > 0:
            step = min(size, READ_CHUNK)
            size -= step
            handle.seek(size)
            block = handle.read(step)
            newline = block.rfind(b"\n")
            if newline >= 0:
                return length + step - newline - 1
            length += step
    return length


def _lines_before_unfinished(path: Path) -> int:
    """The number of complete lines of the stored copy: the unfinished one is the next."""
    count = 0
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
            count += chunk.count(b"\n")
    return count


class _Concatenated(io.RawIOBase):
    """The bytes of several files (each from an offset) as one stream, read in order."""

    def __init__(self, sources: list[tuple[Path, int]]):
        super().__init__()
        self.sources = list(sources)
        self.size = sum(max(stored_size(path) - skip, 0) for path, skip in self.sources)
        self.current = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while True:
            if self.current is None:
                if not self.sources:
                    return 0
                path, skip = self.sources.pop(0)
                self.current = path.open("rb")
                self.current.seek(skip)
            count = self.current.readinto(buffer)
            if count:
                return count
            self.current.close()
            self.current = None

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None
        super().close()


def _check_refusal(plan: _PartPlan, path: Path, tool: str | None) -> None:
    refusal = file_refusal(path, tool=tool)
    if refusal is not None:
        plan.stored.refused = refusal.message
        plan.stored.appended = 0
