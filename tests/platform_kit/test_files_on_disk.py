"""Files holding tenant data are the service user's only (docs/security.md, "Files on disk"): uploaded logs, export
zips and the broker's queue are 0600 in 0700 folders whatever the umask, and so is the embedded PostgreSQL's data.
"""

import contextlib
import os
import shutil
import stat
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from aceproject.data_folder import BROKER_FOLDERS, filesystem_broker_options, make_broker_folders
from aceproject.embedded_broker import broker_folder, stop_embedded_broker
from platform_kit.files import private_folder, private_open
from platform_kit.storage import ace_storage
from portability_app.models import TenantExport
from portability_app.tasks import tenant_export_run
from tests.test_embedded_broker import put

LOG = b'{"type":"user","sessionId":"s-1","cwd":"/home/dev/app","message":{"role":"user","content":"hello"}}\n'


@contextlib.contextmanager
def umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def open_to_others(root: Path) -> list[str]:
    """Every folder and regular file under `root` that its group or others may read, write or enter."""
    loose = []
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder) / name
            if (path.is_dir() or path.is_file()) and not path.is_symlink() and mode(path) & 0o077:
                loose.append(f"{oct(mode(path))} {path.relative_to(root)}")
    return loose


def test_uploaded_copies_are_the_service_users_only_whatever_the_umask(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path / "data"
    (settings.ACE_DATA_DIR / "uploads").mkdir(parents=True, mode=0o755)  # made by an earlier version
    name = ".claude/projects/-home-dev-app/s-1.jsonl"
    with umask(0o002):
        first = api.post("/api/v1/imports/", {"files": [SimpleUploadedFile("a.jsonl", LOG)], "paths": [name]})
        assert first.status_code == 201, first.json()
        for offset in (0, len(LOG)):  # another machine's folder; then the append path
            part = {"files": [SimpleUploadedFile("a.jsonl", LOG)], "paths": [name], "offsets": [offset]}
            answer = api.post("/api/v1/imports/", {**part, "machine": "laptop"})
            assert answer.status_code == 201, answer.json()
        export = TenantExport.objects.create(tenant=api.tenant, requested_by="test")
        assert tenant_export_run(str(export.pk)) == "succeeded"

        uploads = settings.ACE_DATA_DIR / "uploads" / str(api.tenant.pk)
        stored, appended = uploads / name, uploads / "~machines" / "laptop" / name
        # This host's copy, gone (a new host, a cleaned disk), is made again from the storage when next needed.
        shutil.rmtree(appended.parent.parent)
        listed = api.get("/api/v1/imports/files/", {"machine": "laptop"}).json()["results"]
        assert [row["stored_bytes"] for row in listed] == [2 * len(LOG)]

    assert appended.read_bytes() == LOG + LOG
    for path in (stored, appended):
        assert mode(path) == 0o600, path
    for folder in (stored.parent, appended.parent, uploads, uploads.parent):
        assert mode(folder) == 0o700, folder
    assert open_to_others(settings.ACE_DATA_DIR) == []
    # The export's zip is in the storage every host reads, not on this host's disk.
    assert ace_storage().exists(TenantExport.objects.get(pk=export.pk).path)
    assert not (settings.ACE_DATA_DIR / "exports").exists()


def test_the_embedded_brokers_queue_file_is_private(tmp_path):
    folder = broker_folder(tmp_path)
    (folder / "appendonlydir").mkdir(parents=True, mode=0o755)
    (folder / "appendonlydir" / "old.aof").write_bytes(b"")  # left readable by an earlier version
    os.chmod(folder / "appendonlydir" / "old.aof", 0o644)
    try:
        with umask(0o022):
            put(tmp_path, {"secret": "queued tenant data"})
    finally:
        stop_embedded_broker(tmp_path)
    assert any(path.suffix == ".aof" and path.stat().st_size for path in folder.rglob("*"))
    assert mode(folder) == 0o700
    assert open_to_others(folder) == []


def test_the_filesystem_brokers_folders_are_private(tmp_path):
    """CELERY_BROKER_URL=filesystem://: kombu writes each message with the umask's mode, in folders only we enter."""
    options = filesystem_broker_options(tmp_path)
    with umask(0o022):
        make_broker_folders(options)
    for name in BROKER_FOLDERS:
        assert mode(Path(options[name])) == 0o700, name
    assert mode(tmp_path / "broker") == 0o700


def test_the_embedded_postgresqls_data_is_its_users_only():
    data_dir = django_settings.DATABASES["default"].get("ACE_DATA_DIR")
    if not data_dir:
        pytest.skip("DATABASE_URL is set: not the embedded PostgreSQL")
    pgdata = Path(data_dir) / "pg"
    assert mode(pgdata) == 0o700
    # Its tables and its WAL (pgserver's pid list and the socket aside: no tenant data).
    assert open_to_others(pgdata / "base") == open_to_others(pgdata / "pg_wal") == []


def test_the_helpers_make_private_files_and_folders_whatever_the_umask(tmp_path):
    with umask(0o000):
        folder = private_folder(tmp_path / "a" / "b", within=tmp_path)
        with private_open(folder / "f", "w") as handle:
            handle.write("x")
        (tmp_path / "loose").write_text("y")
        os.chmod(tmp_path / "loose", 0o666)
        with private_open(tmp_path / "loose", "a") as handle:  # an existing file is tightened
            handle.write("z")
    assert (mode(tmp_path / "a"), mode(folder), mode(folder / "f")) == (0o700, 0o700, 0o600)
    assert mode(tmp_path / "loose") == 0o600 and (tmp_path / "loose").read_text() == "yz"
    before = mode(Path(os.devnull))
    with private_open(os.devnull, "wb") as handle:  # a device is written as it is, never chmod-ed
        handle.write(b"x")
    assert mode(Path(os.devnull)) == before


def test_an_export_written_by_the_command_is_private(api, tmp_path):
    with umask(0o022):
        call_command("ace_export", "tenant", "--tenant", "acme", "--out", str(tmp_path / "acme.zip"))
        call_command("ace_export", "memory", "--tenant", "acme", "--out", str(tmp_path / "memory.jsonl"))
    assert mode(tmp_path / "acme.zip") == mode(tmp_path / "memory.jsonl") == 0o600
