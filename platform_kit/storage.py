"""Where files that every host needs are kept (docs/operations.md, "Storage"): export zips and uploaded logs.

They go to the storage `ace` of Django's STORAGES (`ace_storage()`), chosen by ACE_STORAGE: `database` (the
default) keeps them in PostgreSQL, in 1 MB chunks (`DatabaseStorage`); `s3` in an S3-compatible object store
through django-storages (the ACE_S3_* settings). Either way, a file written through one host is read through any
other, and nothing a host keeps on its own disk is needed by another.

A file's name starts with the id of the tenant whose data it holds (`<tenant id>/exports/<export id>.zip`): the
database storage keeps that id on its rows, and an object store's keys group a tenant's files. Names are made
unique by their callers (ids), never derived from a client's file names. Files are written whole and never
changed; they are read as a stream of chunks (`stored_chunks`), never whole in memory.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.utils.deconstruct import deconstructible

from platform_kit.models import StoredObject, StoredObjectChunk

STORAGE_ALIAS = "ace"
CHUNK_BYTES = 1 << 20


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
