"""Importing every file of an OpenClaw session's history: a real-shaped backup (live transcript, its
pre-compaction checkpoint, reset and deleted archives, a thread's session) imports every request once, and
a live file renamed to an archive after it was imported is recognised and read on, never twice."""

import os
import shutil
from pathlib import Path

import pytest

from ingest_app.importers import openclaw, parse_file
from ingest_app.models import ImportedFile
from ingest_app.pipeline import import_files, import_path
from sessions_app.models import Conversation, Session
from sessions_app.selectors.recount import session_count_drift
from tests.ingest_app.test_imports import COUNTERS, expected, line_start, stats

BACKUP = openclaw.TOOL.samples / "backup"
SESSIONS = Path(".openclaw/agents/main/sessions")
EARLIER, LIVE, DELETED, TOPIC = (
    "2b4e7a91-3c5d-4f6e-8a9b-0c1d2e3f4a5b",
    "9d8c7b6a-5f4e-4d3c-9b2a-1f0e9d8c7b6a",
    "4f1a2b3c-6d7e-4a8b-9c0d-1e2f3a4b5c6d",
    "7e6d5c4b-3a29-4f18-8e7d-6c5b4a392817",
)
LIVE_NAME = f"{LIVE}.jsonl"
CHECKPOINT_NAME = f"{LIVE}.checkpoint.c0ffee12-3456-4789-8abc-def012345678.jsonl"
RESET_SUFFIX = ".reset.2026-03-05T08-00-00.000Z"


def backup(tmp_path: Path, *names: str) -> Path:
    """A copy of the backup's sessions folder (only `names`, when given) under tmp_path."""
    folder = tmp_path / SESSIONS
    folder.mkdir(parents=True)
    for path in (BACKUP / SESSIONS).iterdir():
        if not names or path.name in names:
            shutil.copy(path, folder / path.name)
    return folder


def session(api, agent_session_id: str) -> Session:
    return Session.objects.get(tenant=api.tenant, tool="openclaw", agent_session_id=agent_session_id)


def test_a_backup_imports_every_request_of_live_files_and_archives_once(api, tmp_path):
    folder = backup(tmp_path)
    summary = import_path(tenant=api.tenant, path=tmp_path)

    live = parse_file(folder / LIVE_NAME)
    archives = {
        EARLIER: parse_file(folder / f"{EARLIER}.jsonl.reset.2026-03-04T09-12-33.411Z"),
        DELETED: parse_file(folder / f"{DELETED}.jsonl.deleted.2026-03-02T11-40-17.052Z"),
        TOPIC: parse_file(folder / f"{TOPIC}-topic-42.jsonl"),
    }
    # 5 transcripts read (sessions.json is not one), 4 sessions: the checkpoint is the live session's.
    assert (summary.files_imported, summary.files_refused, summary.sessions_created) == (5, 0, 4)
    assert stats(api, session(api, LIVE)) == expected(live.messages)
    for agent_session_id, parsed in archives.items():
        assert stats(api, session(api, agent_session_id)) == expected(parsed.messages)
    everything = expected(live.messages, *(parsed.messages for parsed in archives.values()))
    assert (summary.requests, summary.tokens["total_tokens"]) == (everything["requests"], everything["total_tokens"])
    assert everything["requests"] == 4 + 2 + 1 + 1  # the live session's 4 calls (one failed, billed), 2, 1, 1
    totals = api.get("/api/v1/stats/", {"group_by": "tool"}).json()["totals"]
    assert {name: totals[name] for name in COUNTERS if name != "conversations"} == {
        name: value for name, value in everything.items() if name != "conversations"
    }
    assert all(session_count_drift(session=s) == {} for s in Session.objects.filter(tenant=api.tenant))
    assert session(api, EARLIER).user_id == "ou_7c1e5a9d3b2f4e6a8c0d1e3f5a7b9c2d"  # the Feishu DM's sender
    conversation = Conversation.objects.filter(session=session(api, LIVE)).order_by("created_at").first()
    assert conversation.feishu_conversation_id == "ou_7c1e5a9d3b2f4e6a8c0d1e3f5a7b9c2d"

    again = import_path(tenant=api.tenant, path=tmp_path)
    assert (again.files_unchanged, again.messages, again.requests) == (5, 0, 0)


@pytest.mark.parametrize("order", ["checkpoint first", "live first", "one import"])
def test_a_checkpoint_copied_from_the_live_file_never_counts_its_calls_twice(api, tmp_path, order):
    folder = backup(tmp_path, LIVE_NAME, CHECKPOINT_NAME)
    if order == "one import":
        import_path(tenant=api.tenant, path=folder)
    else:
        first, second = (CHECKPOINT_NAME, LIVE_NAME) if order == "checkpoint first" else (LIVE_NAME, CHECKPOINT_NAME)
        import_path(tenant=api.tenant, path=folder / first)
        summary = import_path(tenant=api.tenant, path=folder / second)
        if second == CHECKPOINT_NAME:
            assert (summary.messages, summary.requests) == (0, 0)
    assert stats(api, session(api, LIVE)) == expected(parse_file(folder / LIVE_NAME).messages)


def rename_to_archive(path: Path) -> Path:
    archive = path.with_name(path.name + RESET_SUFFIX)
    os.rename(path, archive)
    return archive


def test_a_live_file_renamed_to_an_archive_is_read_on_from_where_it_stopped(api, tmp_path):
    folder = backup(tmp_path, LIVE_NAME)
    live = folder / LIVE_NAME
    whole = live.read_bytes()
    cut = line_start(live, 8)
    live.write_bytes(whole[:cut])
    first = import_path(tenant=api.tenant, path=tmp_path)
    assert first.files_imported == 1

    archive = rename_to_archive(live)  # OpenClaw's /reset
    with archive.open("ab") as handle:
        handle.write(whole[cut:])  # and lines that reached it before the rename
    second = import_path(tenant=api.tenant, path=tmp_path)

    assert second.files_renamed == 1 and ", 1 renamed)" in second.line()
    (result,) = second.files
    assert (result.path, result.renamed_from, result.status) == (str(archive), str(live), "imported")
    assert second.lines_read == whole.count(b"\n") - 7  # only the lines after the cut
    assert second.sessions_created == 0
    parsed = parse_file(archive)
    assert stats(api, session(api, LIVE)) == expected(parsed.messages)
    assert second.messages == len(parsed.messages) - len(parse_file(archive, start_offset=0, max_bytes=cut).messages)
    (record,) = ImportedFile.objects.filter(tenant=api.tenant)
    assert (record.path, record.offset, record.session_id) == (str(archive), len(whole), session(api, LIVE).pk)

    third = import_path(tenant=api.tenant, path=tmp_path)
    assert (third.files_unchanged, third.files_renamed, third.messages) == (1, 0, 0)


def test_a_rename_without_new_lines_is_reported_and_reads_nothing(api, tmp_path):
    folder = backup(tmp_path, LIVE_NAME)
    import_path(tenant=api.tenant, path=tmp_path)
    rename_to_archive(folder / LIVE_NAME)
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert (summary.files_unchanged, summary.files_renamed, summary.lines_read, summary.messages) == (1, 1, 0, 0)
    assert summary.as_dict()["files"][0]["renamed_from"] == str(folder / LIVE_NAME)


def test_a_copy_under_an_archive_name_next_to_the_live_file_is_no_rename(api, tmp_path):
    folder = backup(tmp_path, LIVE_NAME)
    live = folder / LIVE_NAME
    import_path(tenant=api.tenant, path=tmp_path)
    # Not a rename: another file under the archive's name, the live file still in place.
    archive = live.with_name(live.name + RESET_SUFFIX)
    shutil.copy(live, archive)
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert summary.files_renamed == 0
    assert set(ImportedFile.objects.filter(tenant=api.tenant).values_list("path", flat=True)) == {
        str(live),
        str(archive),
    }
    assert (summary.messages, summary.requests) == (0, 0)  # the same session's messages, stored once


def test_an_uploaded_archive_of_an_uploaded_live_file_is_recognised_by_its_bytes_and_session(api, tmp_path):
    folder = backup(tmp_path, LIVE_NAME)
    live = folder / LIVE_NAME
    whole = live.read_bytes()
    cut = line_start(live, 8)
    live.write_bytes(whole[:cut])
    import_files(tenant=api.tenant, paths=[live])
    # An upload writes each file anew: the archive is a new inode, with the old bytes and more.
    archive = live.with_name(live.name + RESET_SUFFIX)
    archive.write_bytes(whole)
    summary = import_files(tenant=api.tenant, paths=[archive])
    assert summary.files_renamed == 1
    assert summary.lines_read == whole.count(b"\n") - 7
    assert stats(api, session(api, LIVE)) == expected(parse_file(archive).messages)


def test_an_uploaded_archive_of_another_session_is_not_taken_for_the_live_file(api, tmp_path):
    folder = backup(tmp_path, LIVE_NAME)
    live = folder / LIVE_NAME
    import_files(tenant=api.tenant, paths=[live])
    other = live.with_name(live.name + RESET_SUFFIX)
    other.write_bytes(live.read_bytes().replace(LIVE.encode(), DELETED.encode(), 1))  # another session's header
    summary = import_files(tenant=api.tenant, paths=[other])
    assert summary.files_renamed == 0 and summary.sessions_created == 1


def test_a_zstd_compressed_archive_is_read_like_the_archive_it_compresses(api, tmp_path):
    """Newer OpenClaw compresses archived transcripts (`<archive>.zst`): the history is read all the same,
    whole, and counts what the uncompressed archive counts; a file that only claims to be one is refused with
    the reason, as one file."""
    import zstandard

    archive = BACKUP / SESSIONS / f"{EARLIER}.jsonl.reset.2026-03-04T09-12-33.411Z"
    folder = backup(tmp_path, LIVE_NAME)
    compressed = folder / f"{archive.name}.zst"
    compressed.write_bytes(zstandard.ZstdCompressor().compress(archive.read_bytes()))
    damaged = folder / f"{DELETED}.jsonl.deleted.2026-03-02T11-40-17.052Z.zst"
    damaged.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(11, 256)) * 4)  # a zstd frame's magic, then noise

    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert (summary.files_imported, summary.files_refused) == (2, 1)
    assert stats(api, session(api, EARLIER)) == expected(parse_file(archive).messages)
    assert parse_file(compressed).messages and parse_file(compressed).issues == []
    (issue,) = [issue for issue in summary.issues if issue.path == str(damaged)]
    assert issue.line == 0 and issue.level == "error" and "zstd" in issue.message
    assert not Session.objects.filter(tenant=api.tenant, agent_session_id=DELETED).exists()

    again = import_path(tenant=api.tenant, path=tmp_path)  # unchanged: nothing read again, nothing counted twice
    assert (again.files_unchanged, again.messages) == (2, 0)
    assert stats(api, session(api, EARLIER)) == expected(parse_file(archive).messages)


def test_damaged_compressed_archives_give_issues_never_an_exception(tmp_path):
    """Fuzz: a compressed archive cut at random places, or with random bytes changed, is read as far as it
    decompresses or refused with the reason; parsing it never raises."""
    import random

    import zstandard

    archive = BACKUP / SESSIONS / f"{EARLIER}.jsonl.reset.2026-03-04T09-12-33.411Z"
    whole = zstandard.ZstdCompressor().compress(archive.read_bytes())
    folder = tmp_path / SESSIONS
    folder.mkdir(parents=True)
    path = folder / f"{archive.name}.zst"
    rng = random.Random(15)
    for _ in range(60):
        data = bytearray(whole[: rng.randrange(len(whole) + 1)])
        for _ in range(rng.choice([0, 0, 1, 3])):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
        result = parse_file(path, flush=True)
        assert result.messages or result.issues or not data
