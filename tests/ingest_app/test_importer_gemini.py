"""Gemini CLI logs (JSON documents and JSONL with rewritten records) and older Qwen Code JSON documents:
exact counts per docs/accounting.md ("Gemini CLI", "Qwen Code"), incremental reads, detection that never
takes one fork for the other, and input that is not a log.

Pure parsing: no database (the imports are in test_imports_gemini.py). The samples of both tools
reproduce the records of Gemini CLI's chatRecordingService and of Qwen Code's session reader.
"""

import copy
import json
import random
import shutil
from pathlib import Path

import pytest

from ingest_app.importers import describe_layout, explain_detection, parse_file
from ingest_app.importers.detect import is_log_name
from ingest_app.importers.gemini_cli.parser import gemini_tokens
from sessions_app.accounting import count_usage
from sessions_app.api.serializers import MessageInSerializer
from tests.support.agent_logs import DATA

GEMINI_HOME = Path("gemini_cli/.gemini/tmp")
GEMINI_JSON = (
    GEMINI_HOME
    / "79b1946573b55334fbdb6d41866f54789477fe12ecee2ed364ceea086a02ef82/chats/session-2026-02-10T17-27-08c1f87b.json"
)
GEMINI_CHATS = GEMINI_HOME / "a33c3345ed592a7d6c2eb32b6ad11a280e0cafc473b2669402655b56894f5391/chats"
GEMINI_SESSION = "5c9e2a4b-7d1f-4e3a-9b6c-8f0e2d4a6b1c"
GEMINI_AGENT_ID = "2b7f9c1e-4a6d-4c8b-9e3f-5d1a7c9b3e2f"
GEMINI_JSONL = GEMINI_CHATS / "session-2026-05-15T20-55-5c9e2a4b.jsonl"
GEMINI_AGENT = GEMINI_CHATS / GEMINI_SESSION / f"{GEMINI_AGENT_ID}.jsonl"
QWEN_JSON = Path(
    "qwen_code/.qwen/tmp/4f1c8e2a9b7d6c5e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e/chats/"
    "session-2025-09-12T08-14-3b9c1d2e.json"
)
QWEN_JSONL = Path("qwen_code/.qwen/projects/-home-dev-weather/chats/8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12.jsonl")
CLAUDE = Path("claude_code/.claude/projects/-home-dev-weather/5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11.jsonl")
OPENCLAW = Path("openclaw/.openclaw/agents/main/sessions/0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36.jsonl")
SAMPLES = [GEMINI_JSON, GEMINI_JSONL, GEMINI_AGENT, QWEN_JSON]
TOTALS = ("requests", "conversations", "messages", "input_tokens", "output_tokens", "cache_read_tokens", "total_tokens")


def counts(messages) -> dict:
    usage = count_usage([message.to_ingest() for message in messages])
    return {name: usage[name] for name in TOTALS}


def roles(messages) -> dict:
    found: dict[str, int] = {}
    for message in messages:
        found[message.role] = found.get(message.role, 0) + 1
    return found


def jsonl_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- the JSON form ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gemini_json():
    return parse_file(DATA / GEMINI_JSON)


def test_a_gemini_json_session_counts_each_call_once_with_gemini_token_semantics(gemini_json):
    assert (gemini_json.tool, gemini_json.issues) == ("gemini-cli", [])
    # 4 `gemini` records with tokens, and the call that failed on the model's capacity (its `[API Error: …]`
    # record, no tokens); input = input − cached, output = output + thoughts (Gemini's total is input + output +
    # thoughts + tool, so the cache is inside `input`).
    assert counts(gemini_json.messages) == {
        "requests": 5,
        "conversations": 2,
        "messages": 12,
        "input_tokens": 24265,
        "output_tokens": 13094,
        "cache_read_tokens": 313340,
        "total_tokens": 37359,
    }
    assert roles(gemini_json.messages) == {"user": 2, "assistant": 4, "toolResult": 3, "system": 2, "error": 1}
    first = next(m for m in gemini_json.messages if m.role == "assistant")
    tokens = (first.input_tokens, first.cache_read_tokens, first.output_tokens, first.total_tokens)
    assert tokens == (13283 - 8147, 8147, 21 + 248, 5405)
    assert first.request_id == first.external_id == "89bea036-72ba-40d8-bb49-7b47b8aba537"
    assert first.model == "gemini-3-pro-preview"
    assert first.thinking == "Investigating the bug\nI'm looking for where get_coffset is defined and called."
    usage = {"input": 13283, "output": 21, "cached": 8147, "thoughts": 248, "tool": 0, "total": 13552}
    assert first.metadata["usage"] == usage  # the tool's own counts are kept
    assert first.tool_calls == [
        {"id": "search_file_content-1770744484519-a47bac6cd4faf", "name": "search_file_content",
         "arguments": {"pattern": "get_coffset"}}
    ]  # fmt: skip


def test_gemini_json_tool_results_errors_and_system_records(gemini_json):
    results = [m for m in gemini_json.messages if m.role == "toolResult"]
    assert [(m.tool_name, m.content, m.metadata.get("is_error")) for m in results] == [
        ("search_file_content", "Found 4 matches", None),
        ("read_file", "static int get_coffset(blosc2_frame_s* frame, int32_t header_len, ...", None),
        ("run_shell_command", "Command exited with code 2: no rule to make target 'test_frame'", True),
    ]
    assert results[0].external_id == "search_file_content-1770744484519-a47bac6cd4faf:result"
    (error,) = [m for m in gemini_json.messages if m.role == "error"]
    assert error.content.startswith("[API Error: You have exhausted your capacity")
    # A failed call: a request of the model of the last response (the record names none), without tokens (Gemini
    # CLI keeps no usage for it); its request id is the record's id, as for a response.
    assert (error.request_id, error.model, error.input_tokens) == (error.external_id, "gemini-3-pro-preview", None)
    assert [(m.metadata["kind"], m.request_id) for m in gemini_json.messages if m.role == "system"] == [
        ("info", None),
        ("warning", None),
    ]
    prompts = [m for m in gemini_json.messages if m.role == "user"]
    assert [m.conversation for m in prompts] == [f"gemini-cli:{m.external_id}" for m in prompts]
    assert {m.conversation for m in gemini_json.messages} == {m.conversation for m in prompts}


def test_the_gemini_session_and_its_span(gemini_json):
    session = gemini_json.session
    assert session.agent_session_id == "08c1f87b-ff3b-48ff-9d6f-524e2bbf89b9"
    assert session.started_at.isoformat() == "2026-02-10T17:27:58.644000+00:00"
    assert session.ended_at.isoformat() == "2026-02-10T17:41:12.310000+00:00"
    assert session.metadata["project_hash"] == session.metadata["project_dir"]
    assert session.project == ""  # a hashed folder names no project
    assert not session.is_subagent


def test_a_project_folder_named_after_the_project_names_the_sessions_project(tmp_path):
    path = tmp_path / ".gemini/tmp/weather-app/chats" / GEMINI_JSONL.name
    path.parent.mkdir(parents=True)
    shutil.copy(DATA / GEMINI_JSONL, path)
    assert parse_file(path).session.project == "weather-app"


# -- tokens -------------------------------------------------------------------------------------------------


def test_gemini_token_counts_match_what_tokscale_asserts():
    # junhoyeo/tokscale sessions/gemini.rs: input 15 (cache-inclusive), cached 5 → input 10, cache 5; output 20,
    # reasoning 2 (tokscale keeps reasoning apart; it is output here).
    assert gemini_tokens({"input": 15, "output": 20, "cached": 5, "thoughts": 2, "total": 37}) == {
        "input_tokens": 10,
        "output_tokens": 22,
        "cache_read_tokens": 5,
        "total_tokens": 32,
    }
    # The same counts with a total that shows `input` was already net of the cache: kept (as tokscale does).
    assert gemini_tokens({"input": 10, "output": 20, "cached": 5, "thoughts": 2, "total": 37})["input_tokens"] == 10
    # tokscale's headless case: cached larger than the prompt never makes a negative input.
    assert gemini_tokens({"input": 5, "output": 2, "cached": 10})["input_tokens"] == 0


def test_gemini_usage_matches_what_another_session_log_extractor_asserts(tmp_path):
    """A Go session-log usage extractor's fixtures (found by code search): input + tool − cached, output +
    thoughts; a record re-appended with its tokens (first `tokens: null`, or partial) counts once, the last."""
    assert gemini_tokens({"input": 1200, "output": 80, "cached": 1000, "thoughts": 40, "tool": 30, "total": 1350}) == {
        "input_tokens": 1200 + 30 - 1000,
        "output_tokens": 80 + 40,
        "cache_read_tokens": 1000,
        "total_tokens": 350,
    }
    path = tmp_path / ".gemini/tmp/h/chats/session-2026-06-10T10-00-24e7203e.jsonl"
    path.parent.mkdir(parents=True)
    answer = {"id": "b2", "timestamp": "2026-06-10T10:00:05.000Z", "type": "gemini", "content": "answer"}
    lines = [
        {"sessionId": "24e7203e", "projectHash": "h", "startTime": "2026-06-10T10:00:00.000Z", "kind": "main"},
        {"id": "a1", "timestamp": "2026-06-10T10:00:01.000Z", "type": "user", "content": "hello"},
        {**answer, "tokens": None},
        {**answer, "tokens": {"input": 900, "output": 60, "cached": 800, "thoughts": 20, "tool": 0, "total": 980}},
        {"$set": {"lastUpdated": "2026-06-10T10:00:06.000Z"}},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"id":"c25da806-')  # a torn last write
    result = parse_file(path)
    (reply,) = [m for m in result.messages if m.role == "assistant"]
    assert (reply.input_tokens, reply.output_tokens, reply.cache_read_tokens) == (100, 80, 800)
    assert counts(result.messages)["requests"] == 1
    assert [issue.level for issue in result.issues] == ["warning"]  # the torn line waits for its end


def test_thoughts_inside_the_output_and_tool_use_prompts_are_counted_once():
    # An OpenAI-compatible provider's completion count already holds the reasoning: total = input + output.
    assert gemini_tokens({"input": 100, "output": 50, "cached": 0, "thoughts": 20, "total": 150})["output_tokens"] == 50
    # toolUsePromptTokenCount is input the model read; Gemini's total adds it: ours is that total less the cache.
    tokens = gemini_tokens({"input": 100, "output": 10, "cached": 40, "thoughts": 5, "tool": 30, "total": 145})
    assert tokens == {"input_tokens": 90, "output_tokens": 15, "cache_read_tokens": 40, "total_tokens": 105}
    assert gemini_tokens({"cached": 3}) == {}  # no prompt and no output count: no usage at all


# -- the JSONL form -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gemini_jsonl():
    return parse_file(DATA / GEMINI_JSONL)


def test_a_rewritten_jsonl_record_is_one_message_in_its_last_version_and_one_request(gemini_jsonl):
    records = jsonl_records(DATA / GEMINI_JSONL)
    model_lines = [record for record in records if record.get("type") == "gemini"]
    assert (len(model_lines), len({record["id"] for record in model_lines})) == (7, 4)  # 3 rewrites
    assert counts(gemini_jsonl.messages) == {
        "requests": 4,
        "conversations": 2,
        "messages": 10,
        "input_tokens": 10072,
        "output_tokens": 419,
        "cache_read_tokens": 26080,
        "total_tokens": 10491,
    }
    # Written three times: without tokens, with tokens, with its tool calls: one message, the last version.
    rewritten = [m for m in gemini_jsonl.messages if m.external_id == "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"]
    (message,) = rewritten
    assert (message.input_tokens, message.output_tokens, message.request_id) == (440, 52, message.external_id)
    assert [call["name"] for call in message.tool_calls] == ["codebase_investigator", "replace"]
    assert message.line == 12  # where the record first appeared: messages keep the order of the log


def test_tool_results_sent_back_as_user_records_are_not_prompts_and_not_counted_twice(gemini_jsonl):
    assert roles(gemini_jsonl.messages) == {"user": 2, "assistant": 4, "toolResult": 3, "system": 1}
    assert [m.content for m in gemini_jsonl.messages if m.role == "user"] == [
        "What does parse_config do?",
        "Now add a docstring, and check who calls it",
    ]
    spawner = next(m for m in gemini_jsonl.messages if m.tool_name == "codebase_investigator")
    assert spawner.metadata["spawned_agent_id"] == GEMINI_AGENT_ID
    assert gemini_jsonl.session.metadata["summary"] == "Explain and document parse_config"
    assert gemini_jsonl.session.agent_session_id == GEMINI_SESSION


def test_a_subagent_file_belongs_to_its_parent_session_and_opens_no_round():
    result = parse_file(DATA / GEMINI_AGENT)
    session = result.session
    assert (session.agent_session_id, session.parent_agent_session_id, session.is_subagent) == (
        GEMINI_AGENT_ID,
        GEMINI_SESSION,
        True,
    )
    assert session.attributed_session_id == GEMINI_SESSION
    assert [(m.role, m.metadata["kind"]) for m in result.messages] == [
        ("system", "subagent_prompt"),
        ("assistant", "response"),
    ]
    assert all(m.is_subagent and m.metadata["subagent"] for m in result.messages)
    seeded = parse_file(DATA / GEMINI_AGENT, carry={"conversation": "gemini-cli:round-2"})
    assert {m.conversation for m in seeded.messages} == {"gemini-cli:round-2"}


def copy_to(relative: Path, root: Path, upto: int | None = None) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    data = (DATA / relative).read_bytes()
    target.write_bytes(data if upto is None else data[:upto])
    return target


def latest_by_external_id(*results) -> dict:
    latest = {}
    for result in results:
        for message in result.messages:
            latest[message.external_id] = message
    return latest


def test_reading_the_jsonl_in_two_steps_gives_the_last_versions_one_pass_gives(tmp_path):
    """Cut at every line: the messages of the second read complete those of the first under the same external
    ids (the import keeps the last), in the same rounds, with the same request ids."""
    data = (DATA / GEMINI_JSONL).read_bytes()
    whole = {m.external_id: m for m in parse_file(DATA / GEMINI_JSONL).messages}
    cuts = [index + 1 for index, byte in enumerate(data) if byte == ord("\n")][:-1]
    for cut in cuts:
        path = copy_to(GEMINI_JSONL, tmp_path / str(cut), upto=cut)
        first = parse_file(path)
        path.write_bytes(data)
        second = parse_file(path, start_offset=first.end_offset, carry=first.carry)
        latest = latest_by_external_id(first, second)
        assert set(latest) == set(whole), cut
        for external_id, message in whole.items():
            got = latest[external_id]
            assert (got.conversation, got.request_id, got.input_tokens, got.output_tokens, got.content) == (
                message.conversation,
                message.request_id,
                message.input_tokens,
                message.output_tokens,
                message.content,
            ), (cut, external_id)


def test_user_records_gemini_cli_does_not_replay_as_conversation_open_no_round(tmp_path):
    path = tmp_path / ".gemini/tmp/p/chats/session-x.json"
    path.parent.mkdir(parents=True)
    texts = ["/stats", "?", "<session_context>cwd: /home/dev/app</session_context>", "", "real question"]
    messages = [
        {"id": f"u{index}", "timestamp": "2026-05-01T00:00:00Z", "type": "user", "content": [{"text": text}]}
        for index, text in enumerate(texts)
    ]
    path.write_text(json.dumps({"sessionId": "s", "projectHash": "p", "messages": messages}))
    result = parse_file(path)
    assert [(m.role, m.metadata["kind"]) for m in result.messages] == [
        ("system", "command"),
        ("system", "command"),
        ("system", "meta"),
        ("system", "meta"),
        ("user", "prompt"),
    ]
    assert counts(result.messages)["conversations"] == 1


def test_rewinds_keep_the_calls_made_and_a_history_rewrite_adds_nothing(tmp_path):
    path = tmp_path / ".gemini/tmp/p/chats/session-x.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        {"sessionId": "s-rw", "projectHash": "p", "startTime": "2026-05-01T00:00:00Z", "kind": "main"},
        {"id": "u1", "timestamp": "2026-05-01T00:00:01Z", "type": "user", "content": [{"text": "try A"}]},
        {"id": "g1", "timestamp": "2026-05-01T00:00:02Z", "type": "gemini", "content": "A",
         "tokens": {"input": 10, "output": 2, "cached": 0, "thoughts": 0, "tool": 0, "total": 12}},
        {"$rewindTo": "u1"},
        {"id": "u2", "timestamp": "2026-05-01T00:00:03Z", "type": "user", "content": [{"text": "try B"}]},
        {"id": "g2", "timestamp": "2026-05-01T00:00:04Z", "type": "gemini", "content": "B",
         "tokens": {"input": 11, "output": 3, "cached": 0, "thoughts": 0, "tool": 0, "total": 14}},
        {"$set": {"messages": [
            {"id": "s1", "timestamp": "2026-05-01T00:00:05Z", "type": "user", "content": [{"text": "<summary>"}]},
            {"id": "u2", "timestamp": "2026-05-01T00:00:03Z", "type": "user", "content": [{"text": "try B"}]},
            {"id": "g2", "timestamp": "2026-05-01T00:00:04Z", "type": "gemini", "content": [{"text": "B"}],
             "tokens": {"input": 11, "output": 3, "cached": 0, "thoughts": 0, "tool": 0, "total": 14}},
        ]}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = parse_file(path)
    assert [(m.external_id, m.role) for m in result.messages] == [
        ("u1", "user"),
        ("g1", "assistant"),
        ("u2", "user"),
        ("g2", "assistant"),  # not again from the rewrite, and not its made-up summary turn s1
    ]
    assert counts(result.messages)["requests"] == 2  # the rewound call was made (and billed) all the same
    assert result.session.metadata["rewinds"] == 1


# -- older Qwen Code JSON -----------------------------------------------------------------------------------


def test_an_older_qwen_code_json_session_is_read_as_qwen_code():
    result = parse_file(DATA / QWEN_JSON)
    assert (result.tool, result.issues) == ("qwen-code", [])
    assert result.session.agent_session_id == "3b9c1d2e-6f4a-4b8c-9d0e-7a6b5c4d3e2f"
    assert counts(result.messages) == {
        "requests": 2,
        "conversations": 2,
        "messages": 5,
        "input_tokens": 13253,
        "output_tokens": 309,
        "cache_read_tokens": 12800,
        "total_tokens": 13562,
    }
    assert [m.role for m in result.messages] == ["user", "assistant", "toolResult", "assistant", "user"]
    assert result.messages[1].model == "qwen3-coder-plus"
    assert result.messages[0].conversation == "qwen-code:a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
    assert result.messages[2].content == "Listed 2 item(s)."


def test_each_file_gets_the_form_of_its_tool_that_its_suffix_names(tmp_path):
    jsonl = parse_file(DATA / QWEN_JSONL)
    assert jsonl.tool == "qwen-code" and jsonl.carry.get("document") is None and jsonl.messages
    document = parse_file(DATA / QWEN_JSON, tool="qwen-code")
    assert document.carry["document"] is True and document.messages
    exported = tmp_path / "export.json"
    shutil.copy(DATA / GEMINI_JSON, exported)
    assert parse_file(exported, tool="gemini-cli").messages == parse_file(DATA / GEMINI_JSON).messages


@pytest.mark.parametrize("relative", SAMPLES, ids=lambda p: p.name[:16])
def test_every_message_is_a_valid_messages_api_item(relative):
    items = parse_file(DATA / relative).ingest_items()
    assert items
    for item in items:
        serializer = MessageInSerializer(data=item)
        assert serializer.is_valid(), (item, serializer.errors)


# -- detection: never one fork for the other ----------------------------------------------------------------

EVERY_TOOL = [
    (CLAUDE, "claude-code"),
    (QWEN_JSONL, "qwen-code"),
    (QWEN_JSON, "qwen-code"),
    (GEMINI_JSON, "gemini-cli"),
    (GEMINI_JSONL, "gemini-cli"),
    (GEMINI_AGENT, "gemini-cli"),
    (OPENCLAW, "openclaw"),
]


def head_of(path: Path) -> list[str]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    return [text] if path.name.endswith(".json") else text.splitlines(keepends=True)[:25]


@pytest.mark.parametrize(("relative", "tool"), EVERY_TOOL, ids=lambda v: str(v)[-14:])
def test_each_tools_samples_are_detected_as_that_tool_only_by_path_and_by_content(relative, tool, tmp_path):
    assert explain_detection(DATA / relative, head_of(DATA / relative)).tool == tool
    exported = tmp_path / f"exported{relative.suffix}"  # a path that says nothing
    shutil.copy(DATA / relative, exported)
    detection = explain_detection(exported, head_of(exported))
    assert detection.tool == tool, detection.reason
    assert len(parse_file(exported).messages) == len(parse_file(DATA / relative).messages)


def test_a_gemini_jsonl_log_in_a_qwen_folder_is_refused_and_never_read_as_qwen_code(tmp_path):
    misplaced = tmp_path / ".qwen/projects/p/chats" / GEMINI_JSONL.name
    misplaced.parent.mkdir(parents=True)
    shutil.copy(DATA / GEMINI_JSONL, misplaced)
    result = parse_file(misplaced)
    assert result.messages == [] and result.tool is None
    (issue,) = result.issues
    assert "the path is in the qwen-code storage layout, but" in issue.message
    assert "fields only gemini-cli writes" in issue.message
    # And the other way round: Qwen Code's ChatRecords under ~/.gemini.
    other = tmp_path / ".gemini/tmp/p/chats" / QWEN_JSONL.name
    other.parent.mkdir(parents=True)
    shutil.copy(DATA / QWEN_JSONL, other)
    assert "fields only qwen-code writes" in parse_file(other).issues[0].message


def test_a_session_document_without_a_model_response_is_refused_with_the_reason_when_the_path_says_nothing(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"sessionId": "s", "projectHash": "p", "messages": [{"id": "1", "type": "user"}]}))
    result = parse_file(path)
    assert result.messages == [] and result.tool is None
    assert "Gemini CLI and older Qwen Code write the same shape" in result.issues[0].message


def test_json_files_are_walked_only_in_the_folders_of_a_tool_that_writes_documents():
    assert describe_layout(DATA / GEMINI_AGENT).parent_session_id == GEMINI_SESSION
    assert describe_layout(DATA / GEMINI_JSON).project_dir == GEMINI_JSON.parts[3]
    # The project is the folder under the tool's own `tmp`, not under another `tmp` higher up.
    assert describe_layout("/tmp/backup/.qwen/tmp/abc/chats/session-1.json").project_dir == "abc"
    assert describe_layout("/tmp/backup/.gemini/tmp/my-app/chats/session-1.json").project_dir == "my-app"
    assert is_log_name(DATA / GEMINI_JSON) and is_log_name(DATA / QWEN_JSON)
    assert not is_log_name("/home/u/.gemini/tmp/p/logs.json")  # the prompt log, not a chat
    assert not is_log_name("/home/u/.gemini/settings.json")
    assert not is_log_name("/home/u/.claude/projects/p/agent-1.meta.json")
    assert not is_log_name("/home/u/.gemini/tmp/p/chats/session-x.jsonl.unreadable-1747000000000")


# -- input that is not a log ----------------------------------------------------------------------------------


def test_a_document_being_rewritten_is_left_for_its_next_change(tmp_path):
    path = copy_to(GEMINI_JSON, tmp_path, upto=2000)  # cut mid-write
    result = parse_file(path)
    assert result.messages == [] and [issue.level for issue in result.issues] == ["warning"]
    assert "read again at the next import" in result.issues[0].message and result.tool is None


def dicts_in(value) -> list[dict]:
    """Every JSON object inside a value (itself included), at any depth."""
    if isinstance(value, dict):
        return [value, *(found for item in value.values() for found in dicts_in(item))]
    if isinstance(value, list):
        return [found for item in value for found in dicts_in(item)]
    return []


@pytest.mark.parametrize("relative", SAMPLES, ids=lambda p: p.name[:16])
def test_fuzz_truncations_garbage_and_mutations_never_raise(relative, tmp_path):
    rng = random.Random(f"gemini-{relative.name}")
    data = (DATA / relative).read_bytes()
    document = relative.name.endswith(".json")
    values = [None, 0, -1, 2**70, 1.5e300, "", "x", [], {}, [1, "a"], {"a": None}, True]
    for attempt in range(60):
        target = tmp_path / relative.parent.name / f"{attempt}-{relative.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shape = attempt % 3
        if shape == 0:  # truncated anywhere
            mutated = data[: rng.randrange(len(data))]
        elif shape == 1:  # garbage bytes spliced in
            at = rng.randrange(len(data))
            mutated = data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) + data[at:]
        else:  # a valid JSON value replaced by another type
            records = [json.loads(data)] if document else jsonl_records(DATA / relative)
            for _ in range(5):
                victim = rng.choice([found for found in dicts_in(records) if found])
                victim[rng.choice(list(victim))] = copy.deepcopy(rng.choice(values))
            text = json.dumps(records[0]) if document else "".join(json.dumps(r) + "\n" for r in records)
            mutated = text.encode()
        target.write_bytes(mutated)
        for tool in (None, "gemini-cli", "qwen-code"):
            result = parse_file(target, tool=tool)
            for item in result.ingest_items():
                json.dumps(item, ensure_ascii=False, default=str)
