"""OpenCode: its SQLite database (v1.2+) and its earlier JSON storage, read as one source per session.

The database is built from ingest_app/importers/opencode/samples/opencode.sql (OpenCode's own schema, rows shaped like
its MessageV2 objects) in WAL mode, as OpenCode keeps it; the legacy storage is copied from
ingest_app/importers/opencode/samples/storage.json. Parser tests need no database; import tests use the real PostgreSQL.
"""

import hashlib
import json
import random
import sqlite3
import time
from pathlib import Path

import pytest

from ingest_app.importers import describe_layout, opencode, parse_file
from ingest_app.importers.detect import is_log_name
from ingest_app.importers.opencode.parser import normalise_tokens, split_source
from ingest_app.models import ImportedFile
from ingest_app.pipeline import import_path, plan
from sessions_app.accounting import count_usage
from sessions_app.api.serializers import MessageInSerializer
from sessions_app.models import Message, Session
from sessions_app.selectors.recount import session_count_drift
from tests.ingest_app.test_imports import expected, stats
from tests.support.api import upload

DATA = opencode.TOOL.samples
TOP = "ses_1d9f2c0b7ffeQm3Zt8Kx2Lr5Vw"
CHILD = "ses_1d9f2a4e1ffe7nP4cS9dHx3Jq1"
LEGACY = "ses_5a8e0c3d2ffeHt6Vp1Rz4Wm9Qa"
MULTI_STEP = "msg_e2b0f3d5e1a002Jw4Tb7Mn1Qs3"
T0 = 1764680400000


def home(root: Path, *, database: bool = True, storage: bool = False) -> Path:
    """OpenCode's data directory under root: the fixture database (WAL mode) and/or the legacy storage."""
    data = root / ".local" / "share" / "opencode"
    data.mkdir(parents=True, exist_ok=True)
    if database:
        connection = sqlite3.connect(data / "opencode.db")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.executescript((DATA / "opencode.sql").read_text())
        connection.commit()
        connection.close()
    if storage:  # kept as one file {path in storage/: object}, so a walk of tests/data finds no OpenCode store
        for relative, body in json.loads((DATA / "storage.json").read_text()).items():
            (data / "storage" / relative).parent.mkdir(parents=True, exist_ok=True)
            (data / "storage" / relative).write_text(json.dumps(body, indent=2))
    return data


def write(db: Path, sql: str, *params) -> None:
    connection = sqlite3.connect(db)
    with connection:
        connection.execute(sql, params)
    connection.close()


def add_message(db: Path, message_id: str, session: str, when: int, data: dict, parts: list[dict]) -> None:
    """A message and its parts as OpenCode writes them, and the session's `time_updated` moved on."""
    write(
        db, "INSERT OR REPLACE INTO message VALUES (?, ?, ?, ?, ?)", message_id, session, when, when, json.dumps(data)
    )
    for index, part in enumerate(parts, start=1):
        part_id = f"prt_{message_id[4:]}{index:03d}"
        write(db, "INSERT OR REPLACE INTO part VALUES (?, ?, ?, ?, ?, ?)", part_id, message_id, session, when, when,
              json.dumps(part))  # fmt: skip
    write(db, "UPDATE session SET time_updated = ? WHERE id = ?", when, session)


def assistant(parent: str, when: int, *, completed: bool, tokens: dict | None = None) -> dict:
    usage = tokens or {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    return {
        "role": "assistant", "time": {"created": when, **({"completed": when + 500} if completed else {})},
        "parentID": parent, "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": "build",
        "agent": "build", "path": {"cwd": "/home/dev/weather", "root": "/home/dev/weather"}, "cost": 0.01,
        "tokens": usage,
    }  # fmt: skip


def step(text: str, usage: dict, reason: str = "stop") -> list[dict]:
    """The parts of one finished call: step-start, its text, step-finish with its tokens."""
    finish = {"type": "step-finish", "reason": reason, "cost": 0.01, "tokens": usage}
    return [{"type": "step-start"}, {"type": "text", "text": text}, finish]


def tokens(i, o, r=0, read=0, write_=0) -> dict:
    return {"input": i, "output": o, "reasoning": r, "cache": {"read": read, "write": write_}}


def sources(data: Path) -> dict[str, Path]:
    return {split_source(path).session_id: path for path in plan.log_files(data)}


# -- the format --------------------------------------------------------------------------------------------------


def test_the_database_gives_one_source_per_session_and_a_subagent_session_names_its_top_session(tmp_path):
    data = home(tmp_path)
    found = plan.log_files(tmp_path)
    assert [str(p) for p in found] == [f"{data}/opencode.db#{TOP}", f"{data}/opencode.db#{TOP}/{CHILD}"]
    child = describe_layout(found[1])
    assert (child.tool, child.file_key, child.is_subagent, child.parent_session_id) == ("opencode", CHILD, True, TOP)


def test_each_finished_step_is_one_request_with_the_tokens_of_its_own_call(tmp_path):
    data = home(tmp_path)
    parsed = parse_file(sources(data)[TOP])
    assert (parsed.tool, parsed.session.agent_session_id, parsed.pending, parsed.issues) == ("opencode", TOP, 0, [])
    steps = [m for m in parsed.messages if m.metadata.get("message_id") == MULTI_STEP and m.role == "assistant"]
    # One message, two API calls: the message's own `tokens` are only the last call's (OpenCode overwrites them).
    assert [(m.external_id, m.request_id) for m in steps] == [
        (MULTI_STEP, MULTI_STEP),
        (f"{MULTI_STEP}:2", f"{MULTI_STEP}#2"),
    ]
    assert [(m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_creation_tokens) for m in steps] == [
        (1200, 310 + 120, 11800, 400),  # AI SDK v6: `output` without the reasoning, which is added
        (640, 95, 12900, 0),  # total = input + cache + output: the reasoning is already inside
    ]
    assert [m.metadata["cost"] for m in steps] == [0.0521, 0.0468]
    assert steps[0].thinking == "The user wants a CLI. Look at the project first."
    assert [c["name"] for m in steps for c in m.tool_calls] == ["read", "write"]
    counts = count_usage(parsed.messages)
    # 4 finished steps and 2 failed calls (a 529 and a 401; the missing key made no call): no tokens of their own
    assert (counts["requests"], counts["input_tokens"], counts["output_tokens"]) == (6, 2350, 673)
    assert (counts["cache_read_tokens"], counts["cache_creation_tokens"], counts["total_tokens"]) == (53200, 950, 3023)
    assert (counts["message_user"], counts["message_toolresult"], counts["message_error"], counts["conversations"]) == (
        4, 3, 3, 4,
    )  # fmt: skip


def test_every_message_is_a_valid_messages_api_item(tmp_path):
    write(home(tmp_path) / "opencode.db", "UPDATE part SET data = replace(data, '\"cost\":0.0521', '\"cost\":NaN')")
    for path in plan.log_files(tmp_path):
        for item in parse_file(path).ingest_items():
            serializer = MessageInSerializer(data=item)
            assert serializer.is_valid(), (item, serializer.errors)
            json.dumps(item, ensure_ascii=False, allow_nan=False)


def test_a_failed_call_is_an_error_that_is_a_request_and_an_interrupted_reply_is_kept_without_one(tmp_path):
    parsed = parse_file(sources(home(tmp_path))[TOP])
    errors = [m for m in parsed.messages if m.role == "error"]
    assert [(m.content[:20], m.request_id, m.model, m.metadata["name"], m.metadata.get("status")) for m in errors] == [
        ("Overloaded", "msg_e2b0f3d5e1a006Pb8Sy1Gj5Lo2:error", "claude-sonnet-4-5", "APIError", 529),
        # No API key: the AI SDK refused before sending anything (LoadAPIKeyError): no call, no request.
        ("OpenAI API key is mi", None, None, "ProviderAuthError", None),
        ("Incorrect API key pr", "msg_e2b0f3d5e1a011Uc3Me7Xz0Sy4:error", "gpt-5", "APIError", 401),
    ]
    assert all(m.input_tokens is None for m in errors)  # a failed call reports no usage
    interrupted = next(m for m in parsed.messages if m.metadata.get("message_id") == "msg_e2b0f3d5e1a008Re9Ua3Jl7Nq5")
    assert (interrupted.role, interrupted.content, interrupted.request_id, interrupted.input_tokens) == (
        "assistant", "The CLI reads", None, None,
    )  # fmt: skip
    assert interrupted.metadata["kind"] == "unfinished" and interrupted.metadata["aborted"] is True


def test_the_subagent_session_names_the_task_call_that_spawned_it(tmp_path):
    data = home(tmp_path)
    top = parse_file(sources(data)[TOP])
    task = next(m for m in top.messages if m.metadata.get("spawned_agent_id"))
    assert task.metadata["spawned_agent_id"] == CHILD and task.tool_calls[0]["name"] == "task"
    child = parse_file(sources(data)[CHILD])
    assert (child.session.parent_agent_session_id, child.session.is_subagent) == (TOP, True)
    assert [(m.role, m.metadata["kind"]) for m in child.messages] == [
        ("system", "subagent_prompt"), ("assistant", "response"), ("toolResult", "tool_result"),
    ]  # fmt: skip
    assert child.messages[2].metadata["is_error"] is True


@pytest.mark.parametrize(
    ("usage", "output"),
    [
        ({"total": 13830, "input": 1200, "output": 310, "reasoning": 120, "cache": {"read": 11800, "write": 400}}, 430),
        ({"total": 13635, "input": 640, "output": 95, "reasoning": 40, "cache": {"read": 12900, "write": 0}}, 95),
        ({"input": 10, "output": 5, "reasoning": 7, "cache": {"read": 0, "write": 0}}, 12),
        ({"input": 10, "output": 5, "reasoning": 0}, 5),
    ],
)
def test_reasoning_counts_as_output_once(usage, output):
    assert normalise_tokens(usage)["output_tokens"] == output
    assert normalise_tokens(usage)["total_tokens"] == usage["input"] + output


def test_the_legacy_json_storage_is_read_per_session_with_the_figures_other_parsers_give(tmp_path):
    data = home(tmp_path, database=False, storage=True)
    (source,) = plan.log_files(tmp_path)
    assert str(source) == f"{data}/storage#{LEGACY}"
    parsed = parse_file(source)
    assert (parsed.session.agent_session_id, parsed.session.project, parsed.session.metadata["title"]) == (
        LEGACY, "notes", "Summarise the meeting notes",
    )  # fmt: skip
    calls = [m for m in parsed.messages if m.request_id]
    # ccusage's OpenCode fixture (input 100, output 50, cache read 10, write 20, cost 0.02) and tokscale's
    # (1000/500/200/100): the same figures; the second message has no part files, its own tokens are the call.
    assert [(m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_creation_tokens) for m in calls] == [
        (100, 50, 10, 20), (1000, 500, 200, 100),
    ]  # fmt: skip
    assert calls[0].metadata["cost"] == 0.02 and calls[0].content.startswith("- Budget approved")
    # Naming one file of the storage imports its session.
    message_file = next((data / "storage" / "message" / LEGACY).iterdir())
    assert plan.log_files(message_file) == [source]


def test_the_database_wins_over_the_json_files_it_was_migrated_from(tmp_path):
    data = home(tmp_path, storage=True)
    legacy_copy = data / "storage" / "message" / TOP
    legacy_copy.mkdir()
    (legacy_copy / "msg_e2b0f3d5e1a001Hq8Zc2Lr5Kx9.json").write_text(json.dumps({"id": "x", "role": "user"}))
    found = {str(path) for path in plan.log_files(tmp_path)}
    assert f"{data}/opencode.db#{TOP}" in found and f"{data}/storage#{TOP}" not in found
    assert f"{data}/storage#{LEGACY}" in found  # only in the JSON files: read from them


def test_detection_never_takes_other_files_for_opencode(tmp_path):
    data = home(tmp_path, storage=True)
    part = next((data / "storage" / "part").rglob("*.json"))
    assert not is_log_name(part) and describe_layout(part).tool is None
    for other in (
        "/home/a/.claude/projects/p/s.jsonl",
        "/tmp/x#y.jsonl",
        "/tmp/history.db#ses_1",
        "/tmp/storage#a/b/c",
    ):
        assert split_source(other) is None and describe_layout(other).tool != "opencode"
    (tmp_path / "app.db").write_bytes(b"SQLite format 3\x00")
    assert all(split_source(p) for p in plan.log_files(tmp_path))  # app.db is not read


# -- bad input ---------------------------------------------------------------------------------------------------


def test_a_sessions_stat_follows_every_change_even_right_after_all_were_measured(tmp_path):
    from ingest_app.importers.opencode.parser import source_stat

    data = home(tmp_path)
    top, child = sources(data)[TOP], sources(data)[CHILD]
    before, child_before = source_stat(top), source_stat(child)
    assert before.st_mtime_ns == (T0 + 121_200) * 1_000_000 and before.st_size > 0
    when = T0 + 130_000
    add_message(data / "opencode.db", "msg_e2b0f3d5e1a020Zz1Yy2Xx3Ww4", TOP, when, {"role": "user"}, [{"type": "text"}])
    after = source_stat(top)  # measured at once, not from the measure of all sessions taken a moment ago
    assert after.st_mtime_ns == when * 1_000_000 and after.st_size > before.st_size
    assert source_stat(child) == child_before


def test_a_session_still_streaming_stores_its_unfinished_step_at_once_without_a_request(tmp_path):
    db = home(tmp_path) / "opencode.db"
    when = T0 + 200_000
    add_message(db, "msg_e2b0f3d5e1a009Aa1Bb2Cc3Dd4", TOP, when, {"role": "user", "time": {"created": when}}, [
        {"type": "text", "text": "One more thing."},
    ])  # fmt: skip
    streaming = "msg_e2b0f3d5e1a010Ee5Ff6Gg7Hh8"
    parts = [
        *step("Checking.", tokens(50, 20), "tool-calls"),
        {"type": "step-start"},
        {"type": "text", "text": "Half a sen"},
    ]
    add_message(
        db, streaming, TOP, when + 1000, assistant("msg_e2b0f3d5e1a009Aa1Bb2Cc3Dd4", when, completed=False), parts
    )
    parsed = parse_file(sources(db.parent)[TOP])
    ours = [m for m in parsed.messages if m.metadata.get("message_id") == streaming]
    assert [(m.external_id, m.content, m.request_id, m.metadata["kind"]) for m in ours] == [
        (streaming, "Checking.", streaming, "response"),
        (f"{streaming}:2", "Half a sen", None, "unfinished"),  # as far as it is written; no call reported yet
    ]
    assert parsed.pending == 1 and ours[1].output_tokens is None
    flushed = parse_file(sources(db.parent)[TOP], flush=True)
    assert [m.to_ingest() for m in flushed.messages] == [m.to_ingest() for m in parsed.messages]
    assert flushed.pending == 0


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE message SET data = '{not json' WHERE id LIKE '%002%'",
        "UPDATE part SET data = '[1, 2]' WHERE rowid % 3 = 0",
        "UPDATE part SET data = 'null'",
        'UPDATE message SET data = \'{"role": "assistant", "tokens": {"input": "lots", "cache": 7}}\'',
        'UPDATE part SET data = \'{"type": "step-finish", "tokens": null}\'',
        'UPDATE part SET data = \'{"type": "tool", "state": 3}\'',
        "DELETE FROM session",
        "DROP TABLE part",
    ],
)
def test_a_damaged_database_gives_issues_never_an_exception(tmp_path, damage):
    data = home(tmp_path)
    db = data / "opencode.db"
    before = sources(data)
    write(db, damage)
    for path in [*before.values(), *plan.log_files(tmp_path)]:
        result = parse_file(path)
        assert result.tool is None or result.tool == "opencode"
        count_usage(result.messages)
        if result.tool is None:
            assert result.issues and result.issues[0].line == 0


def test_random_bytes_and_truncations_of_a_database_never_raise(tmp_path):
    data = home(tmp_path)
    db = data / "opencode.db"
    connection = sqlite3.connect(db)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    pristine = db.read_bytes()
    rng = random.Random(15)
    for _ in range(40):
        damaged = bytearray(pristine[: rng.randrange(len(pristine) + 1)])
        for _ in range(rng.randrange(8)):
            if damaged:
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        db.write_bytes(bytes(damaged))
        for path in plan.log_files(tmp_path):
            parse_file(path)
            parse_file(path, flush=True)


# -- imports -----------------------------------------------------------------------------------------------------


def test_an_opencode_database_is_imported_exactly_with_its_subagent_in_the_round_that_spawned_it(api, tmp_path):
    data = home(tmp_path)
    db_bytes = hashlib.sha256((data / "opencode.db").read_bytes()).hexdigest()
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert (summary.files_seen, summary.files_imported, summary.sessions_created) == (2, 2, 1)
    session = Session.objects.get(tenant=api.tenant)
    assert (session.tool, session.agent_session_id, session.name, session.project) == (
        "opencode", TOP, "Weather CLI for Paris", "weather",
    )  # fmt: skip
    assert session.user_id == "dev" and session.metadata["cwd"] == "/home/dev/weather"
    top, child = (parse_file(path) for path in plan.log_files(tmp_path))
    assert stats(api, session) == expected(top.messages, child.messages)
    assert (summary.requests, summary.tokens["input_tokens"]) == (7, 2350 + 1500)
    assert session_count_drift(session=session) == {}
    spawned = Message.objects.get(session=session, metadata__spawned_agent_id=CHILD).conversation_id
    assert set(
        Message.objects.filter(session=session, metadata__subagent=True).values_list("conversation_id", flat=True)
    ) == {spawned}
    assert hashlib.sha256((data / "opencode.db").read_bytes()).hexdigest() == db_bytes  # never written


def test_importing_again_reads_only_the_sessions_that_changed_and_stores_nothing_twice(api, tmp_path):
    db = home(tmp_path) / "opencode.db"
    import_path(tenant=api.tenant, path=tmp_path)
    again = import_path(tenant=api.tenant, path=tmp_path)
    assert (again.files_unchanged, again.messages, again.requests) == (2, 0, 0)
    when = T0 + 300_000
    add_message(db, "msg_e2b0f3d5e1a011Ii9Jj0Kk1Ll2", TOP, when, {"role": "user", "time": {"created": when}}, [
        {"type": "text", "text": "Thanks!"},
    ])  # fmt: skip
    reply = assistant("msg_e2b0f3d5e1a011Ii9Jj0Kk1Ll2", when, completed=True, tokens=tokens(5, 3, read=900))
    add_message(
        db, "msg_e2b0f3d5e1a012Mm3Nn4Oo5Pp6", TOP, when + 100, reply, step("You're welcome.", tokens(5, 3, read=900))
    )
    grown = import_path(tenant=api.tenant, path=tmp_path)
    assert (grown.files_imported, grown.files_unchanged, grown.messages, grown.requests) == (1, 1, 2, 1)
    session = Session.objects.get(tenant=api.tenant)
    top, child = (parse_file(path) for path in plan.log_files(tmp_path))
    assert stats(api, session) == expected(top.messages, child.messages)
    # The database named on its own: the same sources, nothing new.
    direct = import_path(tenant=api.tenant, path=db)
    assert (direct.files_seen, direct.files_unchanged, direct.messages) == (2, 2, 0)


def test_an_assistant_message_updated_later_counts_once_with_its_final_tokens(api, tmp_path, settings):
    settings.ACE_IMPORT_IDLE_SECONDS = 3600
    db = home(tmp_path) / "opencode.db"
    user_id, reply = "msg_e2b0f3d5e1a013Qq7Rr8Ss9Tt0", "msg_e2b0f3d5e1a014Uu1Vv2Ww3Xx4"
    when = int(time.time() * 1000)  # a live session: its unfinished call waits
    add_message(
        db, user_id, TOP, when, {"role": "user", "time": {"created": when}}, [{"type": "text", "text": "Go on."}]
    )
    usage = tokens(70, 30, read=5000)
    first = step("Step one.", usage, "tool-calls")
    # OpenCode writes the message as the stream goes: a finished call, then the next one half written.
    add_message(db, reply, TOP, when + 10, assistant(user_id, when, completed=False, tokens=usage),
                [*first, {"type": "step-start"}, {"type": "text", "text": "Step tw"}])  # fmt: skip
    import_path(tenant=api.tenant, path=tmp_path)
    assert ImportedFile.objects.get(tenant=api.tenant, path=str(sources(db.parent)[TOP])).pending == 1
    final = tokens(90, 45, r=5, read=5100, write_=20)
    add_message(db, reply, TOP, when + 20, assistant(user_id, when, completed=True, tokens=final),
                [*first, *step("Step two.", final)])  # fmt: skip
    import_path(tenant=api.tenant, path=tmp_path)
    import_path(tenant=api.tenant, path=tmp_path)
    rows = Message.objects.filter(session__agent_session_id=TOP, metadata__message_id=reply).order_by("external_id")
    assert [(m.external_id, m.content, m.input_tokens, m.output_tokens) for m in rows] == [
        (reply, "Step one.", 70, 30), (f"{reply}:2", "Step two.", 90, 50),
    ]  # fmt: skip
    session = Session.objects.get(tenant=api.tenant)
    top, child = (parse_file(path) for path in plan.log_files(tmp_path))
    assert stats(api, session) == expected(top.messages, child.messages)


def test_a_call_stored_unfinished_after_an_idle_spell_is_completed_in_place_when_it_finishes(api, tmp_path):
    db = home(tmp_path) / "opencode.db"
    user_id, reply = "msg_e2b0f3d5e1a015Yy5Zz6Aa7Bb8", "msg_e2b0f3d5e1a016Cc9Dd0Ee1Ff2"
    when = T0 + 500_000  # long idle: the half-written call is stored as it is, without a request
    add_message(db, user_id, TOP, when, {"role": "user", "time": {"created": when}}, [{"type": "text", "text": "Go."}])
    add_message(db, reply, TOP, when + 10, assistant(user_id, when, completed=False),
                [{"type": "step-start"}, {"type": "text", "text": "Wor"}])  # fmt: skip
    import_path(tenant=api.tenant, path=tmp_path)
    final = tokens(90, 45, read=5100)
    add_message(
        db, reply, TOP, when + 20, assistant(user_id, when, completed=True, tokens=final), step("Working.", final)
    )
    import_path(tenant=api.tenant, path=tmp_path)
    stored = Message.objects.get(session__agent_session_id=TOP, external_id=reply)
    assert (stored.content, stored.request_id, stored.input_tokens) == ("Working.", reply, 90)


def test_a_database_another_process_is_writing_is_read_as_committed(api, tmp_path):
    db = home(tmp_path) / "opencode.db"
    writer = sqlite3.connect(db)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE session SET title = 'uncommitted' WHERE id = ?", (TOP,))
    try:
        summary = import_path(tenant=api.tenant, path=tmp_path)
    finally:
        writer.rollback()
        writer.close()
    assert (summary.files_imported, summary.requests) == (2, 7)
    assert Session.objects.get(tenant=api.tenant).name == "Weather CLI for Paris"


def test_a_file_named_like_the_database_that_is_not_one_is_refused_with_the_reason(api, tmp_path):
    data = tmp_path / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    (data / "opencode.db").write_bytes(b"not a database at all")
    summary = import_path(tenant=api.tenant, path=tmp_path)
    (result,) = summary.files
    assert result.status == "refused" and result.reason.startswith("not a readable OpenCode database")
    assert not ImportedFile.objects.filter(tenant=api.tenant).exists()


def test_json_storage_and_the_database_holding_the_same_session_count_it_once(api, tmp_path):
    data = home(tmp_path)
    import_path(tenant=api.tenant, path=data / "opencode.db")
    # The JSON files OpenCode 1.1 wrote for the same session (the migration copies them with the same ids).
    storage = data / "storage"
    for kind in ("session/p", "message", "part"):
        (storage / kind).mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(data / "opencode.db")
    for session_id, parent_id in connection.execute("SELECT id, parent_id FROM session"):
        info = {"id": session_id, "parentID": parent_id, "directory": "/home/dev/weather"}
        (storage / "session" / "p" / f"{session_id}.json").write_text(json.dumps(info))
    for message_id, session_id, body in connection.execute("SELECT id, session_id, data FROM message"):
        (storage / "message" / session_id).mkdir(exist_ok=True)
        (storage / "message" / session_id / f"{message_id}.json").write_text(body)
    for part_id, message_id, body in connection.execute("SELECT id, message_id, data FROM part"):
        (storage / "part" / message_id).mkdir(exist_ok=True)
        (storage / "part" / message_id / f"{part_id}.json").write_text(body)
    connection.close()
    legacy = import_path(tenant=api.tenant, path=storage)
    assert legacy.files_imported == 2 and (legacy.messages, legacy.requests, legacy.sessions_created) == (0, 0, 0)
    assert Session.objects.filter(tenant=api.tenant).count() == 1


def test_an_uploaded_database_is_refused_with_what_to_do_instead(api, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    data = home(tmp_path / "home")
    response = upload(api, ("opencode.db", (data / "opencode.db").read_bytes()))
    assert response.status_code == 400
    assert "OpenCode database" in json.dumps(response.json()) and not Session.objects.exists()


def test_random_mutations_of_a_session_never_raise(tmp_path):
    """Any value of any field replaced by junk (what a newer or broken OpenCode could write): issues, no exception."""
    from ingest_app.importers.base import SourceFile
    from ingest_app.importers.opencode.parser import OpenCodeParser, _read_database

    data = home(tmp_path)
    document = _read_database(split_source(sources(data)[TOP]), [])
    junk = [None, 0, -1, 2.5, "", "x", [], {}, [1, "a"], {"a": {}}, True, 10**30]
    rng = random.Random(6)

    def nodes(value, path=()):
        yield path
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            yield from nodes(item, (*path, key))

    paths = [path for path in nodes(document) if path]
    for _ in range(300):
        mutated = json.loads(json.dumps(document))
        for _ in range(rng.randrange(1, 6)):
            *parent, last = rng.choice(paths)
            target = mutated
            try:
                for key in parent:
                    target = target[key]
                target[last] = rng.choice(junk)
            except (KeyError, IndexError, TypeError):
                continue
        parser = OpenCodeParser(SourceFile(path=tmp_path, file_key=TOP), {})
        parser.feed_document(mutated)
        parser.finish(flush=rng.random() < 0.5)
        for message in parser.messages:
            message.to_ingest()
        count_usage(parser.messages)
