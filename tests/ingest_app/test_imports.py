"""Importing agent logs into sessions: exact counts through the API, incremental and idempotent re-imports,
bad input, sub-agents, the command, the upload endpoint and the collector (with a real Celery worker).

The samples (each tool's `samples/`, as one tree: tests/agent_logs.py) reproduce the tools' real record shapes;
every test imports a copy under tmp_path, so files can grow, shrink and be replaced.
"""

import io
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from ingest_app import pipeline as imports
from ingest_app.importers import parse_file
from ingest_app.models import ImportedFile, ImportSource
from ingest_app.pipeline import ImportPathError, batch, import_path, plan
from ingest_app.tasks import collect_imports
from sessions_app.accounting import count_usage
from sessions_app.models import Conversation, Message, Session
from sessions_app.selectors.recount import session_count_drift
from tests.support.agent_logs import DATA, copy_log
from tests.support.api import make_client, upload

CLAUDE_SESSION = "5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11"
CLAUDE_DIR = Path("claude_code/.claude/projects/-home-dev-weather")
CLAUDE = CLAUDE_DIR / f"{CLAUDE_SESSION}.jsonl"
CLAUDE_AGENT = CLAUDE_DIR / CLAUDE_SESSION / "subagents" / "agent-a1b2c3d.jsonl"
CLAUDE_STREAMING = CLAUDE_DIR / "6a1d3b8f-2c45-4e9a-8f7b-0d1e2f3a4b5c.jsonl"
QWEN = Path("qwen_code/.qwen/projects/-home-dev-weather/chats/8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12.jsonl")
OPENCLAW = Path("openclaw/.openclaw/agents/main/sessions/0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36.jsonl")
SEED = Path("seed/weather-openclaw.jsonl")
GARBAGE = Path("unknown/garbage.jsonl")
OTHER_TOOL = Path("unknown/other-tool.jsonl")
SUMMARY_LINE = re.compile(
    r"^imported (?P<imported>[\d,]+) files \((?P<unchanged>[\d,]+) unchanged, (?P<refused>[\d,]+) refused\): "
    r"(?P<sessions>[\d,]+) new sessions, (?P<messages>[\d,]+) messages, (?P<requests>[\d,]+) requests, "
    r"(?P<tokens>[\d,]+) tokens, (?P<issues>[\d,]+) issues"
    r"(; (?P<streaming>[\d,]+) responses? still streaming \(stored; completed when their last lines arrive\))?$"
)
# The counters of the session stats API that count_usage also gives.
COUNTERS = (
    "requests",
    "conversations",
    "messages",
    "message_user",
    "message_assistant",
    "message_toolresult",
    "message_error",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "total_tokens",
)


def line_start(path: Path, line: int) -> int:
    data = path.read_bytes()
    offset = 0
    for _ in range(line - 1):
        offset = data.index(b"\n", offset) + 1
    return offset


def stats(api, session) -> dict:
    body = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    return {name: body[name] for name in COUNTERS}


def expected(*messages_lists) -> dict:
    counts = count_usage([m for messages in messages_lists for m in messages])
    return {name: counts[name] for name in COUNTERS}


def only_session(api) -> Session:
    (session,) = Session.objects.filter(tenant=api.tenant)
    return session


# -- exact counts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("relative", [CLAUDE_STREAMING, QWEN, OPENCLAW, SEED], ids=lambda p: p.parts[0])
def test_each_tool_is_imported_with_the_counts_its_parser_gives(api, relative, tmp_path):
    path = copy_log(relative, tmp_path)
    summary = import_path(tenant=api.tenant, path=path)

    parsed = parse_file(path)
    session = only_session(api)
    assert stats(api, session) == expected(parsed.messages)
    assert (summary.files_imported, summary.sessions_created, summary.messages) == (1, 1, len(parsed.messages))
    assert summary.requests == expected(parsed.messages)["requests"]
    assert summary.tokens["total_tokens"] == expected(parsed.messages)["total_tokens"]
    assert (session.tool, session.agent_session_id) == (parsed.tool, parsed.session.agent_session_id)
    assert session_count_drift(session=session) == {}
    # The grouped statistics (hourly roll-ups) agree with the session's counters.
    totals = api.get("/api/v1/stats/", {"group_by": "tool"}).json()["totals"]
    assert {name: totals[name] for name in COUNTERS if name != "conversations"} == {
        name: value for name, value in expected(parsed.messages).items() if name != "conversations"
    }


def test_the_seeds_weather_example_counts_three_llm_calls_six_messages_two_rounds(api, tmp_path):
    import_path(tenant=api.tenant, path=copy_log(SEED, tmp_path))
    counts = stats(api, only_session(api))
    assert (counts["requests"], counts["messages"], counts["conversations"]) == (3, 6, 2)
    assert (counts["message_user"], counts["message_assistant"], counts["message_toolresult"]) == (2, 3, 1)
    assert (counts["input_tokens"], counts["output_tokens"], counts["total_tokens"]) == (360, 36, 396)


def test_a_claude_code_session_with_its_subagent_counts_both_in_the_parent_session(api, tmp_path):
    main, agent = copy_log(CLAUDE, tmp_path), copy_log(CLAUDE_AGENT, tmp_path)
    summary = import_path(tenant=api.tenant, path=tmp_path)

    parent = parse_file(main)
    spawner = next(m for m in parent.messages if m.metadata.get("spawned_agent_id") == "a1b2c3d")
    sub = parse_file(agent, carry={"conversation": spawner.conversation})
    session = only_session(api)
    assert stats(api, session) == expected(parent.messages, sub.messages)
    assert stats(api, session)["requests"] == 9 and stats(api, session)["conversations"] == 3  # a failed call in 9
    assert (summary.files_imported, summary.sessions_created) == (2, 1)
    assert session.agent_session_id == CLAUDE_SESSION
    assert session_count_drift(session=session) == {}


# -- sessions -------------------------------------------------------------------------------------------


def test_the_session_takes_name_project_start_metadata_and_user_from_the_log(api, tmp_path):
    import_path(tenant=api.tenant, path=copy_log(CLAUDE, tmp_path))
    session = only_session(api)
    parsed = parse_file(DATA / CLAUDE).session
    assert session.name == "Weather lookup for Hangzhou"  # the summary line Claude Code wrote
    assert (session.project, session.started_at) == ("weather", parsed.started_at)
    assert session.metadata["cwd"] == "/home/dev/weather"
    assert (session.metadata["git_branch"], session.metadata["version"]) == ("main", "2.0.14")
    assert session.user_id == "dev"  # the home directory the agent ran in


def test_user_id_given_wins_and_a_feishu_sender_names_the_user(api, tmp_path):
    import_path(tenant=api.tenant, path=copy_log(QWEN, tmp_path), user_id="alice")
    import_path(tenant=api.tenant, path=copy_log(OPENCLAW, tmp_path))
    users = dict(Session.objects.filter(tenant=api.tenant).values_list("tool", "user_id"))
    assert users["qwen-code"] == "alice"
    assert users["openclaw"] == parse_file(DATA / OPENCLAW).session.user and users["openclaw"].startswith("ou_")
    openclaw = Session.objects.get(tenant=api.tenant, tool="openclaw")
    assert not openclaw.name.startswith("Conversation info")  # named after the text, not the channel metadata


# -- idempotent and incremental -------------------------------------------------------------------------


def test_importing_again_imports_nothing(api, tmp_path):
    shutil.copytree(DATA, tmp_path / "logs")
    first = import_path(tenant=api.tenant, path=tmp_path / "logs")
    before = {s.pk: stats(api, s) for s in Session.objects.filter(tenant=api.tenant)}

    again = import_path(tenant=api.tenant, path=tmp_path / "logs")
    assert (again.files_imported, again.files_unchanged, again.files_refused) == (0, first.files_imported, 2)
    assert (again.messages, again.requests, again.sessions_created, again.lines_read) == (0, 0, 0, 0)
    assert {s.pk: stats(api, s) for s in Session.objects.filter(tenant=api.tenant)} == before

    # Even read from the start again (offsets forgotten), nothing is stored twice: external ids.
    ImportedFile.objects.filter(tenant=api.tenant).delete()
    replay = import_path(tenant=api.tenant, path=tmp_path / "logs")
    assert replay.messages == 0 and replay.lines_read > 0
    assert {s.pk: stats(api, s) for s in Session.objects.filter(tenant=api.tenant)} == before


def test_a_file_that_grew_is_read_from_where_the_last_import_stopped(api, tmp_path):
    cut = line_start(DATA / QWEN, 10)
    path = copy_log(QWEN, tmp_path, upto=cut)
    first = import_path(tenant=api.tenant, path=path)
    record = ImportedFile.objects.get(tenant=api.tenant)
    assert (record.offset, first.lines_read) == (cut, 9)

    with path.open("ab") as handle:
        handle.write((DATA / QWEN).read_bytes()[cut:])
    second = import_path(tenant=api.tenant, path=path)
    whole = parse_file(DATA / QWEN)
    assert second.lines_read == whole.lines_read - 9  # only the new lines
    assert first.messages + second.messages == len(whole.messages)
    assert stats(api, only_session(api)) == expected(whole.messages)
    record.refresh_from_db()
    assert (record.offset, record.lines_read, record.messages_imported) == (
        whole.end_offset,
        whole.lines_read,
        len(whole.messages),
    )


def test_a_line_still_being_written_is_imported_once_it_is_complete(api, tmp_path):
    line_9 = line_start(DATA / SEED, 6)
    line_10 = line_start(DATA / SEED, 7)
    half = (line_9 + line_10) // 2
    path = copy_log(SEED, tmp_path, upto=half)
    first = import_path(tenant=api.tenant, path=path)
    assert any(i.line == 6 and "incomplete" in i.message for i in first.issues)
    assert not Message.objects.filter(metadata__line=6).exists()

    with path.open("ab") as handle:
        handle.write((DATA / SEED).read_bytes()[half:])
    import_path(tenant=api.tenant, path=path)
    import_path(tenant=api.tenant, path=path)
    assert Message.objects.filter(session=only_session(api), metadata__line=6).count() == 1
    assert stats(api, only_session(api)) == expected(parse_file(DATA / SEED).messages)


def test_a_replaced_or_truncated_file_is_read_again_from_the_start_without_duplicates(api, tmp_path):
    path = copy_log(SEED, tmp_path)
    import_path(tenant=api.tenant, path=path)
    counts = stats(api, only_session(api))

    path.write_bytes((DATA / SEED).read_bytes()[: line_start(DATA / SEED, 4)])  # truncated
    truncated = import_path(tenant=api.tenant, path=path)
    assert any("truncated or replaced" in i.message for i in truncated.issues) and truncated.messages == 0
    assert ImportedFile.objects.get(tenant=api.tenant).offset == line_start(DATA / SEED, 4)

    path.write_bytes((DATA / SEED).read_bytes())  # grown back: read on from the offset, nothing stored twice
    regrown = import_path(tenant=api.tenant, path=path)
    assert (regrown.messages, regrown.issues) == (0, [])
    assert stats(api, only_session(api)) == counts

    path.write_bytes((DATA / OPENCLAW).read_bytes())  # replaced by another session's log
    replaced = import_path(tenant=api.tenant, path=path)
    assert any("have changed" in i.message for i in replaced.issues)
    log = parse_file(DATA / OPENCLAW)
    assert replaced.lines_read == log.lines_read  # from the start
    other = Session.objects.get(tenant=api.tenant, agent_session_id=log.session.agent_session_id)
    assert stats(api, other) == expected(log.messages)
    assert ImportedFile.objects.get(tenant=api.tenant).session_id == other.pk


def test_a_chunk_that_fails_is_rolled_back_whole_and_the_next_import_goes_on(api, tmp_path, monkeypatch):
    path = copy_log(CLAUDE_STREAMING, tmp_path)
    monkeypatch.setattr(plan, "CHUNK_BYTES", 600)  # several chunks
    calls = {"n": 0}
    real_append = batch.messages_append_to_sessions

    def failing_append(**kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the database went away")
        return real_append(**kwargs)

    monkeypatch.setattr(batch, "messages_append_to_sessions", failing_append)
    with pytest.raises(RuntimeError):
        import_path(tenant=api.tenant, path=path)
    record = ImportedFile.objects.get(tenant=api.tenant)
    session = only_session(api)
    assert 0 < record.offset < path.stat().st_size  # the first chunk committed, the failed one did not
    assert record.messages_imported == session.messages == Message.objects.filter(session=session).count()

    monkeypatch.setattr(batch, "messages_append_to_sessions", real_append)
    import_path(tenant=api.tenant, path=path)
    assert stats(api, session) == expected(parse_file(DATA / CLAUDE_STREAMING).messages)
    session.refresh_from_db()
    assert session_count_drift(session=session) == {}


def test_a_batch_that_meets_a_deadlock_is_read_again_and_counts_once(api, tmp_path, monkeypatch):
    # PostgreSQL breaks a deadlock by failing one of the transactions; the import reads that batch again.
    import psycopg
    from django.db import OperationalError

    copy_log(CLAUDE, tmp_path)
    copy_log(CLAUDE_AGENT, tmp_path)
    real_append = batch.messages_append_to_sessions
    calls = {"n": 0}

    def deadlocked_once(**kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected("deadlock detected")
        return real_append(**kwargs)

    monkeypatch.setattr(batch, "messages_append_to_sessions", deadlocked_once)
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert calls["n"] == 2 and (summary.sessions_created, summary.files_refused) == (1, 0)
    session = only_session(api)  # made again by the second try, once
    assert session.messages == 23 and session_count_drift(session=session) == {}
    assert ImportedFile.objects.filter(tenant=api.tenant, session=session).count() == 2


def test_a_response_still_streaming_is_stored_at_once_and_closed_once_the_file_has_been_idle(api, tmp_path, settings):
    settings.ACE_IMPORT_IDLE_SECONDS = 3600
    path = copy_log(CLAUDE, tmp_path, upto=line_start(DATA / CLAUDE, 9))  # msg_01's last line not written yet
    summary = import_path(tenant=api.tenant, path=path)
    assert ImportedFile.objects.get(tenant=api.tenant).pending == 1
    assert summary.line().endswith("; 1 response still streaming (stored; completed when their last lines arrive)")
    stored = Message.objects.get(role="assistant")
    assert (stored.request_id, stored.output_tokens, stored.finish_reason) == ("msg_01WeatherA", 25, "")

    unchanged = import_path(tenant=api.tenant, path=path)
    assert unchanged.files_unchanged == 1 and unchanged.streaming == 1  # still fresh: said again, not read
    old = time.time() - 7200
    os.utime(path, (old, old))
    flushed = import_path(tenant=api.tenant, path=path)
    assert flushed.messages == 0 and flushed.streaming == 0 and ImportedFile.objects.get(tenant=api.tenant).pending == 0
    assert "streaming" not in flushed.line()
    assert Message.objects.get(role="assistant").pk == stored.pk


# -- bad input ------------------------------------------------------------------------------------------


def test_a_corrupt_line_is_reported_with_file_and_line_and_the_rest_is_imported(api, tmp_path):
    path = copy_log(CLAUDE, tmp_path)
    summary = import_path(tenant=api.tenant, path=path)
    errors = [(i.path, i.line) for i in summary.issues if i.level == "error"]
    assert errors == [(str(path), 14)]
    assert summary.messages == len(parse_file(DATA / CLAUDE).messages) == 19
    assert "line 14: not valid JSON" in ImportedFile.objects.get(tenant=api.tenant).last_error


def test_text_no_database_can_hold_is_stored_replaced_and_reported(api, tmp_path):
    # A lone UTF-16 surrogate (a tool cut a string inside an emoji) and NUL, in text and in JSON fields.
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": "s1", "timestamp": "2025-10-02T08:00:00Z", "cwd": "/home/dev/x",
         "message": {"role": "user", "content": "weather in 杭州 \ud83d"}},
        {"type": "assistant", "uuid": "a1", "sessionId": "s1", "timestamp": "2025-10-02T08:00:02Z",
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
                     "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"cmd": "a\u0000b \udc00"}}],
                     "usage": {"input_tokens": 10, "output_tokens": 5}}},
        {"type": "user", "uuid": "r1", "sessionId": "s1", "timestamp": "2025-10-02T08:00:03Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x\u0000y"}]}},
    ]  # fmt: skip
    path = tmp_path / ".claude" / "projects" / "-home-dev-x" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))  # as JSON escapes

    summary = import_path(tenant=api.tenant, path=path)
    assert (summary.messages, summary.files_refused) == (3, 0)
    assert [(issue.line, issue.level) for issue in summary.issues] == [(1, "warning"), (2, "warning")]
    user, assistant, result = Message.objects.filter(session=only_session(api)).order_by("seq")
    assert user.content == "weather in 杭州 \ufffd"
    assert assistant.tool_calls[0]["arguments"] == {"cmd": "a\ufffdb \ufffd"}
    assert result.content == "x\ufffdy"


def test_a_directory_of_mixed_tools_imports_each_file_with_its_parser(api, tmp_path):
    shutil.copytree(DATA, tmp_path / "logs")
    summary = import_path(tenant=api.tenant, path=tmp_path / "logs")
    # 8 files, the Codex samples (3), the OpenClaw backup (openclaw/backup/: 5 transcripts of 4 sessions,
    # sessions.json not read), the Gemini CLI / older Qwen Code samples (4 files, 3 sessions), and a session of
    # failed calls per tool but OpenCode (5).
    assert (summary.files_seen, summary.files_imported, summary.files_refused) == (25, 23, 2)
    tools = sorted(Session.objects.filter(tenant=api.tenant).values_list("tool", flat=True))
    assert tools == [
        *["claude-code"] * 3, *["codex"] * 4, *["gemini-cli"] * 3, *["openclaw"] * 7, *["qwen-code"] * 3,
    ]  # fmt: skip
    by_file = {Path(f.path).name: f.tool for f in summary.files if f.status == "imported"}
    assert by_file[QWEN.name] == "qwen-code" and by_file[OPENCLAW.name] == by_file[SEED.name] == "openclaw"


def test_unknown_formats_and_garbage_are_refused_with_the_reason_and_write_nothing(api, tmp_path):
    shutil.copytree(DATA / "unknown", tmp_path / "unknown")
    summary = import_path(tenant=api.tenant, path=tmp_path)
    reasons = {Path(f.path).name: f.reason for f in summary.files}
    assert (summary.files_refused, summary.files_imported) == (2, 0)
    assert reasons["garbage.jsonl"].startswith("not a recognised agent log: none of the first")
    assert "none has the shape of a record of Claude Code, Qwen Code, Gemini CLI" in reasons["other-tool.jsonl"]
    assert all(i.line == 0 and i.level == "error" for i in summary.issues)
    assert not Session.objects.filter(tenant=api.tenant).exists()
    assert not ImportedFile.objects.filter(tenant=api.tenant).exists()


def test_a_forced_tool_refuses_a_log_of_another_tool(api, tmp_path):
    summary = import_path(tenant=api.tenant, path=copy_log(QWEN, tmp_path), tool="claude-code")
    assert summary.files_refused == 1
    assert summary.files[0].reason.startswith("not a claude-code log: it looks like qwen-code")
    assert import_path(tenant=api.tenant, path=copy_log(QWEN, tmp_path), tool="qwen-code").files_imported == 1


def test_a_path_that_does_not_exist_is_an_error(api, tmp_path):
    with pytest.raises(ImportPathError, match="no such file or directory"):
        import_path(tenant=api.tenant, path=tmp_path / "missing")


def test_an_unreadable_file_is_refused_and_the_others_imported(api, tmp_path, monkeypatch):
    copy_log(SEED, tmp_path)
    locked = copy_log(QWEN, tmp_path)
    real_parse = batch.parse_file

    def parse(path, **kwargs):
        if path == locked:
            raise PermissionError(13, "Permission denied")
        return real_parse(path, **kwargs)

    monkeypatch.setattr(batch, "parse_file", parse)
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert (summary.files_imported, summary.files_refused) == (1, 1)
    assert next(f.reason for f in summary.files if f.status == "refused") == "cannot read the file: Permission denied"
    assert not ImportedFile.objects.filter(path=str(locked)).exists()


def test_a_file_whose_session_was_deleted_is_not_imported_into_it(api, tmp_path):
    path = copy_log(SEED, tmp_path, upto=line_start(DATA / SEED, 4))
    import_path(tenant=api.tenant, path=path)
    session = only_session(api)
    assert session.messages >= 1
    assert api.delete(f"/api/v1/sessions/{session.pk}/").status_code == 204
    path.write_bytes((DATA / SEED).read_bytes())
    summary = import_path(tenant=api.tenant, path=path)
    assert summary.files_refused == 1 and "deleted" in summary.files[0].reason
    assert Session.objects.get(pk=session.pk).messages == session.messages


def test_an_empty_file_is_left_for_later(api, tmp_path):
    (tmp_path / "new.jsonl").write_bytes(b"")
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert (summary.files_unchanged, summary.files_refused, summary.messages) == (1, 0, 0)


# -- sub-agents -----------------------------------------------------------------------------------------


def test_subagent_work_is_attributed_to_the_parent_session_in_the_round_that_spawned_it(api, tmp_path):
    copy_log(CLAUDE, tmp_path)
    copy_log(CLAUDE_AGENT, tmp_path)
    import_path(tenant=api.tenant, path=tmp_path)
    session = only_session(api)
    sub = Message.objects.filter(session=session, metadata__subagent=True)
    assert sub.count() == 4 and all(m.metadata["tool"] == "claude-code" for m in sub)
    spawner = Message.objects.get(session=session, metadata__spawned_agent_id="a1b2c3d")
    assert {m.conversation_id for m in sub} == {spawner.conversation_id}
    assert session.metadata["subagents"]["agent-a1b2c3d"]["agent_session_id"] == "agent-a1b2c3d"
    assert Message.objects.filter(session=session, metadata__sidechain=True).exists()


def test_a_subagent_imported_before_its_parent_still_lands_in_the_parent_session(api, tmp_path):
    agent = copy_log(CLAUDE_AGENT, tmp_path)
    import_path(tenant=api.tenant, path=agent)
    placeholder = only_session(api)
    assert (placeholder.agent_session_id, placeholder.messages) == (CLAUDE_SESSION, 4)

    import_path(tenant=api.tenant, path=copy_log(CLAUDE, tmp_path))
    session = only_session(api)
    assert session.pk == placeholder.pk and session.name == "Weather lookup for Hangzhou"
    assert session.messages == 23
    assert session_count_drift(session=session) == {}


# -- the command ----------------------------------------------------------------------------------------


def run_command(*args, refused: bool = False) -> list[str]:
    """The command's stdout lines; with `refused`, it must end in the error of an import that refused files or
    skipped lines (exit status 3), and stderr's lines follow stdout's."""
    out, err = io.StringIO(), io.StringIO()
    if not refused:
        call_command("ace_import", *map(str, args), stdout=out, stderr=err)
        return out.getvalue().splitlines()
    with pytest.raises(CommandError) as refusal:
        call_command("ace_import", *map(str, args), stdout=out, stderr=err)
    assert refusal.value.returncode == 3
    return out.getvalue().splitlines() + err.getvalue().splitlines()


def test_the_command_prints_the_issues_and_a_summary_line_and_imports_nothing_twice(db, tmp_path):
    shutil.copytree(DATA, tmp_path / "logs")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="2 files refused and 3 lines skipped"):
        call_command("ace_import", str(tmp_path / "logs"), "--tenant", "cli", stdout=out, stderr=err)
    lines, problems = out.getvalue().splitlines(), err.getvalue()
    summary = SUMMARY_LINE.match(lines[-1])
    assert summary, lines[-1]
    assert summary.group("imported", "unchanged", "refused", "sessions") == ("23", "0", "2", "20")
    assert int(summary.group("messages").replace(",", "")) == Message.objects.filter(tenant__name="cli").count()
    claude = tmp_path / "logs" / CLAUDE
    assert f"{claude}:14: error: not valid JSON (Expecting property name enclosed in double quotes" in problems
    assert f"{tmp_path / 'logs' / GARBAGE}:0: error: not a recognised" in problems

    again = SUMMARY_LINE.match(run_command(tmp_path / "logs", "--tenant", "cli", refused=True)[0])
    assert again.group("imported", "unchanged", "refused", "sessions", "messages") == ("0", "23", "2", "0", "0")


def test_the_command_takes_tool_and_user_and_refuses_a_missing_path(db, tmp_path):
    path = copy_log(QWEN, tmp_path)
    run_command(path, "--tenant", "cli", "--tool", "qwen-code", "--user-id", "bob", refused=True)  # a bad line
    assert Session.objects.get(tenant__name="cli").user_id == "bob"
    with pytest.raises(CommandError, match="no such file or directory"):
        run_command(tmp_path / "missing", "--tenant", "cli")


def test_the_command_defaults_to_the_demo_tenant(db, tmp_path):
    lines = run_command(copy_log(SEED, tmp_path))
    assert lines[0] == "Tenant 'demo' created."
    assert Session.objects.get().tenant.name == "demo"


# -- the upload endpoint --------------------------------------------------------------------------------


def test_uploading_logs_imports_them_and_reuploading_a_grown_file_reads_only_the_new_lines(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    data = (DATA / QWEN).read_bytes()
    cut = line_start(DATA / QWEN, 10)
    response = upload(api, ("chat.jsonl", data[:cut]), ("seed.jsonl", (DATA / SEED).read_bytes()))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["files_imported"], body["sessions_created"], body["lines_read"]) == (2, 2, 9 + 8)
    assert SUMMARY_LINE.match(body["summary"])
    assert {f["path"] for f in body["files"]} == {"chat.jsonl", "seed.jsonl"}
    assert (tmp_path / "uploads" / str(api.tenant.pk) / "chat.jsonl").read_bytes() == data[:cut]

    grown = upload(api, ("chat.jsonl", data)).json()
    whole = parse_file(DATA / QWEN)
    assert (grown["lines_read"], grown["sessions_created"]) == (whole.lines_read - 9, 0)
    assert [(i["path"], i["line"]) for i in grown["issues"] if i["level"] == "error"] == [("chat.jsonl", 12)]
    session = Session.objects.get(tenant=api.tenant, tool="qwen-code")
    assert stats(api, session) == expected(whole.messages)

    same = upload(api, ("chat.jsonl", data)).json()
    assert (same["files_unchanged"], same["messages"], same["lines_read"]) == (1, 0, 0)


def test_uploads_keep_subagent_paths_and_attribute_the_agent_to_its_parent(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    response = upload(
        api,
        ("main.jsonl", (DATA / CLAUDE).read_bytes()),
        ("agent.jsonl", (DATA / CLAUDE_AGENT).read_bytes()),
        paths=[str(CLAUDE.relative_to("claude_code")), str(CLAUDE_AGENT.relative_to("claude_code"))],
        user_id="carol",
    )
    assert response.status_code == 201, response.json()
    session = only_session(api)
    assert (session.user_id, session.messages, session.requests) == ("carol", 23, 9)
    spawner = Message.objects.get(session=session, metadata__spawned_agent_id="a1b2c3d")
    assert {m.conversation_id for m in Message.objects.filter(metadata__subagent=True)} == {spawner.conversation_id}


def test_uploads_are_tenant_scoped(api, other_api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    content = (DATA / SEED).read_bytes()
    assert upload(api, ("seed.jsonl", content)).status_code == 201
    theirs = upload(other_api, ("seed.jsonl", content)).json()
    assert (theirs["sessions_created"], theirs["messages"]) == (1, 6)  # their own session, not ours
    mine = only_session(api)
    assert other_api.get(f"/api/v1/sessions/{mine.pk}/").status_code == 404
    assert [s["id"] for s in other_api.get("/api/v1/sessions/").json()["results"]] != [str(mine.pk)]
    assert (tmp_path / "uploads" / str(other_api.tenant.pk) / "seed.jsonl").exists()
    assert upload(type(api)(api.tenant, "ace_wrong"), ("seed.jsonl", content)).status_code == 401


@pytest.mark.parametrize(
    ("files", "fields", "field"),
    [
        ([], {}, "files"),
        ([("notes.txt", b"{}\n")], {}, "files.0"),
        ([("../../etc/x.jsonl", b"{}\n")], {"paths": ["../../etc/x.jsonl"]}, "files.0"),
        ([("a.jsonl", b"{}\n"), ("a.jsonl", b"{}\n")], {}, "files.1"),
        ([("a.jsonl", b"{}\n")], {"tool": "vim"}, "tool"),
        ([("a.jsonl", b"{}\n")], {"paths": ["a.jsonl", "b.jsonl"]}, "paths"),
        ([("garbage.jsonl", (DATA / GARBAGE).read_bytes())], {}, "files.0"),
    ],
    ids=["no-files", "not-jsonl", "escaping-path", "twice", "bad-tool", "paths-count", "garbage"],
)
def test_bad_uploads_are_400_and_write_nothing(api, settings, tmp_path, files, fields, field):
    settings.ACE_DATA_DIR = tmp_path
    response = upload(api, *files, **fields)
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()
    assert not Session.objects.filter(tenant=api.tenant).exists()
    assert not ImportedFile.objects.filter(tenant=api.tenant).exists()
    uploads = tmp_path / "uploads"
    assert not uploads.exists() or not [p for p in uploads.rglob("*") if p.is_file()]


def test_more_files_than_allowed_in_one_upload_is_400(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    response = upload(api, *[(f"s{i}.jsonl", b"") for i in range(101)])
    assert response.status_code == 400
    assert response.json()["detail"]
    assert not (tmp_path / "uploads").exists() or not list((tmp_path / "uploads").rglob("*.jsonl"))


def test_a_garbage_file_next_to_a_good_one_is_refused_and_the_good_one_imported(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    body = upload(api, ("seed.jsonl", (DATA / SEED).read_bytes()), ("junk.jsonl", (DATA / GARBAGE).read_bytes()))
    assert body.status_code == 201
    body = body.json()
    assert (body["files_imported"], body["files_refused"], body["messages"]) == (1, 1, 6)
    refused = next(f for f in body["files"] if f["status"] == "refused")
    assert refused["path"] == "junk.jsonl" and refused["reason"].startswith("not a recognised agent log")
    assert not (tmp_path / "uploads" / str(api.tenant.pk) / "junk.jsonl").exists()


def test_oversized_uploads_are_413(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    settings.ACE_MAX_UPLOAD_BYTES = 1000
    response = upload(api, ("seed.jsonl", (DATA / SEED).read_bytes()))
    assert response.status_code == 413
    assert "limit is 1000 bytes" in response.json()["detail"]
    assert not Session.objects.filter(tenant=api.tenant).exists()


def test_the_upload_endpoint_is_in_the_openapi_schema(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/v1/imports/" in schema and "multipart/form-data" in schema


# -- the collector --------------------------------------------------------------------------------------


def test_the_collector_is_scheduled_every_five_minutes_and_editable_in_the_admin(db):
    task = PeriodicTask.objects.get(task="sessions_app.tasks.collect_imports")
    assert task.enabled and (task.interval.every, task.interval.period) == (5, "minutes")


def test_a_worker_collects_new_lines_from_every_enabled_source(burst, tmp_path):
    api = make_client("collector")
    logs = tmp_path / "logs"
    cut = line_start(DATA / QWEN, 10)
    path = copy_log(QWEN, logs, upto=cut)
    source = ImportSource.objects.create(tenant=api.tenant, path=str(logs), user_id="dave")
    ImportSource.objects.create(tenant=api.tenant, path=str(tmp_path / "elsewhere"), enabled=False)

    collect_imports.delay()
    burst()
    assert ImportSource.objects.get(pk=source.pk).last_scan_at is not None
    session = Session.objects.get(tenant=api.tenant)
    assert session.user_id == "dave" and session.messages > 0
    assert ImportedFile.objects.get(tenant=api.tenant).source_id == source.pk

    with path.open("ab") as handle:
        handle.write((DATA / QWEN).read_bytes()[cut:])
    scanned = ImportSource.objects.get(pk=source.pk).last_scan_at
    collect_imports.delay()
    burst()
    assert ImportSource.objects.get(pk=source.pk).last_scan_at != scanned
    assert stats(api, session) == expected(parse_file(DATA / QWEN).messages)
    report = ImportSource.objects.get(pk=source.pk).last_summary
    assert SUMMARY_LINE.match(report["summary"]) and report["files_imported"] == 1
    assert ImportSource.objects.get(enabled=False).last_scan_at is None


def test_a_source_whose_directory_is_gone_says_so_in_its_last_summary(api, tmp_path):
    source = ImportSource.objects.create(tenant=api.tenant, path=str(tmp_path / "gone"))
    summary = imports.import_source_scan(source=source)
    assert summary.files_seen == 0
    source.refresh_from_db()
    assert source.last_scan_at is not None
    assert "not scanned" in source.last_summary["issues"][0]["message"]


def test_bootstrap_registers_the_directories_of_ace_import_dirs_once(db, settings, tmp_path, capsys):
    settings.ACE_DATA_DIR = tmp_path
    settings.ACE_IMPORT_DIRS = [str(tmp_path / "claude_code"), str(tmp_path / "qwen_code")]
    call_command("ace_bootstrap", "--tenant", "bootstrapped")
    call_command("ace_bootstrap", "--tenant", "bootstrapped")
    sources = ImportSource.objects.filter(tenant__name="bootstrapped").order_by("path")
    assert [(s.path, s.enabled, s.tool) for s in sources] == [
        (str(tmp_path / "claude_code"), True, "auto"),
        (str(tmp_path / "qwen_code"), True, "auto"),
    ]
    assert capsys.readouterr().out.count("Import source added") == 2


# -- the admin ------------------------------------------------------------------------------------------


def test_import_sources_are_edited_and_scanned_from_the_admin(staff, api, tmp_path):
    copy_log(SEED, tmp_path)
    add = reverse("admin:ingest_app_importsource_add")
    assert staff.get(add).status_code == 200
    response = staff.post(add, {"tenant": api.tenant.pk, "path": str(tmp_path), "tool": "auto", "enabled": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    source = ImportSource.objects.get(tenant=api.tenant)
    bad = staff.post(add, {"tenant": api.tenant.pk, "path": str(tmp_path / "missing"), "tool": "auto"})
    assert "does not exist on the server" in bad.content.decode()

    changelist = reverse("admin:ingest_app_importsource_changelist")
    response = staff.post(changelist, {"action": "scan_now", "_selected_action": [source.pk]}, follow=True)
    assert "imported 1 files (0 unchanged, 0 refused): 1 new sessions, 6 messages" in response.content.decode()
    assert staff.get(changelist).status_code == 200
    assert staff.get(reverse("admin:ingest_app_importsource_change", args=[source.pk])).status_code == 200

    record = ImportedFile.objects.get(tenant=api.tenant)
    files = staff.get(reverse("admin:ingest_app_importedfile_changelist"), {"source__id__exact": source.pk})
    assert files.status_code == 200 and "seed" in files.content.decode()
    page = staff.get(reverse("admin:ingest_app_importedfile_change", args=[record.pk])).content.decode()
    assert reverse("admin:sessions_app_session_change", args=[record.session_id]) in page
    assert staff.post(reverse("admin:ingest_app_importedfile_delete", args=[record.pk])).status_code == 403


def test_conversations_of_imported_sessions_carry_the_parsers_references(api, tmp_path):
    import_path(tenant=api.tenant, path=copy_log(OPENCLAW, tmp_path))
    refs = list(Conversation.objects.filter(session=only_session(api)).values_list("conversation_id", flat=True))
    assert refs and all(ref.startswith("openclaw:") for ref in refs)
    assert json.dumps(ImportedFile.objects.get(tenant=api.tenant).carry)  # stored as JSON


def test_a_source_being_scanned_is_not_scanned_twice_at_once(api, tmp_path):
    """The scan's lock is held by a transaction of its own connection, so it holds through a pooler in transaction
    mode too (platform_kit.db.held_lock): while one scan runs, another of the same source returns None at once."""
    from platform_kit.db import held_lock

    source = ImportSource.objects.create(tenant=api.tenant, path=str(tmp_path / "gone"))
    other = ImportSource.objects.create(tenant=api.tenant, path=str(tmp_path / "also-gone"))
    with held_lock(f"ace-import-source:{source.pk}") as taken:
        assert taken
        with held_lock(f"ace-import-source:{source.pk}") as again:
            assert not again  # one holder at a time
        assert imports.import_source_scan(source=source) is None
        assert imports.import_source_scan(source=other).files_seen == 0  # another source is not held up
    assert imports.import_source_scan(source=source).files_seen == 0  # released with the block
