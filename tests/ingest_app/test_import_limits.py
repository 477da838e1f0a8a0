"""What one log may take to read (ingest_app.importers.limits), whatever the way in: a compressed "bomb" (a few
kilobytes of zstd that decompress to gigabytes) or a line of tens of megabytes is refused quickly, in bounded
memory, naming the setting — by the upload endpoint (413 and 400), by `manage.py ace_import` (the file refused, the
others imported) and by the push client (the file remembered as refused, the others sent). Also: uploads checked
whole before anything is written (a path the server holds a file in the way of), chunked uploads up to
ACE_MAX_UPLOAD_BYTES, `ace_import` on FIFOs and links, the push client on answers of an unexpected shape.

The bombs and long lines are made here, in the test, and sent streamed: the memory measured (tracemalloc, the live
server runs in a thread of this process) is the server's.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
import urllib.parse
import uuid
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ingest_app import push_client
from ingest_app.importers.detect import is_log_name
from ingest_app.models import ImportedFile
from ingest_app.pipeline import import_path
from sessions_app.models import Message, Session
from tests.ingest_app.test_imports import DATA, QWEN, SEED
from tests.ingest_app.test_push import ace, copy_logs, options, push  # noqa: F401 (the `ace` fixture)
from tests.support.api import upload
from tests.support.http import FakeServer
from tests.support.processes import ROOT, gunicorn_serving, process_env

MiB = 1024 * 1024
OPENCLAW = Path("openclaw/.openclaw/agents/main/sessions/0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36.jsonl")
ARCHIVE = ".openclaw/agents/main/sessions/0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36.jsonl.reset.2026-02-01T10-00-00.000Z.zst"
MAX_SECONDS = 5  # a refusal comes this fast on a busy test machine (the bomb used to run into the 60 s timeout)
MAX_PEAK = 16 * MiB  # what the server may allocate answering (the bombs here decompress to 64 MiB and more)


def zstd_bomb(decompressed: int, *, line: bytes = b"") -> bytes:
    """zstd of `decompressed` bytes: zeros (one endless line), or `line` repeated (many short lines)."""
    chunker = zstandard.ZstdCompressor(level=1).chunker(chunk_size=MiB)
    block = (line * (MiB // len(line) + 1))[:MiB] if line else bytes(MiB)
    out = []
    for _ in range(decompressed // MiB):
        out.extend(chunker.compress(block))
    out.extend(chunker.finish())
    return b"".join(out)


def multipart(fields: list[tuple[str, str]], name: str, parts: list[bytes]) -> tuple[list[bytes], int, str]:
    """A multipart body with one file whose bytes are `parts` (not joined): its pieces, length and content type."""
    boundary = f"limits-{uuid.uuid4().hex}"
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in fields
    )
    head += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{Path(name).name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    return (
        [head, *parts, tail],
        len(head) + sum(map(len, parts)) + len(tail),
        f"multipart/form-data; boundary={boundary}",
    )


def streamed_upload(url: str, key: str, name: str, parts, fields=()) -> tuple[int, dict, float, int]:
    """POST one file to the live server, streamed from `parts` (an iterable of bytes, with their total length
    known: `(pieces, length)`): the status, the JSON body, the seconds it took and the peak of memory allocated
    in this process (the server's thread) meanwhile."""
    pieces, length = parts
    body, total, content_type = multipart([("paths", name), *fields], name, pieces)
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=120)
    # The server's first request loads the API's modules: not what is measured.
    connection.request("GET", "/api/v1/imports/files/", headers={"Authorization": f"Bearer {key}"})
    connection.getresponse().read()
    tracemalloc.start()
    started = time.monotonic()
    try:
        connection.request(
            "POST",
            "/api/v1/imports/",
            body=iter(body),
            headers={"Authorization": f"Bearer {key}", "Content-Type": content_type, "Content-Length": str(total)},
        )
        response = connection.getresponse()
        status, answer = response.status, response.read()
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        connection.close()
    return status, json.loads(answer or b"{}"), elapsed, peak


def repeated(piece: bytes, count: int) -> tuple[list[bytes], int]:
    """`piece` `count` times, without joining them (the client holds one piece)."""
    return [piece] * count, len(piece) * count


def nothing_stored(tenant, data_dir: Path) -> bool:
    uploads = data_dir / "uploads"
    files = [p for p in uploads.rglob("*") if p.is_file()] if uploads.exists() else []
    return not files and not ImportedFile.objects.filter(tenant=tenant).exists()


# -- the upload endpoint ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decompressed", "line"),
    [(64 * MiB, b""), (64 * MiB, b'{"type":"message"}\n'), (1024 * MiB, b"")],
    ids=["one-endless-line", "many-short-lines", "32KB-of-1GiB"],
)
def test_a_zstd_bomb_is_413_naming_the_limit_quickly_and_in_bounded_memory(ace, tmp_path, decompressed, line):  # noqa: F811
    bomb = zstd_bomb(decompressed, line=line)
    assert len(bomb) < decompressed // 1000
    status, body, elapsed, peak = streamed_upload(ace["url"], ace["key"], ARCHIVE, ([bomb], len(bomb)))
    assert status == 413, body
    assert "ACE_IMPORT_MAX_COMPRESSION_RATIO (100) times its size" in body["errors"]["files.0"][0], body
    assert body["detail"].startswith(ARCHIVE)
    assert elapsed < MAX_SECONDS and peak < MAX_PEAK, (elapsed, peak)
    assert nothing_stored(ace["api"].tenant, tmp_path / "server")


def test_a_compressed_log_past_the_decompressed_size_limit_is_413_naming_it(ace, tmp_path, settings):  # noqa: F811
    settings.ACE_IMPORT_MAX_DECOMPRESSED_BYTES = 2 * MiB
    settings.ACE_IMPORT_MAX_COMPRESSION_RATIO = 100_000
    bomb = zstd_bomb(8 * MiB, line=b'{"type":"message"}\n')
    status, body, elapsed, _ = streamed_upload(ace["url"], ace["key"], ARCHIVE, ([bomb], len(bomb)))
    assert status == 413 and "ACE_IMPORT_MAX_DECOMPRESSED_BYTES (2,097,152 bytes)" in body["detail"], body
    assert nothing_stored(ace["api"].tenant, tmp_path / "server")


def test_a_line_longer_than_the_limit_is_400_naming_it_quickly_and_in_bounded_memory(ace, tmp_path):  # noqa: F811
    pieces, length = repeated(b"x" * MiB, 40)  # one 40 MiB line: past the default 32 MiB
    status, body, elapsed, peak = streamed_upload(ace["url"], ace["key"], "big.jsonl", ([*pieces, b"\n"], length + 1))
    assert status == 400, body
    assert body["errors"]["files.0"] == [
        "big.jsonl: line 1 is longer than ACE_IMPORT_MAX_LINE_BYTES (33,554,432 bytes)"
    ]
    assert elapsed < MAX_SECONDS * 2 and peak < MAX_PEAK, (elapsed, peak)  # 40 MiB through the loopback, then no more
    assert nothing_stored(ace["api"].tenant, tmp_path / "server")


def test_an_appended_part_is_streamed_to_disk_not_held_in_memory(ace, tmp_path):  # noqa: F811
    seed = (DATA / SEED).read_bytes()
    assert upload(ace["api"], ("seed.jsonl", seed), offsets=[0]).status_code == 201
    line = b'{"type":"custom","data":"' + b"y" * MiB + b'"}\n'  # a record OpenClaw's parser passes over
    status, body, _, peak = streamed_upload(
        ace["url"], ace["key"], "seed.jsonl", repeated(line, 24), fields=[("offsets", str(len(seed)))]
    )
    assert status == 201, body
    assert (body["files"][0]["stored_bytes"], body["lines_read"]) == (len(seed) + 24 * len(line), 24)
    assert peak < MAX_PEAK, peak  # 24 MiB appended, a piece at a time


def test_a_long_line_continued_by_an_appended_part_is_400_with_its_line_number(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    settings.ACE_IMPORT_MAX_LINE_BYTES = 1000
    data = (DATA / SEED).read_bytes()
    lines = data.count(b"\n")
    first = upload(api, ("seed.jsonl", data + b'{"type": "' + b"y" * 600), offsets=[0])
    assert first.status_code == 201, first.json()
    grown = upload(api, ("seed.jsonl", b"y" * 600 + b'"}\n'), offsets=[len(data) + 610])
    assert grown.status_code == 400, grown.json()
    assert grown.json()["errors"]["files.0"] == [
        f"seed.jsonl: line {lines + 1} is longer than ACE_IMPORT_MAX_LINE_BYTES (1,000 bytes)"
    ]
    stored = tmp_path / "uploads" / str(api.tenant.pk) / "seed.jsonl"
    assert stored.stat().st_size == len(data) + 610  # nothing appended


GEMINI = Path(
    "gemini_cli/.gemini/tmp/79b1946573b55334fbdb6d41866f54789477fe12ecee2ed364ceea086a02ef82/chats/"
    "session-2026-02-10T17-27-08c1f87b.json"
)


def test_a_whole_document_log_larger_than_a_line_may_be_is_400_and_refused_by_ace_import(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path / "server"
    document = (DATA / GEMINI).read_bytes()
    settings.ACE_IMPORT_MAX_LINE_BYTES = len(document) - 1
    name = str(GEMINI.relative_to("gemini_cli"))
    response = upload(api, ("session.json", document), paths=[name])
    assert response.status_code == 400, response.json()
    assert f"larger than ACE_IMPORT_MAX_LINE_BYTES ({len(document) - 1:,} bytes)" in response.json()["detail"]
    assert nothing_stored(api.tenant, tmp_path / "server")

    local = tmp_path / "home" / GEMINI
    local.parent.mkdir(parents=True)
    local.write_bytes(document)
    summary = import_path(tenant=api.tenant, path=tmp_path / "home")
    assert (summary.files_refused, summary.messages) == (1, 0)
    assert "larger than ACE_IMPORT_MAX_LINE_BYTES" in summary.files[0].reason
    settings.ACE_IMPORT_MAX_LINE_BYTES = len(document)
    assert import_path(tenant=api.tenant, path=tmp_path / "home").messages > 0


def test_a_log_within_the_limits_is_imported_whole_streamed_or_compressed(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    data = (DATA / OPENCLAW).read_bytes()
    archive = zstandard.ZstdCompressor().compress(data)
    response = upload(api, ("a.zst", archive), paths=[ARCHIVE])
    assert response.status_code == 201, response.json()
    assert (response.json()["files_imported"], response.json()["messages"]) == (1, Message.objects.count())
    assert Message.objects.count() > 0


COMPRESSED = zstandard.ZstdCompressor().compress((DATA / OPENCLAW).read_bytes())


def _damaged(data: bytes, cut: int, flips: list[tuple[int, int]], garbage: bytes) -> bytes:
    damaged = bytearray(data[: max(cut, 0)] if cut < len(data) else data)
    for position, value in flips:
        if damaged:
            damaged[position % len(damaged)] = value
    return bytes(damaged) + garbage


def test_truncated_and_corrupted_uploads_are_never_a_server_error(api, settings, tmp_path):
    """Fuzz: a real archive and a real log, cut, with bytes changed and garbage added; and random bytes. The answer
    is always 201 (read, or the file refused with the reason) or a 4xx, never a 500; and small limits are kept."""
    settings.ACE_DATA_DIR = tmp_path
    settings.ACE_IMPORT_MAX_LINE_BYTES = 4096
    plain = (DATA / QWEN).read_bytes()
    flips = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4)

    @hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(
        st.sampled_from([(COMPRESSED, ARCHIVE), (plain, "chat.jsonl")]),
        st.integers(-1, len(COMPRESSED) + 10),
        flips,
        st.one_of(st.just(b""), st.binary(max_size=64), st.just(b"x" * 5000)),
        st.booleans(),
    )
    def check(source, cut, changes, garbage, random_bytes):
        data, name = source
        content = garbage if random_bytes else _damaged(data, cut, changes, garbage)
        response = upload(api, ("part", content), paths=[name])
        assert response.status_code in (201, 400, 409, 413), (response.status_code, response.content[:300])
        if response.status_code == 413:
            assert "ACE_IMPORT_MAX_" in response.json()["detail"]

    check()


def test_a_path_under_a_file_the_server_holds_is_400_and_nothing_of_the_request_is_saved(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    seed = (DATA / SEED).read_bytes()
    assert upload(api, ("a.jsonl", seed)).status_code == 201
    before = (Session.objects.count(), ImportedFile.objects.count())
    response = upload(
        api, ("c.jsonl", (DATA / QWEN).read_bytes()), ("b.jsonl", seed), paths=["c.jsonl", "a.jsonl/b.jsonl"]
    )
    assert response.status_code == 400, response.json()
    assert list(response.json()["errors"]) == ["files.1"]
    assert "'a.jsonl' cannot be a folder" in response.json()["errors"]["files.1"][0]
    assert (Session.objects.count(), ImportedFile.objects.count()) == before
    assert not (tmp_path / "uploads" / str(api.tenant.pk) / "c.jsonl").exists()

    # The other way round: a folder where the file would go; and both in one request.
    assert upload(api, ("b.jsonl", seed), paths=["d.jsonl/b.jsonl"]).status_code == 201
    folder = upload(api, ("d.jsonl", seed))
    assert folder.status_code == 400 and "holds a folder 'd.jsonl'" in folder.json()["detail"], folder.json()
    both = upload(api, ("e.jsonl", seed), ("f.jsonl", seed), paths=["e.jsonl", "e.jsonl/f.jsonl"])
    assert both.status_code == 400 and "a folder of 'e.jsonl/f.jsonl'" in both.json()["errors"]["files.0"][0]
    assert not (tmp_path / "uploads" / str(api.tenant.pk) / "e.jsonl").exists()


# -- chunked uploads under gunicorn ---------------------------------------------------------------------


@pytest.fixture
def gunicorn_small_limits():
    """gunicorn (as the Procfile serves the web) with small limits: 64 KiB bodies, 1 MiB uploads."""
    with gunicorn_serving(ACE_MAX_REQUEST_BYTES=str(64 * 1024), ACE_MAX_UPLOAD_BYTES=str(MiB)) as port:
        yield port


def _chunked_upload(port: int, key: str, name: str, content: bytes) -> tuple[int, dict]:
    pieces, _, content_type = multipart([("paths", name)], name, [content])
    body = b"".join(pieces)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request(
        "POST",
        "/api/v1/imports/",
        body=iter([body[i : i + 50_000] for i in range(0, len(body), 50_000)]),
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
        encode_chunked=True,
    )
    response = connection.getresponse()
    status, answer = response.status, response.read()
    connection.close()
    return status, json.loads(answer or b"{}")


@pytest.mark.django_db(transaction=True)
def test_chunked_uploads_take_the_upload_limit_not_the_request_limit(gunicorn_small_limits):
    from tests.support.api import make_client

    acme = make_client("acme")
    seed = (DATA / SEED).read_bytes()
    log = seed * (200 * 1024 // len(seed) + 1)  # ~200 KiB: over the 64 KiB of other requests
    status, body = _chunked_upload(gunicorn_small_limits, acme.key, "seed.jsonl", log)
    assert status == 201, body
    assert body["files_imported"] == 1
    status, body = _chunked_upload(gunicorn_small_limits, acme.key, "big.jsonl", log * 6)  # ~1.2 MiB
    assert status == 413 and "larger than 1048576 bytes" in body["detail"], body


# -- ace_import -------------------------------------------------------------------------------------------


def test_ace_import_refuses_bombs_and_long_lines_skips_fifos_and_outside_links_and_imports_the_rest(
    transactional_db, tmp_path
):
    tree = tmp_path / "tree"
    good = tree / ".qwen" / QWEN.relative_to("qwen_code/.qwen")
    good.parent.mkdir(parents=True)
    shutil.copy(DATA / QWEN, good)
    sessions = tree / ".openclaw" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / Path(ARCHIVE).name).write_bytes(zstd_bomb(64 * MiB))
    long_line = tree / "long.jsonl"
    long_line.write_bytes((DATA / SEED).read_bytes() + b'{"x": "' + b"y" * 3 * MiB + b'"}\n')
    os.mkfifo(tree / "pipe.jsonl")
    outside = tmp_path / "elsewhere" / "secret.jsonl"
    outside.parent.mkdir()
    shutil.copy(DATA / SEED, outside)
    (tree / "link-out.jsonl").symlink_to(outside)
    (tree / "link-in.jsonl").symlink_to(good)

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "ace_import", str(tree), "--machine", "m"],
        env=process_env(ACE_IMPORT_MAX_LINE_BYTES=str(MiB)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 30
    assert done.returncode == 3, done.stderr
    errors = done.stderr
    assert (
        f"{sessions / Path(ARCHIVE).name}:0: error: it decompresses to more than ACE_IMPORT_MAX_COMPRESSION_RATIO"
        in errors
    )
    assert f"{long_line}:0: error: line 9 is longer than ACE_IMPORT_MAX_LINE_BYTES (1,048,576 bytes)" in errors
    assert f"{tree / 'pipe.jsonl'}:0: warning: skipped: not a regular file (a FIFO): not read" in errors
    assert f"{tree / 'link-out.jsonl'}:0: warning: skipped: a symbolic link to {outside}, outside the folder" in errors
    assert done.stdout.strip().splitlines()[-1].startswith("imported 2 files (0 unchanged, 2 refused, 2 skipped)")
    # The good log and the link to it inside the tree are read; the file outside is not.
    imported = set(ImportedFile.objects.values_list("path", flat=True))
    assert str(good) in imported and str(tree / "link-in.jsonl") in imported
    assert not any(path.startswith(str(outside.parent)) for path in imported)


def test_a_fifo_given_as_the_path_is_skipped_at_once(api, tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    summary = import_path(tenant=api.tenant, path=fifo)
    assert (summary.files_seen, summary.files_skipped, summary.files_refused) == (1, 1, 0)
    assert summary.line().startswith("imported 0 files (0 unchanged, 0 refused, 1 skipped)")
    assert summary.issues[0].message == "skipped: not a regular file (a FIFO): not read"


# -- the push client ------------------------------------------------------------------------------------


def test_push_remembers_a_bomb_as_refused_with_the_limit_and_sends_the_others(ace, tmp_path):  # noqa: F811
    home = copy_logs(tmp_path / "home")
    bomb = home / "openclaw" / ARCHIVE
    bomb.write_bytes(zstd_bomb(64 * MiB))
    opts = options(ace["url"], ace["key"], "laptop", [home], tmp_path / "state")
    started = time.monotonic()
    result = push(opts)
    assert time.monotonic() - started < 30
    assert result.exit_code == 0
    state = push_client.State(push_client.state_path(opts.state_dir, opts.server, opts.machine))
    assert "ACE_IMPORT_MAX_COMPRESSION_RATIO" in state.files[str(bomb)]["refused"]
    logs = [p for p in home.rglob("*") if p.is_file() and is_log_name(p) and p.parent.name != "unknown" and p != bomb]
    assert result.files_sent == len(logs)
    again = push(opts)
    assert (again.exit_code, again.bytes_sent) == (0, 0)  # not sent again until it changes


@pytest.mark.parametrize(
    ("holdings", "answer"),
    [
        ((200, {"results": []}), (201, {})),
        ((200, {"results": []}), (201, {"files": [{"path": "x", "status": "imported"}]})),
        ((200, {"results": []}), (201, [])),
        ((200, {"results": []}), (201, {"files": "all of them"})),
        ((200, {"results": [{"path": 3}]}), (201, {})),
        ((200, []), (201, {})),
        ((200, {"results": []}), (201, b"<html>a proxy's page</html>")),
    ],
    ids=["no-files", "no-stored-bytes", "a-list", "files-not-a-list", "bad-holdings", "holdings-a-list", "html"],
)
def test_push_marks_nothing_sent_the_answer_does_not_confirm_and_says_so_without_a_traceback(
    tmp_path, caplog, holdings, answer
):
    log = tmp_path / "home" / "chat.jsonl"
    log.parent.mkdir()
    shutil.copy(DATA / QWEN, log)
    answers = {"GET": holdings, "POST": answer}  # the GET of the holdings, the POST of the upload
    with FakeServer(lambda request: answers[request.method]) as server:
        opts = options(server.url, "ace_key", "laptop", [log.parent], tmp_path / "state", retries=0)
        result = push_client.push_once(opts, sleep=lambda seconds: None)
    assert result.exit_code == push_client.EXIT_UNREACHABLE, result
    assert result.files_sent == 0
    state = push_client.State(push_client.state_path(opts.state_dir, opts.server, opts.machine))
    assert state.files == {}  # the next run asks the server again
    assert not any(record.exc_info for record in caplog.records)


def test_push_skips_fifos_and_links_out_of_the_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(DATA / QWEN, home / "chat.jsonl")
    os.mkfifo(home / "pipe.jsonl")
    outside = tmp_path / "secret.jsonl"
    shutil.copy(DATA / SEED, outside)
    (home / "out.jsonl").symlink_to(outside)
    (home / "in.jsonl").symlink_to(home / "chat.jsonl")
    found = {file.path.name for file in push_client.find_logs([str(home)], push_client.is_log_name)}
    assert found == {"chat.jsonl", "in.jsonl"}
