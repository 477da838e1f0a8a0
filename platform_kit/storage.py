"""Where files that every host needs are kept (docs/operations.md, "Storage"): export zips and uploaded logs.

They go to the storage `ace` of Django's STORAGES (`ace_storage()`), chosen by ACE_STORAGE: `database` (the
default) keeps them in PostgreSQL, in 1 MB chunks (`DatabaseStorage`); `s3` in an S3-compatible object store
through django-storages (the ACE_S3_* settings). Either way, a file written through one host is read through any
other, and nothing a host keeps on its own disk is needed by another.

A file's name starts with the id of the tenant whose data it holds (`<tenant id>/exports/<export id>.zip`): the
database storage keeps that id on its rows, and an object store's keys group a tenant's files. Names are made
unique by their callers (ids), never derived from a client's file names. Files are written whole and never
changed; they are read as a stream of chunks (`stored_chunks`), never whole in memory.

A file is written before the row that refers to it commits, and deleted after the row's deletion commits. So a
rolled-back write or a delete that never ran (a worker gone, the object store down) leaves a file nothing refers to:
`stored_files_sweep` (hourly) deletes those, for the kinds of file the apps register (`stored_kind_register`), once
they are older than ORPHAN_GRACE.
"""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta

from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.utils import timezone
from django.utils.deconstruct import deconstructible

from platform_kit.models import StoredObject, StoredObjectChunk

logger = logging.getLogger(__name__)

STORAGE_ALIAS = "ace"
CHUNK_BYTES = 1 << 20
# A file younger than this is never swept: its row may still be on its way (a long upload's transaction, an export
# being recorded).
ORPHAN_GRACE = timedelta(hours=1)

# kind (the second part of a name) → live(tenant_id, names): which of those names something still refers to.
_KINDS: dict[str, Callable[[uuid.UUID, list[str]], set[str]]] = {}


def ace_storage() -> Storage:
    """The storage of files every host needs (STORAGES["ace"])."""
    return storages[STORAGE_ALIAS]


def stored_chunks(name: str, *, storage: Storage | None = None) -> Iterator[bytes]:
    """The bytes of a stored file, in chunks of up to CHUNK_BYTES, streamed from the storage. Raises
    FileNotFoundError (before yielding) when there is no such file."""
    storage = storage or ace_storage()
    if isinstance(storage, DatabaseStorage):
        return storage.chunks(name)
    bucket = getattr(storage, "bucket", None)
    if bucket is not None:  # django-storages' S3Storage: the object's body as it arrives, not a local copy first
        return _s3_chunks(storage, name)
    return _file_chunks(storage, name)


def _s3_chunks(storage, name: str) -> Iterator[bytes]:
    from botocore.exceptions import ClientError
    from storages.utils import clean_name

    key = storage._normalize_name(clean_name(name))
    try:
        body = storage.bucket.Object(key).get()["Body"]
    except ClientError as error:
        if error.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            raise FileNotFoundError(name) from error
        raise

    def chunks():
        try:
            yield from body.iter_chunks(CHUNK_BYTES)
        finally:
            body.close()

    return chunks()


def _file_chunks(storage: Storage, name: str) -> Iterator[bytes]:
    handle = storage.open(name, "rb")

    def chunks():
        with handle:
            yield from iter(lambda: handle.read(CHUNK_BYTES), b"")

    return chunks()


def stored_kind_register(kind: str, live: Callable[[uuid.UUID, list[str]], set[str]]) -> None:
    """Files `<tenant id>/<kind>/…` belong to the app that registers `kind` (in its AppConfig.ready): `live(tenant_id,
    names)` says which of a tenant's names its rows still refer to; the sweep deletes the others. Files of a kind
    nobody registered are never swept."""
    _KINDS[kind] = live


def ids_in_names(names: Iterable[str], *, suffix: str = "") -> dict[uuid.UUID, str]:
    """The names whose last part is a UUID (then `suffix`), by that id: how a `live` callback finds its rows."""
    found = {}
    for name in names:
        last = name.rsplit("/", 1)[-1]
        if last.endswith(suffix):
            try:
                found[uuid.UUID(last.removesuffix(suffix))] = name
            except ValueError:
                continue
    return found


def stored_files_sweep(*, older_than: timedelta = ORPHAN_GRACE, storage: Storage | None = None) -> dict:
    """Delete the stored files nothing refers to (see the module's docstring) that are older than `older_than`,
    a tenant and a kind at a time: a deleted tenant's files too. Returns the counts: files seen, kept, deleted."""
    storage = storage or ace_storage()
    cutoff = timezone.now() - older_than
    counts = {"seen": 0, "kept": 0, "deleted": 0}
    for tenant_id in _tenant_folders(storage):
        for kind, live in sorted(_KINDS.items()):
            files = list(_files(storage, f"{tenant_id}/{kind}/"))
            if not files:
                continue
            referred = live(tenant_id, [name for name, _ in files])
            for name, written in files:
                counts["seen"] += 1
                if name in referred or written is None or written > cutoff:
                    counts["kept"] += 1
                    continue
                storage.delete(name)
                counts["deleted"] += 1
                logger.info("deleted %s: nothing refers to it (written %s)", name, written.isoformat())
    return counts


def _tenant_folders(storage: Storage) -> Iterable[uuid.UUID]:
    if isinstance(storage, DatabaseStorage):
        tenant_ids = StoredObject.objects.order_by().values_list("tenant_id", flat=True).distinct()
        return sorted(tenant_ids)
    folders = []
    for folder in storage.listdir("")[0]:
        try:
            folders.append(uuid.UUID(folder))
        except ValueError:
            continue  # not a tenant's: not ours to sweep
    return sorted(folders)


def _files(storage: Storage, prefix: str) -> Iterator[tuple[str, datetime | None]]:
    """The files under `prefix` (at any depth) with the time each was written (None: unknown, never swept)."""
    if isinstance(storage, DatabaseStorage):
        rows = StoredObject.objects.filter(tenant_id=tenant_of(prefix), name__startswith=prefix)
        yield from rows.order_by("name").values_list("name", "created_at")
        return
    bucket = getattr(storage, "bucket", None)
    if bucket is not None:  # django-storages' S3Storage: one listing, with each object's time, no request per file
        from storages.utils import clean_name

        location = storage._normalize_name("")
        for summary in bucket.objects.filter(Prefix=storage._normalize_name(clean_name(prefix))):
            yield summary.key.removeprefix(location).lstrip("/"), summary.last_modified
        return
    folders, names = storage.listdir(prefix)
    for name in names:
        try:
            written = storage.get_modified_time(prefix + name)
        except (NotImplementedError, OSError):
            written = None
        yield prefix + name, written
    for folder in folders:
        yield from _files(storage, f"{prefix}{folder}/")


def tenant_of(name: str) -> uuid.UUID:
    """The tenant id a stored file's name starts with."""
    try:
        return uuid.UUID(name.split("/", 1)[0])
    except ValueError:
        raise ValueError(f"{name!r}: a stored file's name starts with its tenant's id") from None


@deconstructible
class DatabaseStorage(Storage):
    """Files in PostgreSQL: a `StoredObject` row per file, its bytes in `StoredObjectChunk` rows of CHUNK_BYTES,
    written in one transaction (a file is seen whole or not at all) and read a chunk at a time."""

    def _open(self, name, mode="rb"):
        if "w" in mode or "a" in mode or "+" in mode:
            raise ValueError("stored files are written with save(), never changed")
        stored = self._row(name)
        reader = io.BufferedReader(_ChunkReader(stored), buffer_size=CHUNK_BYTES)
        return File(reader, name)

    def _save(self, name, content):
        tenant_id = tenant_of(name)
        with transaction.atomic():
            stored = StoredObject.objects.create(tenant_id=tenant_id, name=name)
            index, size, pending = 0, 0, bytearray()
            if hasattr(content, "seek") and content.seekable():
                content.seek(0)
            for piece in iter(lambda: content.read(CHUNK_BYTES), b""):
                pending += piece
                while len(pending) >= CHUNK_BYTES:
                    self._write_chunk(stored, index, bytes(pending[:CHUNK_BYTES]))
                    del pending[:CHUNK_BYTES]
                    index, size = index + 1, size + CHUNK_BYTES
            if pending:
                self._write_chunk(stored, index, bytes(pending))
                size += len(pending)
            StoredObject.objects.filter(pk=stored.pk).update(size=size)
        return name

    @staticmethod
    def _write_chunk(stored: StoredObject, index: int, data: bytes) -> None:
        StoredObjectChunk.objects.create(
            tenant_id=stored.tenant_id, stored_object_id=stored.pk, index=index, data=data
        )  # fmt: skip

    def delete(self, name):
        try:
            tenant_id = tenant_of(name)
        except ValueError:
            return
        with transaction.atomic():
            ids = list(StoredObject.objects.filter(tenant_id=tenant_id, name=name).values_list("pk", flat=True))
            if ids:
                StoredObjectChunk.objects.filter(tenant_id=tenant_id, stored_object_id__in=ids).delete()
                StoredObject.objects.filter(pk__in=ids).delete()

    def exists(self, name):
        try:
            return StoredObject.objects.filter(tenant_id=tenant_of(name), name=name).exists()
        except ValueError:
            return False

    def size(self, name):
        return self._row(name).size

    def get_created_time(self, name):
        return self._row(name).created_at

    get_modified_time = get_accessed_time = get_created_time

    def listdir(self, path):
        prefix = path.rstrip("/") + "/" if path else ""
        names = StoredObject.objects.filter(tenant_id=tenant_of(prefix), name__startswith=prefix)
        folders, files = set(), []
        for name in names.values_list("name", flat=True):
            head, _, rest = name.removeprefix(prefix).partition("/")
            (folders.add(head) if rest else files.append(head))
        return sorted(folders), sorted(files)

    def url(self, name):
        raise NotImplementedError("stored files are served by the views that check who asks")

    def chunks(self, name: str) -> Iterator[bytes]:
        stored = self._row(name)

        def read():
            for index in range((stored.size + CHUNK_BYTES - 1) // CHUNK_BYTES):
                yield _chunk(stored, index)

        return read()

    def _row(self, name: str) -> StoredObject:
        try:
            return StoredObject.objects.get(tenant_id=tenant_of(name), name=name)
        except (StoredObject.DoesNotExist, ValueError):
            raise FileNotFoundError(name) from None


def _chunk(stored: StoredObject, index: int) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT data FROM {StoredObjectChunk._meta.db_table} "
            "WHERE tenant_id = %s AND stored_object_id = %s AND index = %s",
            [stored.tenant_id, stored.pk, index],
        )
        row = cursor.fetchone()
    if row is None:
        raise OSError(f"{stored.name}: chunk {index} is missing")
    return bytes(row[0])


class _ChunkReader(io.RawIOBase):
    """A stored file as a seekable raw stream, one chunk fetched at a time."""

    def __init__(self, stored: StoredObject):
        super().__init__()
        self.stored, self.position = stored, 0
        self.cached: tuple[int, bytes] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.stored.size}[whence]
        self.position = max(base + offset, 0)
        return self.position

    def readinto(self, buffer) -> int:
        if self.position >= self.stored.size:
            return 0
        index, within = divmod(self.position, CHUNK_BYTES)
        if self.cached is None or self.cached[0] != index:
            self.cached = (index, _chunk(self.stored, index))
        data = self.cached[1][within : within + len(buffer)]
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)
