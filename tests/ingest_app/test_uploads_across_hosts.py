"""Issue 34: an upload begun through one host and continued through another (each host its own ACE_DATA_DIR, one
database) imports exactly as one continued through a single host. What the server received is in the storage
every host reads (`UploadSegment` + platform_kit.storage); a host's copy under its data folder is a cache made
from it. The scenarios here run against the database storage (the default), and against an S3-compatible server
in tests/platform_kit/test_storage_s3.py."""

from __future__ import annotations

import pytest
from django.db.models import Sum
from django.test import override_settings

from ingest_app.models import ImportedFile, UploadSegment
from platform_kit.models import StoredObject
from platform_kit.storage import ace_storage
from sessions_app.models import LlmRequest, Message, Session
from tests.ingest_app.test_imports import CLAUDE, CLAUDE_AGENT
from tests.support.agent_logs import DATA
from tests.support.api import make_client, upload

MAIN = str(CLAUDE.relative_to("claude_code"))
AGENT = str(CLAUDE_AGENT.relative_to("claude_code"))


def send(api, data_dir, name: str, content: bytes, offset: int | None = None, **fields):
    """One part through the host whose data folder is `data_dir`."""
    with override_settings(ACE_DATA_DIR=data_dir):
        if offset is not None:
            fields["offsets"] = [offset]
        return upload(api, ("log.jsonl", content), paths=[name], machine="laptop", **fields)


def totals(tenant) -> dict:
    messages = Message.objects.filter(tenant=tenant)
    requests = LlmRequest.objects.filter(tenant=tenant)
    files = ImportedFile.objects.filter(tenant=tenant).order_by("path")
    prefix = f"uploads/{tenant.pk}/"
    return {
        "sessions": Session.objects.filter(tenant=tenant).count(),
        "messages": messages.count(),
        "requests": requests.count(),
        "tokens": requests.aggregate(
            input=Sum("input_tokens"), output=Sum("output_tokens"), cache=Sum("cache_read_tokens")
        ),
        "files": [
            (f.path.removeprefix(prefix), f.offset, f.lines_read, f.messages_imported, f.pending, f.head_hash)
            for f in files
        ],
    }


def cuts(data: bytes) -> tuple[int, int]:
    """Two places to cut a log: the middle of a line, and a line's start further on."""
    lines = data.splitlines(keepends=True)
    first = sum(map(len, lines[:4])) + len(lines[4]) // 2
    return first, sum(map(len, lines[:9]))


def upload_in_three_parts(api, hosts: list, name: str, data: bytes) -> list[dict]:
    """The log in three parts (the first cut mid-line), the i-th part through hosts[i]; each 201."""
    first, second = cuts(data)
    bodies = []
    for host, (start, end) in zip(hosts, ((0, first), (first, second), (second, len(data))), strict=True):
        answer = send(api, host, name, data[start:end], offset=start)
        assert answer.status_code == 201, answer.json()
        bodies.append(answer.json())
    return bodies


def test_an_upload_continued_on_another_host_imports_as_on_one(db, tmp_path):
    data, agent = (DATA / CLAUDE).read_bytes(), (DATA / CLAUDE_AGENT).read_bytes()
    one, host1, host2 = tmp_path / "one", tmp_path / "host1", tmp_path / "host2"

    single = make_client("single")
    upload_in_three_parts(single, [one, one, one], MAIN, data)
    assert send(single, one, AGENT, agent).status_code == 201

    api = make_client("spread")
    bodies = upload_in_three_parts(api, [host1, host2, host1], MAIN, data)
    assert send(api, host2, AGENT, agent).status_code == 201

    assert [body["files"][0]["stored_bytes"] for body in bodies] == [*cuts(data), len(data)]
    assert totals(api.tenant) == totals(single.tenant)
    assert totals(api.tenant)["messages"] == 23 and totals(api.tenant)["requests"] == 9
    # Each host's copy is the whole file: host 1's was brought up to what host 2 had received before it appended.
    for host, tenant in ((host1, api.tenant), (one, single.tenant)):
        assert (host / "uploads" / str(tenant.pk) / "~machines" / "laptop" / MAIN).read_bytes() == data
    # The file is three segments in the storage, whatever host received each.
    segments = UploadSegment.objects.filter(tenant=api.tenant, path=MAIN).order_by("start")
    first, second = cuts(data)
    assert [(s.start, s.start + s.length) for s in segments] == [(0, first), (first, second), (second, len(data))]
    assert b"".join(ace_storage().open(s.storage_name).read() for s in segments) == data

    # What the server holds, as each host answers it (ace_push resumes from it): the same, a fresh host included.
    listings = []
    for host in (host1, host2, tmp_path / "host3"):
        with override_settings(ACE_DATA_DIR=host):
            listings.append(api.get("/api/v1/imports/files/", {"machine": "laptop"}).json()["results"])
    assert listings[0] == listings[1] == listings[2]
    assert {row["path"]: row["stored_bytes"] for row in listings[0]} == {MAIN: len(data), AGENT: len(agent)}


def test_a_retry_through_another_host_is_idempotent_and_refusals_are_unchanged(db, tmp_path):
    data = (DATA / CLAUDE).read_bytes()
    first, second = cuts(data)
    host1, host2 = tmp_path / "host1", tmp_path / "host2"
    api = make_client("retries")
    assert send(api, host1, MAIN, data[:second], offset=0).status_code == 201
    # The response was lost; the client sends again, through the other host, from an earlier offset.
    again = send(api, host2, MAIN, data[first:], offset=first)
    assert again.status_code == 201, again.json()
    assert again.json()["files"][0]["stored_bytes"] == len(data)
    assert UploadSegment.objects.filter(tenant=api.tenant, path=MAIN).aggregate(Sum("length"))["length__sum"] == len(
        data
    )
    # Bytes that differ from what host 1 received: a 409 through host 2 (whose copy was made from the storage).
    changed = send(api, host1, MAIN, b"X" + data[first + 1 : second], offset=first)
    assert changed.status_code == 409
    assert "differ from those the server has" in changed.json()["detail"]
    beyond = send(api, host2, MAIN, b"{}\n", offset=len(data) + 5)
    assert beyond.status_code == 400
    assert f"send from offset {len(data)}" in beyond.json()["detail"]
    assert Message.objects.filter(tenant=api.tenant).count() == 19  # the main file's, as when sent once


def test_a_file_replaced_through_one_host_is_made_again_on_the_other(db, tmp_path, django_capture_on_commit_callbacks):
    """A whole file sent again (rewritten, truncated) replaces what every host holds: a host whose copy is of the
    old file makes it again before comparing an appended part with it."""
    data = (DATA / CLAUDE).read_bytes()
    host1, host2 = tmp_path / "host1", tmp_path / "host2"
    api = make_client("replaced")
    assert send(api, host1, MAIN, data).status_code == 201
    _, second = cuts(data)
    with django_capture_on_commit_callbacks(execute=True):
        replaced = send(api, host2, MAIN, data[:second])  # the client's file was truncated: sent whole
    assert replaced.status_code == 201
    copy = host1 / "uploads" / str(api.tenant.pk) / "~machines" / "laptop" / MAIN
    assert copy.read_bytes() == data  # host 1 has not heard of it yet
    grown = send(api, host1, MAIN, data[second:], offset=second)
    assert grown.status_code == 201, grown.json()
    assert copy.read_bytes() == data
    segments = UploadSegment.objects.filter(tenant=api.tenant, path=MAIN).order_by("start")
    assert [(s.start, s.length) for s in segments] == [(0, second), (second, len(data) - second)]
    # The replaced file's bytes left the storage with it.
    assert StoredObject.objects.filter(tenant_id=api.tenant.pk, name__contains="/uploads/").count() == 2


def test_a_path_held_as_a_file_through_one_host_cannot_be_a_folder_through_another(db, tmp_path):
    data = (DATA / CLAUDE).read_bytes()
    api = make_client("in-the-way")
    assert send(api, tmp_path / "host1", "a/b.jsonl", data).status_code == 201
    answer = send(api, tmp_path / "host2", "a/b.jsonl/c.jsonl", data)
    assert answer.status_code == 400
    assert "the server holds a file 'a/b.jsonl'" in answer.json()["detail"]
    answer = send(api, tmp_path / "host2", "a", data)
    assert answer.status_code == 400  # not a log's name: refused before the storage is asked


def test_a_file_appended_to_many_times_is_stored_again_as_one_segment(
    db, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    from ingest_app.pipeline import upload_copies

    monkeypatch.setattr(upload_copies, "MAX_SEGMENTS", 3)
    data = (DATA / CLAUDE).read_bytes()
    lines = data.splitlines(keepends=True)
    api, single = make_client("many-parts"), make_client("many-parts-single")
    assert send(single, tmp_path / "one", MAIN, data).status_code == 201
    offset, counts = 0, []
    with django_capture_on_commit_callbacks(execute=True):
        for n, line in enumerate(lines):  # a line a request, through either host
            answer = send(api, tmp_path / f"host{n % 2}", MAIN, line, offset=offset)
            assert answer.status_code == 201, answer.json()
            offset += len(line)
            counts.append(UploadSegment.objects.filter(tenant=api.tenant, path=MAIN).count())
    assert max(counts) == 3 and 1 in counts[3:]  # merged into one when a fourth came
    segments = UploadSegment.objects.filter(tenant=api.tenant, path=MAIN).order_by("start")
    assert b"".join(b"".join(ace_storage().open(s.storage_name).chunks()) for s in segments) == data
    assert StoredObject.objects.filter(tenant_id=api.tenant.pk).count() == len(segments)  # the merged ones went
    assert totals(api.tenant)["messages"] == totals(single.tenant)["messages"] == 19
    assert totals(api.tenant)["tokens"] == totals(single.tenant)["tokens"]


def test_files_of_one_folder_are_stored_side_by_side_and_one_file_at_a_time(db, tmp_path):
    """The upload locks, as another host holds them while it stores `a.jsonl/x.jsonl`: `a.jsonl/y.jsonl` is stored
    beside it; the same file, or a file `a.jsonl` where that host makes a folder, waits (here: gives up)."""
    import psycopg
    from django.db import OperationalError, connection

    data = (DATA / CLAUDE).read_bytes()
    api = make_client("side-by-side")
    params = connection.get_connection_params()
    key = f"ace-upload:{api.tenant.pk}:laptop:"
    with psycopg.connect(**{k: params[k] for k in ("dbname", "user", "host", "port") if params.get(k)}) as other:
        other.execute(
            "SELECT pg_advisory_xact_lock_shared(hashtext(%s)), pg_advisory_xact_lock(hashtext(%s))",
            [key + "a.jsonl", key + "a.jsonl/x.jsonl"],
        )  # host 2, storing a.jsonl/x.jsonl (its transaction open)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '1s'")
        try:
            assert send(api, tmp_path / "host1", "a.jsonl/y.jsonl", data).status_code == 201
            for waits in ("a.jsonl/x.jsonl", "a.jsonl"):
                with pytest.raises(OperationalError, match="lock timeout"):
                    send(api, tmp_path / "host1", waits, data)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")
    assert list(UploadSegment.objects.filter(tenant=api.tenant).values_list("path", flat=True)) == ["a.jsonl/y.jsonl"]


def test_forgetting_a_user_through_one_host_deletes_their_files_everywhere(
    db, tmp_path, django_capture_on_commit_callbacks
):
    """Their segments and stored bytes at once, the forgetting host's copies after the commit, another host's the
    first time it uses the tenant's uploads again (here: it lists them)."""
    data = (DATA / CLAUDE).read_bytes()
    host1, host2 = tmp_path / "host1", tmp_path / "host2"
    api = make_client("forgets")
    with django_capture_on_commit_callbacks(execute=True):
        assert send(api, host1, MAIN, data, user_id="wang").status_code == 201
        kept = send(api, host1, "other.jsonl", data.replace(b"5f0c2a9e", b"6f0c2a9e"), user_id="li")
        assert kept.status_code == 201, kept.json()
    forgotten = UploadSegment.objects.get(tenant=api.tenant, path=MAIN).storage_name
    assert ace_storage().exists(forgotten)
    with django_capture_on_commit_callbacks(execute=True), override_settings(ACE_DATA_DIR=host2):
        forgot = api.post("/api/v1/users/wang/forget/", {"confirm": "wang"}, format="json")
    assert forgot.status_code == 200, forgot.content
    assert forgot.json()["deleted"]["ingest_app.ImportedFile (uploaded copy)"] == 1
    left = UploadSegment.objects.get(tenant=api.tenant)
    assert left.path == "other.jsonl"
    assert not ace_storage().exists(forgotten) and ace_storage().exists(left.storage_name)
    laptop = host1 / "uploads" / str(api.tenant.pk) / "~machines" / "laptop"
    assert (laptop / MAIN).exists()  # host 1 has not heard of it yet
    with override_settings(ACE_DATA_DIR=host1):
        listed = api.get("/api/v1/imports/files/", {"machine": "laptop"}).json()["results"]
    assert [row["path"] for row in listed] == ["other.jsonl"]
    assert not (laptop / MAIN).exists() and not (laptop / ".claude").exists()
    assert (laptop / "other.jsonl").read_bytes() == data.replace(b"5f0c2a9e", b"6f0c2a9e")
    again = send(api, host1, MAIN, b"{}\n", offset=len(data))
    assert again.status_code == 400 and "send from offset 0" in again.json()["detail"]
