"""Warnings that mean something: an import that resumes after a line consumed before its newline says nothing
false, an unfinished last line is reported once (not at every scan of an idle file), and a file in a tool's
folder whose lines are not that tool's records is refused as a file with the reason, not read into an error
per line.

The fixtures are copied under tmp_path at their storage-layout paths, so files can grow and age.
"""

import copy as copying
import json
import os
import random
import time
from pathlib import Path

import pytest

from ingest_app.importers import parse_file
from ingest_app.models import ImportedFile
from ingest_app.pipeline import import_path
from sessions_app.models import Message, Session
from tests.ingest_app.test_importer_parsers import as_stored
from tests.ingest_app.test_imports import (
    CLAUDE,
    CLAUDE_AGENT,
    CLAUDE_STREAMING,
    DATA,
    GARBAGE,
    OPENCLAW,
    QWEN,
    SEED,
    expected,
    line_start,
    only_session,
    stats,
)
from tests.support.agent_logs import copy_log

LOGS = [CLAUDE, CLAUDE_AGENT, CLAUDE_STREAMING, QWEN, OPENCLAW, SEED]


def age(path: Path, seconds: int = 7200) -> None:
    """The file as if last written `seconds` ago (idle: its held responses are flushed)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def issue_messages(summary, path: Path | None = None) -> list[str]:
    """The messages of the import's issues (about `path` only, when given: the fixtures have bad lines)."""
    return [issue.message for issue in summary.issues if path is None or issue.path == str(path)]


FALSE_ALARM = "not at a line start"


# -- a line consumed before its newline ---------------------------------------------------------------


def test_an_import_that_stopped_before_a_newline_resumes_without_a_warning_and_reads_the_grown_file(api, tmp_path):
    data = (DATA / CLAUDE_STREAMING).read_bytes()
    cut = line_start(DATA / CLAUDE_STREAMING, 4) - 1  # line 3 is complete JSON, its newline not written yet
    path = copy_log(CLAUDE_STREAMING, tmp_path, upto=cut)
    first = import_path(tenant=api.tenant, path=path)
    assert (first.files_imported, first.issues) == (1, [])
    assert ImportedFile.objects.get(tenant=api.tenant).carry["line_open"] is True

    path.write_bytes(data[: cut + 1])  # the newline arrives
    newline = import_path(tenant=api.tenant, path=path)
    assert issue_messages(newline) == []  # was: "offset N is not at a line start"
    assert (newline.files_imported, newline.files_unchanged) == (1, 0)  # was: reported unchanged
    assert ImportedFile.objects.get(tenant=api.tenant).offset == cut + 1

    path.write_bytes(data)  # and the rest of the session
    rest = import_path(tenant=api.tenant, path=path)
    assert (rest.files_imported, rest.issues) == (1, [])
    assert stats(api, only_session(api)) == expected(parse_file(DATA / CLAUDE_STREAMING).messages)


@pytest.mark.parametrize("relative", LOGS, ids=lambda p: p.stem[:8])
def test_resuming_after_any_line_consumed_before_its_newline_warns_nothing(relative, tmp_path):
    """Every line of every fixture, consumed before its newline, then the rest: no warning, the same messages."""
    data = (DATA / relative).read_bytes()
    whole = parse_file(DATA / relative)
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    ends = [index for index, byte in enumerate(data) if byte == ord("\n")]
    for end in ends[:-1]:
        path.write_bytes(data[:end])
        first = parse_file(path)
        path.write_bytes(data)
        second = parse_file(path, start_offset=first.end_offset, carry=first.carry)
        assert not [i for i in first.issues + second.issues if FALSE_ALARM in i.message], end
        assert folded(first.messages + second.messages) == folded(whole.messages)
    # A saved offset that really is inside a line is still said.
    assert any("not at a line start" in i.message for i in parse_file(path, start_offset=3, tool=whole.tool).issues)


# -- an unfinished last line, reported once -----------------------------------------------------------


def test_an_unfinished_last_line_is_reported_once_however_often_the_file_is_read_again(api, tmp_path):
    data = (DATA / OPENCLAW).read_bytes()
    cut = line_start(DATA / OPENCLAW, 5) + 40  # line 5 cut in the middle
    path = copy_log(OPENCLAW, tmp_path, upto=cut)
    first = import_path(tenant=api.tenant, path=path)
    assert [i.line for i in first.issues if "incomplete" in i.message] == [5]

    age(path)  # idle: read again (a held response would be flushed), the cut line still there
    assert issue_messages(import_path(tenant=api.tenant, path=path)) == []
    os.utime(path)  # touched (a backup tool copies it again): read again, same bytes
    assert issue_messages(import_path(tenant=api.tenant, path=path)) == []
    age(path, 86400)
    assert issue_messages(import_path(tenant=api.tenant, path=path)) == []

    path.write_bytes(data[: cut + 10])  # the line changed: said again, once
    assert [i.line for i in import_path(tenant=api.tenant, path=path).issues] == [5]
    assert issue_messages(import_path(tenant=api.tenant, path=path)) == []

    path.write_bytes(data)  # the fixture's own last line is cut too: another line, said once
    cut_lines = [i.line for i in parse_file(DATA / OPENCLAW).issues if "incomplete" in i.message]
    assert [i.line for i in import_path(tenant=api.tenant, path=path).issues if "incomplete" in i.message] == cut_lines
    assert issue_messages(import_path(tenant=api.tenant, path=path)) == []
    assert stats(api, only_session(api)) == expected(parse_file(DATA / OPENCLAW).messages)


def test_a_file_whose_only_line_is_unfinished_is_reported_once_then_imported_when_complete(api, tmp_path):
    main = copy_log(CLAUDE, tmp_path)
    agent = copy_log(CLAUDE_AGENT, tmp_path, upto=30)  # a sub-agent file whose first line is still being written
    age(agent)
    first = import_path(tenant=api.tenant, path=tmp_path)
    assert issue_messages(first, agent) == ["not a recognised agent log yet: the file has no complete line"]
    for _ in range(2):  # was: the same warning at every scan, forever
        again = import_path(tenant=api.tenant, path=tmp_path)
        assert (issue_messages(again), again.files_unchanged, again.files_refused) == ([], 2, 0)

    copy_log(CLAUDE_AGENT, tmp_path)
    done = import_path(tenant=api.tenant, path=tmp_path)
    assert (issue_messages(done, agent), done.files_imported) == ([], 1)
    # The sub-agent still finds the round of its parent that spawned it.
    parent = parse_file(main)
    spawner = next(m for m in parent.messages if m.metadata.get("spawned_agent_id") == "a1b2c3d")
    sub = parse_file(agent, carry={"conversation": spawner.conversation})
    assert stats(api, only_session(api)) == expected(parent.messages, sub.messages)


def test_unfinished_tails_are_reported_once_per_version_under_random_cuts(tmp_path):
    """Fuzz: random cuts and growths of every fixture, each read twice from the saved carry. The second read
    of the same bytes never repeats a warning; nothing raises; the steps give the messages one pass gives."""
    rng = random.Random(15)
    for relative in LOGS:
        data = (DATA / relative).read_bytes()
        whole = parse_file(DATA / relative, flush=True)
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(12):
            cuts = sorted(rng.sample(range(1, len(data)), 4)) + [len(data)]
            offset, carry, messages = 0, None, []
            for cut in cuts:
                path.write_bytes(data[:cut])
                read = parse_file(path, start_offset=offset, carry=copy_of(carry), flush=cut == len(data))
                again = parse_file(path, start_offset=read.end_offset, carry=copy_of(read.carry))
                assert again.issues == [] and again.messages == []  # the same bytes again: nothing new, no word
                if read.tool is not None:
                    offset = read.end_offset
                    messages.extend(read.messages)
                carry = read.carry
            assert folded(messages) == folded(whole.messages), relative


def copy_of(carry: dict | None) -> dict | None:
    """The carry as the import stores it (a JSON round trip), so one read cannot change what the next is given."""
    return copying.deepcopy(carry)


# -- a file that is not the tool's format, in the tool's folder ---------------------------------------

CLAUDE_PLACE = Path("claude_code/.claude/projects/-home-dev-notes/0c9e0a53-1f2b-4d3c-8e4f-5a6b7c8d9e0f.jsonl")


def garbage_at(root: Path, relative: Path, lines: int = 2000) -> Path:
    """`lines` lines of the garbage fixture (not JSON) at a path in a tool's storage layout."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    source = (DATA / GARBAGE).read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(source[index % len(source)] for index in range(lines)))
    return path


def test_garbage_in_a_tool_folder_is_refused_as_one_file_not_thousands_of_line_errors(api, tmp_path):
    path = garbage_at(tmp_path, CLAUDE_PLACE)
    copy_log(QWEN, tmp_path)
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert (summary.files_refused, summary.files_imported) == (1, 1)
    (issue,) = [issue for issue in summary.issues if issue.path == str(path)]  # was: one error per line
    assert (issue.path, issue.line, issue.level) == (str(path), 0, "error")
    assert issue.message.startswith("not a recognised agent log: the path is in the claude-code storage layout")
    assert "is a JSON object" in issue.message
    assert not ImportedFile.objects.filter(tenant=api.tenant, path=str(path)).exists()
    assert Session.objects.filter(tenant=api.tenant).count() == 1

    forced = import_path(tenant=api.tenant, path=path, tool="claude-code")  # forcing the tool does not make it a log
    assert (forced.files_refused, len(forced.issues)) == (1, 1)
    assert forced.issues[0].message.startswith("not a claude-code log: none of its first")

    parsed = parse_file(path)
    assert (parsed.messages, parsed.tool, len(parsed.issues)) == ([], None, 1)


def test_another_tools_log_in_a_tool_folder_is_refused_unless_that_tool_is_forced(api, tmp_path):
    path = tmp_path / CLAUDE_PLACE
    path.parent.mkdir(parents=True)
    path.write_bytes((DATA / OPENCLAW).read_bytes())
    refused = import_path(tenant=api.tenant, path=path)
    assert refused.files_refused == 1
    assert "claude-code storage layout, but" in refused.files[0].reason
    assert "have the shape of openclaw records" in refused.files[0].reason
    assert not Message.objects.filter(session__tenant=api.tenant).exists()

    forced = import_path(tenant=api.tenant, path=path, tool="openclaw")
    assert (forced.files_imported, forced.messages) == (1, len(parse_file(DATA / OPENCLAW).messages))


def test_a_tool_log_that_opens_with_unknown_records_is_still_read(api, tmp_path):
    """JSON of no shape detection knows (a record type newer than this code) is the parser's to judge: the
    file is not refused for it, and the real records after it are imported."""
    path = tmp_path / CLAUDE
    path.parent.mkdir(parents=True)
    unknown = b"".join(
        json.dumps({"type": "custom-title", "customTitle": f"t{index}", "sessionId": CLAUDE_SESSION_ID}).encode()
        + b"\n"
        for index in range(30)
    )
    path.write_bytes(unknown + (DATA / CLAUDE).read_bytes())
    summary = import_path(tenant=api.tenant, path=path)
    assert (summary.files_imported, summary.files_refused) == (1, 0)
    assert summary.requests == expected(parse_file(DATA / CLAUDE).messages)["requests"]


CLAUDE_SESSION_ID = CLAUDE.stem


def folded(messages) -> list[tuple]:
    """(line, role, content) of the messages as an import stores them: a response emitted while it was still
    streaming and again when it grew is one row, with its last text."""
    return [
        (item["metadata"]["line"], item["role"], item["content"])
        for item in as_stored([m.to_ingest() for m in messages])
    ]
