"""What the server holds of uploaded log files, for every host: their segments in the storage, and this host's copies.

A file is its segments (`UploadSegment`: the whole file as first received, then each run of bytes appended at an
offset), whose bytes are in the storage every host reads (platform_kit.storage). A host reads the file through its
copy under `$ACE_DATA_DIR/uploads/<tenant id>/[~machines/<machine>/]<path>`, a cache: `copy_refresh` brings it up
to the segments under the file's lock (`upload_lock`, a PostgreSQL advisory lock, so across hosts), and its
modification time is its last segment's, which is how a host knows it is current. Forgetting a user deletes their
files' segments and bytes (`stored_uploads_delete`); another host's copies of them go the first time it uses the
tenant's uploads after the forget (`forgotten_copies_prune`). `uploads` stores the parts a request sends.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.db import connection, transaction
from django.utils import timezone

from ingest_app.models import UploadSegment
from ingest_app.pipeline.paths import local_path
from platform_kit.files import private_folder, private_open
from platform_kit.storage import ace_storage, stored_chunks
from sessions_app.models import ForgetAudit, Tenant

MACHINES_DIR = "~machines"  # `~` never survives `clean_relative_path`: no plain upload's path starts with it
# A file appended to more often than this is stored again whole, as one segment: a host that makes its copy reads
# a few objects, not thousands, and finding the file's segments stays one short index scan.
MAX_SEGMENTS = 64
# A file in a tenant's folder whose modification time is the last forget this host's copies were pruned after.
FORGOTTEN_MARK = "~forgotten"
STAGING_PREFIX = ".upload-"  # a request's parts, before they are stored (a folder in the tenant's or machine's)
REFRESH_PREFIX = ".refresh-"  # a copy being made again, beside the one it replaces


def upload_root(tenant: Tenant, machine: str = "") -> Path:
    """Where a tenant's uploads (of one machine) are kept."""
    root = settings.ACE_DATA_DIR / "uploads" / str(tenant.pk)
    return root / MACHINES_DIR / machine if machine else root


def stored_uploads_delete(*, tenant: Tenant, paths: list[str], dry_run: bool = False) -> int:
    """Delete these uploaded files (a forgotten user's: `ImportedFile.path`s), inside the caller's transaction and
    under each file's upload lock, so no upload of them is in flight or starts before it commits: a later part at
    an offset finds nothing to continue from (a 400 that says to send from offset 0). Their segments go now, their
    bytes in the storage and this host's copy after the commit (another host's copies go the first time it uses
    the tenant's uploads after the forget: `forgotten_copies_prune`). Paths outside the tenant's uploads are left
    alone. Returns how many files there were (a dry run only counts them)."""
    root = upload_root(tenant)
    by_machine: dict[str, list[str]] = {}
    for path in map(local_path, paths):
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            continue
        machine, name = (parts[1], parts[2:]) if parts[0] == MACHINES_DIR and len(parts) > 2 else ("", parts)
        by_machine.setdefault(machine, []).append("/".join(name))
    present = 0
    for machine, names in sorted(by_machine.items()):
        upload_lock(tenant, machine, names)
        segments = UploadSegment.objects.filter(tenant=tenant, machine=machine, path__in=names)
        held = set(segments.values_list("path", flat=True))
        held |= {name for name in names if (upload_root(tenant, machine) / name).is_file()}
        present += len(held)
        if dry_run or not held:
            continue
        stored = [segment.storage_name for segment in segments]
        segments.delete()
        transaction.on_commit(functools.partial(_forgotten_delete, tenant, machine, sorted(held), stored))
    return present


def _forgotten_delete(tenant: Tenant, machine: str, names: list[str], stored: list[str]) -> None:
    storage = ace_storage()
    for name in stored:
        storage.delete(name)
    root = upload_root(tenant, machine)
    for name in names:
        (root / name).unlink(missing_ok=True)
        _remove_empty_folders((root / name).parent, root)


def upload_cache_refresh(*, tenant: Tenant, machine: str, names: list[str]) -> Path:
    """Bring this host's copies of these uploaded files up to what the storage holds (see the module's
    docstring), under their locks; returns the folder they are in."""
    forgotten_copies_prune(tenant=tenant)
    root = private_folder(upload_root(tenant, machine), within=settings.ACE_DATA_DIR)
    with transaction.atomic():
        upload_lock(tenant, machine, names)
        for name in names:
            copy_refresh(tenant, machine, root, name)
    return root


def forgotten_copies_prune(*, tenant: Tenant) -> int:
    """Delete this host's copies of the tenant's files that were forgotten through another host (no segment is
    left of them), the first time the tenant's uploads are used here after a forget (`ForgetAudit`): one row read
    otherwise. Each copy is deleted under its file's lock, once it is sure no upload made it again. Returns how
    many."""
    last = (
        ForgetAudit.objects.filter(tenant=tenant).order_by("-forgotten_at").values_list("forgotten_at", flat=True)
    ).first()
    root = upload_root(tenant)
    mark = root / FORGOTTEN_MARK
    if last is None or not root.is_dir():
        return 0
    try:
        if mark.stat().st_mtime_ns >= _mtime_ns(last):
            return 0
    except FileNotFoundError:
        pass
    copies: dict[str, list[str]] = {}
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(STAGING_PREFIX)]
        for file_name in files:
            parts = (Path(folder) / file_name).relative_to(root).parts
            if file_name.startswith(REFRESH_PREFIX) or parts == (FORGOTTEN_MARK,):  # a copy being made; the mark
                continue
            machine, name = (parts[1], parts[2:]) if parts[0] == MACHINES_DIR and len(parts) > 2 else ("", parts)
            copies.setdefault(machine, []).append("/".join(name))
    held = set(UploadSegment.objects.filter(tenant=tenant).values_list("machine", "path").distinct())
    pruned = 0
    for machine, names in sorted(copies.items()):
        stale = [name for name in names if (machine, name) not in held]
        if not stale:
            continue
        with transaction.atomic():
            upload_lock(tenant, machine, stale)
            again = UploadSegment.objects.filter(tenant=tenant, machine=machine, path__in=stale)
            for name in set(stale) - set(again.values_list("path", flat=True)):
                (upload_root(tenant, machine) / name).unlink(missing_ok=True)
                _remove_empty_folders((upload_root(tenant, machine) / name).parent, upload_root(tenant, machine))
                pruned += 1
    with private_open(mark, "w"):
        pass
    copy_mark(mark, last)
    return pruned


def copy_refresh(tenant: Tenant, machine: str, root: Path, name: str) -> None:
    """Make the copy `root/name` hold the file's segments: nothing to do when its size and modification time are
    its last segment's; the segments after its end appended when it is an earlier state of the same file; else
    made again (replaced elsewhere, or a failed write left it ahead). No segment: no copy."""
    final = root / name
    of_file = UploadSegment.objects.filter(tenant=tenant, machine=machine, path=name)
    try:
        stat = final.stat()
        held = (stat.st_size, stat.st_mtime_ns)
    except OSError:
        held = None
    last = of_file.order_by("-start").first()
    if last is not None and held == (last.start + last.length, _mtime_ns(last.created_at)):
        return  # what a host finds most often: its copy is current (one row read)
    segments = list(of_file.order_by("start"))
    if not segments:
        if final.is_file():
            final.unlink()
            _remove_empty_folders(final.parent, root)
        return
    ends = [(segment.start + segment.length, _mtime_ns(segment.created_at)) for segment in segments]
    last = segments[-1]
    if held is not None and held in ends:
        with private_open(final, "ab") as handle:
            for segment in segments[ends.index(held) + 1 :]:
                _segment_copy(segment, handle)
    else:
        _clear_the_way(root, name)
        private_folder(final.parent)
        descriptor, made = tempfile.mkstemp(prefix=REFRESH_PREFIX, dir=final.parent)  # 0600
        try:
            with os.fdopen(descriptor, "wb") as handle:
                for segment in segments:
                    _segment_copy(segment, handle)
            os.replace(made, final)
        except BaseException:
            Path(made).unlink(missing_ok=True)
            raise
    copy_mark(final, last.created_at)


def _segment_copy(segment: UploadSegment, handle) -> None:
    for chunk in stored_chunks(segment.storage_name):
        handle.write(chunk)
    handle.flush()
    os.fsync(handle.fileno())


def _clear_the_way(root: Path, name: str) -> None:
    """Copies left on this host where the file `name` now is (files forgotten or replaced through another host):
    a file where its path needs a folder, a folder where it needs the file."""
    folder = root
    for part in name.split("/")[:-1]:
        folder = folder / part
        if folder.is_file():
            folder.unlink()
    if (root / name).is_dir():
        shutil.rmtree(root / name)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _mtime_ns(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def copy_mark(path: Path, moment: datetime) -> None:
    """The copy is current up to the segment written at `moment`: its modification time says so."""
    ns = _mtime_ns(moment)
    os.utime(path, ns=(ns, ns))


def segments_merge(tenant: Tenant, machine: str, name: str, copy: Path) -> UploadSegment:
    """One segment instead of many (a log appended to every few seconds for weeks): this host's copy, current
    under the lock, stored whole in their place; their bytes go after the commit."""
    merged = UploadSegment.objects.filter(tenant=tenant, machine=machine, path=name)
    gone = [segment.storage_name for segment in merged]
    merged.delete()
    transaction.on_commit(lambda: [ace_storage().delete(stored) for stored in gone])
    return segment_save(tenant, machine, name, start=0, source=copy)


def segment_save(tenant: Tenant, machine: str, name: str, *, start: int, source: Path, skip: int = 0):
    """A new segment of the file: the bytes of `source` from `skip` on, into the storage."""
    segment = UploadSegment(
        tenant=tenant, machine=machine, path=name, start=start, length=source.stat().st_size - skip,
        created_at=timezone.now(),
    )  # fmt: skip
    with source.open("rb") as handle:
        handle.seek(skip)
        stored = ace_storage().save(segment.storage_name, File(_From(handle, skip), name=segment.storage_name))
    if stored != segment.storage_name:
        raise FileExistsError(f"{segment.storage_name} is taken (stored as {stored})")
    segment.save(force_insert=True)
    return segment


class _From(io.RawIOBase):
    """A file read from `skip` on, as if it started there (a storage rewinds what it saves to its start)."""

    def __init__(self, handle, skip: int):
        super().__init__()
        self.handle, self.skip = handle, skip

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            offset += self.skip
        return self.handle.seek(offset, whence) - self.skip

    def tell(self) -> int:
        return self.handle.tell() - self.skip

    def readinto(self, buffer) -> int:
        return self.handle.readinto(buffer)


def _remove_empty_folders(folder: Path, root: Path) -> None:
    """The folders below `root` left empty: their names are the client's paths (a project folder may name its
    user). `root` (the tenant's or the machine's folder) stays: an upload may be about to write in it."""
    while folder != root and folder.is_relative_to(root):
        try:
            folder.rmdir()
        except OSError:  # not empty
            return
        folder = folder.parent


def upload_lock(tenant: Tenant, machine: str, names: list[str]) -> None:
    """One writer per stored file at a time (two pushes of one machine, say, through any hosts), in one order: no
    deadlock. Its folders are locked too, shared, as the files they could be (`a.jsonl` for `a.jsonl/b.jsonl`):
    files of one folder are stored side by side, but never a file where another request makes a folder."""
    exclusive = {name: True for name in names}
    for name in names:
        parts = name.split("/")
        for end in range(1, len(parts)):
            exclusive.setdefault("/".join(parts[:end]), False)
    keys = sorted((f"ace-upload:{tenant.pk}:{machine}:{path}", alone) for path, alone in exclusive.items())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CASE WHEN alone THEN pg_advisory_xact_lock(hashtext(key))::text"
            " ELSE pg_advisory_xact_lock_shared(hashtext(key))::text END"
            " FROM unnest(%s::text[], %s::bool[]) WITH ORDINALITY AS t(key, alone, n) ORDER BY n",
            [[key for key, _ in keys], [alone for _, alone in keys]],
        )
