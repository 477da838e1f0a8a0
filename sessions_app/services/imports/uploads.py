"""Storing uploaded log files (`POST /api/v1/imports/`) before they are imported, and what the server holds.

Uploads are kept under `$ACE_DATA_DIR/uploads/<tenant id>/<path>`, or `.../<tenant id>/~machines/<machine>/<path>`
when the upload names its machine (`ace_push` does), so two machines' files never mix. The stored copy is what
the server has received of the client's file; the importer then reads it from where it stopped (`ImportedFile`).

A part is either a whole file (it replaces the stored copy: a rewritten `.json` document, a truncated or
rotated log) or the bytes of the client's file from an `offset` on. Appending is idempotent: bytes the server
already holds (a retry after a lost response) are compared with the stored ones and skipped, so nothing is
stored twice; an offset past the end of the stored copy, or bytes that differ from it, are refused before
anything is written. Every file of a request is checked, under a lock per stored file, before any is written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from platform_kit.files import private_folder, private_open
from sessions_app.models import Tenant
from sessions_app.services.imports.plan import file_refusal

MACHINES_DIR = "~machines"  # `~` never survives `clean_relative_path`: no plain upload's path starts with it
HEAD_BYTES = 4096  # what `head_sha256` covers: the client compares its own file's first bytes with it
_REFUSAL_HEAD = 64 * 1024  # a stored copy shorter than this may not have had a complete first line yet


def upload_root(tenant: Tenant, machine: str = "") -> Path:
    """Where a tenant's uploads (of one machine) are kept."""
    root = settings.ACE_DATA_DIR / "uploads" / str(tenant.pk)
    return root / MACHINES_DIR / machine if machine else root


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
    from) or 409 (the bytes the server holds differ: send the file whole)."""

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
    root = private_folder(upload_root(tenant, machine), within=settings.ACE_DATA_DIR)
    staging = Path(tempfile.mkdtemp(prefix=".upload-", dir=root))
    try:
        with transaction.atomic():
            _lock(tenant, machine, [part.name for part in parts])
            plans = [_plan(root, staging, index, part, tool) for index, part in enumerate(parts)]
            errors = {key: messages for plan in plans for key, messages in plan.errors.items()}
            if errors:
                conflict = any(plan.conflict for plan in plans)
                raise UploadRejected(
                    "; ".join(message for messages in errors.values() for message in messages),
                    errors,
                    409 if conflict else 400,
                )
            for plan in plans:
                plan.write()
        return [plan.stored for plan in plans]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def stored_uploads_delete(*, tenant: Tenant, paths: list[str], dry_run: bool = False) -> int:
    """Delete these stored copies (a forgotten user's files), inside the caller's transaction and under each
    file's upload lock, so no upload of them is in flight or starts before it commits: a later part at an offset
    finds nothing to continue from (a 400 that says to send from offset 0). Paths outside the tenant's uploads
    are left alone. Returns how many copies there were (a dry run only counts them)."""
    root = upload_root(tenant)
    by_machine: dict[str, list[tuple[str, Path]]] = {}
    for path in map(Path, paths):
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            continue
        machine, name = (parts[1], parts[2:]) if parts[0] == MACHINES_DIR and len(parts) > 2 else ("", parts)
        by_machine.setdefault(machine, []).append(("/".join(name), path))
    present = 0
    for machine, files in sorted(by_machine.items()):
        _lock(tenant, machine, [name for name, _ in files])
        for _, path in files:
            if path.is_file():
                present += 1
                if not dry_run:
                    path.unlink()
                    _remove_empty_folders(path.parent, upload_root(tenant, machine))
    return present


def _remove_empty_folders(folder: Path, root: Path) -> None:
    """The folders below `root` left empty: their names are the client's paths (a project folder may name its
    user). `root` (the tenant's or the machine's folder) stays: an upload may be about to write in it."""
    while folder != root and folder.is_relative_to(root):
        try:
            folder.rmdir()
        except OSError:  # not empty
            return
        folder = folder.parent


def _lock(tenant: Tenant, machine: str, names: list[str]) -> None:
    """One writer per stored file at a time (two pushes of one machine, say), in one order: no deadlock."""
    keys = sorted({f"ace-upload:{tenant.pk}:{machine}:{name}" for name in names})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(key)) FROM unnest(%s::text[]) WITH ORDINALITY AS t(key, n) "
            "ORDER BY n",
            [keys],
        )


class _PartPlan:
    """What storing one part will do, decided (and checked) before anything is written."""

    def __init__(self, stored: StoredPart):
        self.stored = stored
        self.errors: dict[str, list[str]] = {}
        self.conflict = False
        self.staged: Path | None = None  # a whole new copy, moved into place
        self.append: bytes = b""  # or new bytes, appended to the stored copy

    def write(self) -> None:
        if self.stored.refused:
            return
        final = self.stored.path
        if self.staged is not None:
            private_folder(final.parent)
            os.replace(self.staged, final)
        elif self.append:
            with private_open(final, "ab") as handle:
                handle.write(self.append)
                handle.flush()
                os.fsync(handle.fileno())


def _plan(root: Path, staging: Path, index: int, part: UploadPart, tool: str | None) -> _PartPlan:
    final = root / part.name
    plan = _PartPlan(StoredPart(name=part.name, path=final))
    have = stored_size(final)
    if part.offset is None or have == 0:
        if part.offset:
            plan.errors[f"offsets.{index}"] = [
                f"{part.name}: offset {part.offset} is beyond the 0 bytes the server has; send from offset 0."
            ]
            return plan
        plan.staged = staging / part.name
        private_folder(plan.staged.parent)
        with private_open(plan.staged, "wb") as handle:
            for chunk in part.chunks:
                handle.write(chunk)
        plan.stored.appended = plan.staged.stat().st_size
        _check_refusal(plan, plan.staged, tool)
        return plan
    if part.offset > have:
        plan.errors[f"offsets.{index}"] = [
            f"{part.name}: offset {part.offset} is beyond the {have} bytes the server has; send from offset {have}."
        ]
        return plan
    data = b"".join(part.chunks)
    overlap = min(have - part.offset, len(data))
    if overlap:
        with final.open("rb") as handle:
            handle.seek(part.offset)
            held = handle.read(overlap)
        if held != data[:overlap]:
            plan.conflict = True
            plan.errors[f"files.{index}"] = [
                f"{part.name}: the bytes from offset {part.offset} differ from those the server has: the file was "
                "replaced or rewritten; send it whole (without an offset)."
            ]
            return plan
    plan.stored.skipped, plan.append = overlap, data[overlap:]
    plan.stored.appended = len(plan.append)
    if have < _REFUSAL_HEAD and plan.append:
        # The stored copy may have held only part of a first line: judge the file as it will be.
        head = staging / part.name
        private_folder(head.parent)
        with final.open("rb") as source, private_open(head, "wb") as handle:
            handle.write(source.read(have))
            handle.write(plan.append[:_REFUSAL_HEAD])
        _check_refusal(plan, head, tool)
    return plan


def _check_refusal(plan: _PartPlan, path: Path, tool: str | None) -> None:
    refusal = file_refusal(path, tool=tool)
    if refusal is not None:
        plan.stored.refused = refusal.message
        plan.stored.appended = 0
