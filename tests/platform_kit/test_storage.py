"""The database storage (platform_kit.storage.DatabaseStorage, the default of ACE_STORAGE): files in PostgreSQL in
1 MB chunks, each row carrying its tenant, written whole in one transaction and read a chunk at a time."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid

import pytest
from django.core.files import File
from django.core.files.base import ContentFile
from django.db import connection

from platform_kit.models import StoredObject, StoredObjectChunk
from platform_kit.storage import CHUNK_BYTES, DatabaseStorage, ace_storage, stored_chunks
from tests.support.processes import ROOT


class CountingReader(io.RawIOBase):
    """`size` pseudo-random bytes, made as they are read; remembers the largest read asked for."""

    def __init__(self, size: int):
        super().__init__()
        self.size, self.position, self.largest = size, 0, 0

    def readable(self):
        return True

    def readinto(self, buffer):
        self.largest = max(self.largest, len(buffer))
        count = min(len(buffer), self.size - self.position)
        buffer[:count] = block(self.position, count)
        self.position += count
        return count


def block(start: int, count: int) -> bytes:
    return bytes((start + i) * 7 % 251 for i in range(count))


def test_the_default_storage_is_the_database(db):
    assert isinstance(ace_storage(), DatabaseStorage)


def test_a_file_is_kept_in_chunks_of_its_tenant_and_read_back_a_chunk_at_a_time(db):
    tenant = uuid.uuid4()
    name = f"{tenant}/exports/big.zip"
    size = 2 * CHUNK_BYTES + 12345
    source = CountingReader(size)
    assert ace_storage().save(name, File(source, name=name)) == name
    assert source.largest <= CHUNK_BYTES  # read a chunk at a time, never whole
    stored = StoredObject.objects.get(name=name)
    assert (stored.tenant_id, stored.size, ace_storage().size(name)) == (tenant, size, size)
    chunks = StoredObjectChunk.objects.filter(stored_object_id=stored.pk).order_by("index")
    assert [(c.tenant_id, c.index, len(c.data)) for c in chunks] == [
        (tenant, 0, CHUNK_BYTES), (tenant, 1, CHUNK_BYTES), (tenant, 2, 12345)
    ]  # fmt: skip
    assert [len(chunk) for chunk in stored_chunks(name)] == [CHUNK_BYTES, CHUNK_BYTES, 12345]
    assert b"".join(stored_chunks(name)) == block(0, size)
    with ace_storage().open(name) as handle:  # seekable, across a chunk's end
        handle.seek(CHUNK_BYTES - 3)
        assert handle.read(6) == block(CHUNK_BYTES - 3, 6)
        handle.seek(-5, os.SEEK_END)
        assert handle.read() == block(size - 5, 5)
        assert handle.tell() == size

    ace_storage().delete(name)
    assert not ace_storage().exists(name)
    assert not StoredObjectChunk.objects.filter(stored_object_id=stored.pk).exists()
    with pytest.raises(FileNotFoundError):
        stored_chunks(name)
    with pytest.raises(FileNotFoundError):
        ace_storage().open(name)


def test_an_empty_file_and_a_name_without_a_tenant(db):
    name = f"{uuid.uuid4()}/uploads/empty"
    ace_storage().save(name, ContentFile(b""))
    assert (ace_storage().size(name), b"".join(stored_chunks(name))) == (0, b"")
    with pytest.raises(ValueError, match="starts with its tenant's id"):
        ace_storage().save("exports/x.zip", ContentFile(b"x"))
    assert not ace_storage().exists("exports/x.zip")


def test_a_file_is_written_whole_or_not_at_all(db):
    class Failing(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, buffer):
            raise OSError("the disk went away")

    name = f"{uuid.uuid4()}/exports/broken.zip"
    with pytest.raises(OSError, match="went away"):
        ace_storage().save(name, File(Failing(), name=name))
    assert not ace_storage().exists(name)
    assert not connection.needs_rollback


def test_every_unique_constraint_of_the_storage_tables_includes_the_tenant(db):
    """Ready to be distributed by tenant (issue 34): the chunks' key and every unique constraint carry it. (The
    files' and segments' own primary keys are ids, as every table's are.)"""
    tables = [StoredObjectChunk._meta.db_table, StoredObject._meta.db_table, "ingest_app_uploadsegment"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, contype, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE contype IN ('p', 'u') AND conrelid::regclass::text = ANY(%s) ORDER BY 1, 2",
            [tables],
        )
        constraints = cursor.fetchall()
    unique = [(table, definition) for table, kind, definition in constraints if kind == "u"]
    assert {table for table, _ in unique} == set(tables[1:])
    assert all(definition.startswith("UNIQUE (tenant_id,") for _, definition in unique), unique
    assert ("platform_kit_storedobjectchunk", "p", "PRIMARY KEY (tenant_id, stored_object_id, index)") in constraints


def test_an_unknown_storage_is_refused_when_the_settings_are_read():
    env = {**os.environ, "ACE_STORAGE": "nfs", "DJANGO_SETTINGS_MODULE": "aceproject.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "ACE_STORAGE='nfs': use 'database' (the default) or 's3'." in done.stderr
