"""The agent-log parsers: exact counts per docs/accounting.md, incremental reads, bad input, detection.

Pure parsing: no database. The importers' samples (tests/agent_logs.py) reproduce the tools' real record shapes.
"""

import json
import shutil
from pathlib import Path

import pytest

from ingest_app.importers import (
    ParsedMessage,
    describe_layout,
    detect_tool,
    explain_detection,
    parse_file,
)
from ingest_app.importers.base import as_int
from ingest_app.importers.openclaw.parser import feishu_context, parse_inbound_metadata
from ingest_app.importers.qwen_code.parser import normalise_usage
from sessions_app.accounting import count_usage
from sessions_app.api.serializers import MessageInSerializer
from sessions_app.schema import TOKEN_FIELDS
from sessions_app.services.messages import AMENDED_FIELDS
from tests.support.agent_logs import DATA, copy_log

CLAUDE_SESSION = "5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11"
CLAUDE_DIR = Path("claude_code/.claude/projects/-home-dev-weather")
CLAUDE = CLAUDE_DIR / f"{CLAUDE_SESSION}.jsonl"
CLAUDE_AGENT = CLAUDE_DIR / CLAUDE_SESSION / "subagents" / "agent-a1b2c3d.jsonl"
CLAUDE_STREAMING = CLAUDE_DIR / "6a1d3b8f-2c45-4e9a-8f7b-0d1e2f3a4b5c.jsonl"
QWEN = Path("qwen_code/.qwen/projects/-home-dev-weather/chats/8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12.jsonl")
OPENCLAW = Path("openclaw/.openclaw/agents/main/sessions/0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36.jsonl")
SEED = Path("seed/weather-openclaw.jsonl")
FEISHU_CHAT = "oc_84f2a1c9d3e5b7a6f0c2d4e6a8b0c1d2"


def by_role(messages):
    return [(m.line, m.role, m.metadata.get("kind")) for m in messages]


def line_start(path: Path, line: int) -> int:
    """Byte offset where 1-based `line` starts."""
    data = path.read_bytes()
    offset = 0
    for _ in range(line - 1):
        offset = data.index(b"\n", offset) + 1
    return offset


# -- Claude Code --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude():
    return parse_file(DATA / CLAUDE)


def test_claude_code_counts_requests_messages_conversations_and_tokens_exactly(claude):
    assert claude.tool == "claude-code"
    assert count_usage(claude.messages) == {
        "requests": 7,  # one per API response (message.id), the sidechain's included, and the failed call (529)
        "conversations": 3,  # 查看天气, 明天呢？, 谢谢
        "messages": 19,
        "message_user": 3,
        "message_assistant": 6,
        "message_toolresult": 2,
        "message_error": 1,
        "message_system": 7,
        "input_tokens": 100 + 120 + 150 + 50 + 160 + 30,
        "output_tokens": 61 + 15 + 40 + 10 + 12 + 4,
        "cache_read_tokens": 5000 + 5200 + 5300 + 0 + 5400 + 5500,
        "cache_creation_tokens": 200,
        "cache_creation_5m_tokens": 200,  # these lines predate usage.cache_creation: 5-minute writes
        "cache_creation_1h_tokens": 0,
        "total_tokens": 610 + 142,
    }
    assert by_role(claude.messages) == [
        (3, "system", "meta"),
        (4, "system", "command"),
        (5, "system", "command_output"),
        (6, "user", "prompt"),
        (7, "assistant", "response"),
        (10, "toolResult", "tool_result"),
        (11, "assistant", "response"),
        (13, "user", "prompt"),
        (15, "assistant", "response"),
        (16, "system", "subagent_prompt"),
        (17, "assistant", "response"),
        (18, "toolResult", "tool_result"),
        (19, "assistant", "response"),
        (21, "error", "api_error"),
        (22, "system", "compact_boundary"),
        (23, "system", "compact_summary"),
        (24, "system", "interrupt"),
        (25, "user", "prompt"),
        (26, "assistant", "response"),
    ]


def test_a_streamed_response_is_one_message_with_the_tokens_of_its_most_complete_line(claude):
    first = next(m for m in claude.messages if m.line == 7)
    assert first.request_id == "msg_01WeatherA" and first.metadata["api_request_id"] == "req_011CTgWeatherA"
    assert first.metadata["lines"] == [7, 9] and first.metadata["usage_line"] == 9
    assert first.thinking == "The user wants today's weather; fetch a forecast."
    assert first.content == "让我查一下..."
    assert first.tool_calls == [
        {
            "id": "toolu_01Fetch",
            "name": "WebFetch",
            "arguments": {"url": "https://weather.example/hangzhou", "prompt": "today"},
        }
    ]
    # 61 (the last line), never 8 (the first) nor 8 + 25 + 61.
    assert (first.input_tokens, first.output_tokens, first.cache_read_tokens, first.cache_creation_tokens) == (
        100,
        61,
        5000,
        200,
    )
    assert first.total_tokens == 161 and first.finish_reason == "tool_use"
    assert first.external_id == "c0de0007-0000-4000-8000-000000000007"  # the entry uuid of its first line
    assert first.model == "claude-sonnet-4-5-20250929"

    two_lines = next(m for m in claude.messages if m.line == 19)
    assert two_lines.content == "明天有雨。\n\n记得带伞。" and two_lines.output_tokens == 12


def test_tool_results_are_tool_results_named_after_their_tool_use(claude):
    results = [m for m in claude.messages if m.role == "toolResult"]
    assert [(m.tool_name, m.content) for m in results] == [("WebFetch", "晴 25°C"), ("Task", "Tomorrow: rain.")]
    assert results[1].metadata["spawned_agent_id"] == "a1b2c3d"
    assert all(m.request_id is None and m.input_tokens is None for m in results)


def test_only_real_prompts_start_conversations(claude):
    prompts = [m for m in claude.messages if m.role == "user"]
    assert [m.content for m in prompts] == ["查看天气 in Hangzhou", "明天呢？\ufffd", "谢谢"]
    refs = [m.conversation for m in prompts]
    assert refs == [f"claude-code:c0de00{n:02d}-0000-4000-8000-0000000000{n:02d}" for n in (6, 13, 25)]
    # Meta and command lines before the first prompt belong to no conversation; everything after a prompt
    # belongs to it until the next prompt (tool results, errors, compaction and interrupts included).
    assert [m.conversation for m in claude.messages[:3]] == [None, None, None]
    assert {m.conversation for m in claude.messages if 6 <= m.line < 13} == {refs[0]}
    assert {m.conversation for m in claude.messages if 13 <= m.line < 25} == {refs[1]}
    assert {m.conversation for m in claude.messages if m.line >= 25} == {refs[2]}


def test_sidechain_work_is_flagged_and_stays_in_the_parent_session(claude):
    side = [m for m in claude.messages if m.is_sidechain]
    assert [(m.line, m.role) for m in side] == [(16, "system"), (17, "assistant")]
    assert all(m.metadata["sidechain"] and m.metadata["agent_id"] == "9d8e7f6" for m in side)
    assert side[1].to_ingest()["metadata"]["sidechain"] is True


def test_a_failed_call_is_an_error_that_is_a_request_of_the_model_called(claude):
    # The overloaded call's line names the model `<synthetic>`: the request is the model the session was calling.
    (error,) = [m for m in claude.messages if m.role == "error"]
    assert error.content.startswith("API Error: 529 Overloaded")
    assert (error.request_id, error.model, error.auth_type) == ("c0dee21", "claude-sonnet-4-5-20250929", None)
    assert (error.input_tokens, error.output_tokens, error.total_tokens) == (0, 0, 0)  # the line's zero usage
    assert error.metadata["status"] == 529 and error.metadata["error"] == "server_error"


def test_claude_code_reports_bad_lines_with_their_numbers_and_keeps_going(claude):
    assert [(i.line, i.level) for i in claude.issues] == [(13, "warning"), (14, "error"), (27, "warning")]
    assert "not UTF-8" in claude.issues[0].message
    assert "not valid JSON" in claude.issues[1].message
    assert "incomplete" in claude.issues[2].message
    path = DATA / CLAUDE
    assert claude.end_offset == line_start(path, 27)  # the half-written line 27 is left for the next import
    assert claude.lines_read == 26 and claude.pending == 0


def test_lines_the_fast_json_reader_refuses_are_read_as_json_reads_them(tmp_path):
    # orjson reads nearly every line; NaN, lone surrogates and a byte order mark it refuses, and the parser
    # then reads them as Python's json does. An integer over 64 bits orjson reads as a float: harmless in a
    # field we do not count, and refused as a token count. Half a character (a lone UTF-16 surrogate, what
    # a tool writes when it cuts a string inside an emoji) cannot be stored as UTF-8: it becomes U+FFFD.
    lines = (DATA / CLAUDE).read_bytes().splitlines(keepends=True)
    user = next(i for i, line in enumerate(lines) if "查看天气".encode() in line)  # a real prompt
    entry = json.loads(lines[user])
    odd = [
        json.dumps({**entry, "uuid": "odd-1", "costUSD": float("nan")}),
        json.dumps({**entry, "uuid": "odd-2", "counter": 2**70}),
        json.dumps({**entry, "uuid": "odd-3", "message": {"role": "user", "content": "broken emoji \ud83d"}}),
        "\ufeff" + json.dumps({**entry, "uuid": "odd-4", "message": {"role": "user", "content": "after a BOM"}}),
    ]
    path = tmp_path / ".claude" / "projects" / "-home-dev-weather" / f"{CLAUDE_SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b"".join(lines[: user + 1]) + "".join(line + "\n" for line in odd).encode("utf-8", "surrogatepass")
    )

    parsed = parse_file(path)
    contents = [m.content for m in parsed.messages if m.role == "user"]
    assert contents[-2:] == ["broken emoji \ufffd", "after a BOM"]
    assert contents.count(contents[0]) == 3  # the original prompt, then the NaN and the 2**70 copies
    assert not [issue for issue in parsed.issues if issue.level == "error"]
    (surrogate,) = [issue for issue in parsed.issues if "cut in half" in issue.message]
    assert (surrogate.line, surrogate.level) == (user + 4, "warning")


def test_a_token_count_no_tokenizer_could_produce_is_not_counted():
    assert as_int(2**70) is None and as_int(float(2**70)) is None and as_int(str(2**70)) is None
    assert as_int(2**53) == 2**53 and as_int("1200") == 1200 and as_int(-5) == 0 and as_int(12.0) == 12


def test_claude_code_session(claude):
    session = claude.session
    assert (session.tool, session.agent_session_id, session.cwd, session.project) == (
        "claude-code",
        CLAUDE_SESSION,
        "/home/dev/weather",
        "weather",
    )
    assert (session.git_branch, session.version, session.is_subagent) == ("main", "2.0.14", False)
    assert session.metadata["summary"] == "Weather lookup for Hangzhou"
    assert session.metadata["project_dir"] == "-home-dev-weather"
    assert session.started_at.isoformat() == "2025-10-02T08:00:01+00:00"
    assert session.ended_at.isoformat() == "2025-10-02T08:04:02+00:00"


def test_a_subagent_file_is_attributed_to_its_parent_session_and_flagged():
    result = parse_file(DATA / CLAUDE_AGENT)
    session = result.session
    assert (session.agent_session_id, session.parent_agent_session_id, session.is_subagent) == (
        "agent-a1b2c3d",
        CLAUDE_SESSION,
        True,
    )
    assert session.attributed_session_id == CLAUDE_SESSION
    assert session.metadata["agent_meta"] == {
        "agentType": "general-purpose",
        "description": "Forecast",
        "toolUseId": "toolu_02Task",
    }
    assert by_role(result.messages) == [
        (1, "system", "subagent_prompt"),  # the parent agent's prompt is not a user prompt
        (2, "assistant", "response"),
        (3, "toolResult", "tool_result"),
        (4, "assistant", "response"),
    ]
    assert all(m.is_subagent and m.to_ingest()["metadata"]["subagent"] for m in result.messages)
    counts = count_usage(result.messages)
    assert (counts["requests"], counts["conversations"], counts["input_tokens"], counts["output_tokens"]) == (
        2,
        0,
        100,
        29,
    )
    assert result.messages[2].tool_name == "WebSearch"


def test_a_subagent_file_joins_the_parent_conversation_named_in_a_seeded_carry(claude):
    spawner = next(m for m in claude.messages if m.metadata.get("spawned_agent_id") == "a1b2c3d")
    result = parse_file(DATA / CLAUDE_AGENT, carry={"conversation": spawner.conversation})
    assert {m.conversation for m in result.messages} == {spawner.conversation}


def test_a_response_still_streaming_is_emitted_at_once_and_stays_open_in_the_carry(tmp_path):
    path = copy_log(CLAUDE, tmp_path, upto=line_start(DATA / CLAUDE, 21))  # ends after line 20
    waiting = parse_file(path)
    # Open: the sidechain's answer (complete, its agent may still write) and msg_05, still streaming.
    assert list(waiting.carry["open"]) == ["msg_04Side", "msg_05Answer"] and waiting.pending == 1
    assert waiting.carry["open"]["msg_05Answer"]["emitted_line"] == 20
    (answer,) = [m for m in waiting.messages if m.line == 19]  # stored now, as far as it is written
    assert (answer.content, answer.output_tokens) == ("明天有雨。\n\n记得带伞。", 12)
    assert waiting.end_offset == path.stat().st_size  # its lines are consumed: they live in the carry

    # The file goes idle: the response closes as it was emitted, so nothing is emitted again.
    closed = parse_file(path, start_offset=waiting.end_offset, carry=json.loads(json.dumps(waiting.carry)), flush=True)
    assert closed.pending == 0 and closed.carry["open"] == {} and closed.messages == []
    flushed = parse_file(path, flush=True)
    assert flushed.pending == 0 and flushed.ingest_items() == waiting.ingest_items()


# -- incremental parsing ------------------------------------------------------------------------------


def cut_points(data: bytes) -> list[int]:
    """Every line boundary, the middle of every line, and just before every newline (a complete JSON line
    whose newline has not been written yet)."""
    points, start = {0, len(data)}, 0
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            break
        points.update({start, (start + end) // 2, end, end + 1})
        start = end + 1
    return sorted(points)


def parse_in_two_steps(relative: Path, tmp_path: Path, cut: int):
    data = (DATA / relative).read_bytes()
    path = copy_log(relative, tmp_path, upto=cut)
    first = parse_file(path)
    with path.open("ab") as handle:
        handle.write(data[cut:])
    json.dumps(first.carry)  # the carry must be storable as JSON
    second = parse_file(path, start_offset=first.end_offset, carry=json.loads(json.dumps(first.carry)))
    return first, second


ALL_LOGS = [CLAUDE, CLAUDE_AGENT, CLAUDE_STREAMING, QWEN, OPENCLAW, SEED]


def as_stored(items: list[dict]) -> list[dict]:
    """The messages as an import stores these ingest items (`messages_append_to_sessions(amend=True)`): one
    per external id, in the place of its first version; a later version replaces the text fields and grows
    each token field to the larger value."""
    stored: dict[str, dict] = {}
    for item in items:
        first = stored.get(item["external_id"])
        if first is None:
            stored[item["external_id"]] = dict(item)
            continue
        for name in AMENDED_FIELDS:
            first.pop(name, None)
            if name in item:
                first[name] = item[name]
        for name in TOKEN_FIELDS:
            values = [value for value in (first.get(name), item.get(name)) if value is not None]
            if values:
                first[name] = max(values)
    return list(stored.values())


def normalised(items: list[dict]) -> list[dict]:
    return [dict(sorted(item.items())) for item in items]


@pytest.mark.parametrize("relative", ALL_LOGS, ids=lambda p: p.stem[:8])
def test_parsing_in_two_steps_gives_exactly_what_one_pass_gives(relative, tmp_path):
    data = (DATA / relative).read_bytes()
    whole = parse_file(copy_log(relative, tmp_path / "whole"))
    expected = whole.ingest_items()
    for cut in cut_points(data):
        first, second = parse_in_two_steps(relative, tmp_path / str(cut), cut)
        got = as_stored(first.ingest_items() + second.ingest_items())
        assert normalised(got) == normalised(expected), f"cut at byte {cut}"
        assert second.end_offset == whole.end_offset, f"cut at byte {cut}"
        assert count_usage(got) == count_usage(whole.messages)
        assert second.session.to_carry() == whole.session.to_carry(), f"cut at byte {cut}"
        errors = sorted((i.line, i.message) for i in first.errors + second.errors)
        assert errors == sorted((i.line, i.message) for i in whole.errors), f"cut at byte {cut}"


@pytest.mark.parametrize("relative", ALL_LOGS, ids=lambda p: p.stem[:8])
@pytest.mark.parametrize("budget", [1, 700, 3000])
def test_reading_in_chunks_of_a_byte_budget_gives_exactly_what_one_pass_gives(relative, budget, tmp_path):
    path = copy_log(relative, tmp_path)
    whole = parse_file(path)
    messages, offset, carry, chunks = [], 0, None, 0
    while True:
        chunk = parse_file(path, start_offset=offset, carry=carry, max_bytes=budget)
        messages += chunk.messages
        offset, carry, chunks = chunk.end_offset, json.loads(json.dumps(chunk.carry)), chunks + 1
        if chunk.complete:
            break
        assert chunk.lines_read >= 1
    assert normalised(as_stored([m.to_ingest() for m in messages])) == normalised(whole.ingest_items())
    assert offset == whole.end_offset and chunk.pending == whole.pending
    assert chunks > 1 or budget >= path.stat().st_size


def test_a_streamed_response_cut_in_the_middle_is_finished_from_the_carry(tmp_path):
    cut = line_start(DATA / CLAUDE, 9)  # lines 7 and 8 of msg_01 read, line 9 not yet written
    first, second = parse_in_two_steps(CLAUDE, tmp_path, cut)
    assert first.pending == 1 and first.carry["open"]["msg_01WeatherA"]["usage"]["output_tokens"] == 25
    partial = first.messages[-1]  # emitted as far as it is written
    assert (partial.line, partial.output_tokens, partial.finish_reason, partial.tool_calls) == (7, 25, None, None)
    (response,) = [m for m in second.messages if m.line == 7]  # the same message again, complete
    assert response.external_id == partial.external_id and response.request_id == partial.request_id
    assert (response.line, response.output_tokens, response.finish_reason) == (7, 61, "tool_use")
    assert response.thinking and response.content == "让我查一下..." and len(response.tool_calls) == 1


def test_tool_results_written_between_the_lines_of_one_response_keep_it_one_message(tmp_path):
    # Streaming tool execution: Hangzhou's result is written before the response's second tool_use line,
    # and newer Claude Code leaves requestId off some lines. Still one response, one request.
    result = parse_file(DATA / CLAUDE_STREAMING)
    assert [(m.line, m.role) for m in result.messages] == [
        (1, "user"),
        (2, "assistant"),
        (4, "toolResult"),
        (6, "toolResult"),
        (7, "assistant"),
    ]
    response = result.messages[1]
    assert (response.request_id, response.content, response.output_tokens) == ("msg_P1", "Checking both cities.", 77)
    assert [call["id"] for call in response.tool_calls] == ["toolu_H", "toolu_S"]
    assert response.metadata["lines"] == [2, 5] and response.metadata["api_request_id"] == "req_P1"
    assert [m.tool_name for m in result.messages if m.role == "toolResult"] == ["WebFetch", "WebFetch"]
    counts = count_usage(result.messages)
    assert (counts["requests"], counts["message_assistant"], counts["input_tokens"], counts["output_tokens"]) == (
        2,
        2,
        460,
        97,
    )

    # Cut after Hangzhou's result: the open response is emitted with its first tool call, the result behind
    # it too; the response stays open in the carry and is emitted again, whole, when it closes.
    first, second = parse_in_two_steps(CLAUDE_STREAMING, tmp_path, line_start(DATA / CLAUDE_STREAMING, 5))
    assert [m.line for m in first.messages] == [1, 2, 4] and first.pending == 1 and "outbox" not in first.carry
    assert [call["id"] for call in first.messages[1].tool_calls] == ["toolu_H"]
    assert [m.line for m in second.messages] == [6, 2, 7]
    assert [call["id"] for call in second.messages[1].tool_calls] == ["toolu_H", "toolu_S"]


def test_the_truncated_last_line_is_read_once_it_is_complete(tmp_path):
    path = copy_log(CLAUDE, tmp_path)
    first = parse_file(path)
    tail = path.read_bytes()[first.end_offset :]
    assert first.issues[-1].line == 27 and tail.startswith(b'{"parentUuid"') and not tail.endswith(b"\n")

    # Claude Code finishes writing line 27: the bytes already there stay, the rest is appended.
    line_27 = {
        "parentUuid": "c0de0026-0000-4000-8000-000000000026",
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/weather",
        "sessionId": CLAUDE_SESSION,
        "version": "2.0.14",
        "gitBranch": "main",
        "type": "user",
        "message": {"role": "user", "content": "再见，明天见"},
        "uuid": "c0de0027-0000-4000-8000-000000000027",
        "timestamp": "2025-10-02T08:05:00.000Z",
    }
    whole_line = json.dumps(line_27, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    assert whole_line.startswith(tail)
    with path.open("ab") as handle:
        handle.write(whole_line[len(tail) :])

    second = parse_file(path, start_offset=first.end_offset, carry=first.carry)
    assert [(m.line, m.role, m.content) for m in second.messages] == [(27, "user", "再见，明天见")]
    assert second.issues == [] and second.lines_read == 1
    assert second.messages[0].conversation == "claude-code:c0de0027-0000-4000-8000-000000000027"
    again = parse_file(path, start_offset=second.end_offset, carry=second.carry)
    assert (again.messages, again.lines_read, again.end_offset) == ([], 0, second.end_offset)


def test_reparsing_the_same_bytes_gives_the_same_external_ids(tmp_path):
    one = [m.external_id for m in parse_file(DATA / CLAUDE).messages]
    two = [m.external_id for m in parse_file(copy_log(CLAUDE, tmp_path)).messages]
    assert one == two and len(set(one)) == len(one)
    for relative in (QWEN, OPENCLAW, SEED, CLAUDE_AGENT, CLAUDE_STREAMING):
        ids = [m.external_id for m in parse_file(DATA / relative).messages]
        assert len(set(ids)) == len(ids)


# -- Qwen Code ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen():
    return parse_file(DATA / QWEN)


def test_qwen_code_counts_exactly(qwen):
    assert qwen.tool == "qwen-code"
    assert count_usage(qwen.messages) == {
        "requests": 5,  # one per assistant record and the failed call (its api_error); telemetry makes none
        "conversations": 2,
        "messages": 12,
        "message_user": 3,
        "message_assistant": 4,
        "message_toolresult": 1,
        "message_error": 1,
        "message_system": 3,
        "input_tokens": 200 + 200 + 1400 + 500,
        "output_tokens": 40 + 12 + 20 + 9,
        "cache_read_tokens": 1000 + 1100,
        "cache_creation_tokens": 0,
        "cache_creation_5m_tokens": 0,
        "cache_creation_1h_tokens": 0,
        "total_tokens": 240 + 212 + 1420 + 509,
    }
    assert by_role(qwen.messages) == [
        (1, "user", "prompt"),
        (3, "assistant", "response"),
        (5, "toolResult", "tool_result"),
        (7, "assistant", "response"),
        (8, "system", "command"),
        (10, "user", "prompt"),
        (11, "error", "api_error"),
        (14, "assistant", "response"),
        (15, "system", "compaction"),
        (16, "system", "notification"),
        (17, "user", "mid_turn"),
        (19, "assistant", "response"),
    ]
    assert [(i.line, i.level) for i in qwen.issues] == [(5, "warning"), (12, "error"), (20, "warning")]


def test_qwen_code_requests_take_auth_type_and_response_id_from_their_telemetry(qwen):
    first = next(m for m in qwen.messages if m.line == 3)
    assert (first.request_id, first.auth_type, first.model) == ("chatcmpl-resp1", "qwen-oauth", "qwen3-coder-plus")
    assert first.thinking == "Need the forecast first." and first.content == "让我查一下..."
    assert first.tool_calls == [
        {"id": "call_1", "name": "web_fetch", "arguments": {"url": "https://weather.example/hangzhou"}}
    ]
    # prompt 1200 includes 1000 cached; thoughts (10) are outside candidates (30) since 1200 + 30 + 10 == 1240.
    assert (first.input_tokens, first.output_tokens, first.cache_read_tokens, first.total_tokens) == (
        200,
        40,
        1000,
        240,
    )
    third = next(m for m in qwen.messages if m.line == 14)
    # OpenAI-compatible usage: reasoning already inside completion tokens (1400 + 20 == 1420).
    assert (third.input_tokens, third.output_tokens, third.total_tokens) == (1400, 20, 1420)
    sidechain = next(m for m in qwen.messages if m.line == 19)
    assert sidechain.is_sidechain and sidechain.request_id == "9e110019-0000-4000-8000-000000000019"
    assert sidechain.metadata["agent_id"] == "explore-7f3c"


def test_qwen_code_tool_results_errors_and_rounds(qwen):
    (result,) = [m for m in qwen.messages if m.role == "toolResult"]
    assert (result.tool_name, result.content) == ("web_fetch", "晴 25°C\ufffd")
    (error,) = [m for m in qwen.messages if m.role == "error"]
    assert error.content == "Request failed with status 429" and error.request_id.startswith("api_error:")
    assert (error.auth_type, error.model, error.input_tokens) == ("qwen-oauth", "qwen3-coder-plus", None)
    assert error.metadata["status"] == 429 and error.metadata["auth_type"] == "qwen-oauth"
    second_round = {m.conversation for m in qwen.messages if m.line >= 10}
    assert second_round == {"qwen-code:9e110010-0000-4000-8000-000000000010"}  # mid-turn text joins the round
    assert qwen.session.agent_session_id == "8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12"
    assert qwen.session.metadata["project_dir"] == "-home-dev-weather"


def test_qwen_code_usage_normalisation():
    assert normalise_usage({"promptTokenCount": 10, "candidatesTokenCount": 5}) == {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_tokens": None,
        "total_tokens": 15,
    }
    assert normalise_usage({"cachedContentTokenCount": 3}) == {
        "input_tokens": None,
        "output_tokens": None,
        "cache_read_tokens": 3,
        "total_tokens": None,
    }


def test_older_gemini_style_qwen_records(tmp_path):
    path = tmp_path / ".qwen" / "tmp" / "abc" / "chats" / "session-1.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        {"id": "1", "type": "user", "sessionId": "s-old", "timestamp": "2025-08-01T00:00:00Z", "content": "hi"},
        {
            "id": "2",
            "type": "gemini",
            "timestamp": "2025-08-01T00:00:02Z",
            "content": "hello",
            "model": "qwen3-coder-plus",
            "tokens": {"input": 50, "output": 5, "cached": 20, "thoughts": 0, "tool": 0, "total": 55},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = parse_file(path)
    assert [(m.role, m.content) for m in result.messages] == [("user", "hi"), ("assistant", "hello")]
    assert (result.messages[1].input_tokens, result.messages[1].cache_read_tokens) == (30, 20)
    assert result.messages[1].request_id == "session-1:2"  # no uuid: the file-relative line id


# -- OpenClaw -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def openclaw():
    return parse_file(DATA / OPENCLAW)


def test_openclaw_counts_exactly(openclaw):
    assert openclaw.tool == "openclaw"
    assert count_usage(openclaw.messages) == {
        "requests": 4,  # three responses and the call that failed with a 429
        "conversations": 2,
        "messages": 9,
        "message_user": 2,
        "message_assistant": 3,
        "message_toolresult": 1,
        "message_error": 1,
        "message_system": 2,
        "input_tokens": 2000 + 2100 + 300,
        "output_tokens": 50 + 20 + 30,
        "cache_read_tokens": 8000 + 8500,
        "cache_creation_tokens": 500 + 9000,
        "cache_creation_5m_tokens": 500 + 9000,  # OpenClaw says no lifetime
        "cache_creation_1h_tokens": 0,
        "total_tokens": 2050 + 2120 + 330,  # input + output; OpenClaw's totalTokens (cache included) is in metadata
    }
    assert by_role(openclaw.messages) == [
        (4, "user", "prompt"),
        (5, "assistant", "response"),
        (6, "toolResult", "tool_result"),
        (7, "assistant", "response"),
        (10, "user", "prompt"),
        (11, "error", "api_error"),
        (12, "assistant", "response"),
        (13, "system", "compaction"),
        (14, "system", "shell"),
    ]
    assert [(i.line, i.level) for i in openclaw.issues] == [(6, "warning"), (8, "error"), (15, "warning")]
    first = openclaw.messages[1]
    assert first.metadata["usage"]["totalTokens"] == 10550 and first.metadata["usage"]["cost"]["total"] == 0.0042


def test_openclaw_feishu_messages_carry_the_feishu_conversation_id(openclaw):
    prompts = [m for m in openclaw.messages if m.role == "user"]
    assert [m.feishu_conversation_id for m in prompts] == [FEISHU_CHAT, FEISHU_CHAT]
    assert [m.metadata["body"] for m in prompts] == ["查看天气", "明天呢？"]
    assert prompts[0].metadata["feishu"] == {
        "chat_type": "group",
        "conversation_id": FEISHU_CHAT,
        "chat_id": FEISHU_CHAT,
        "sender_id": "ou_5e1c9b3d7f2a4c6e8b0d2f4a6c8e0b1d",
        "sender": "张三",
        "message_id": "om_x100b53d7ec74f8a8c328d320d2d8d6b",
    }
    assert prompts[0].content.startswith("Conversation info (untrusted metadata):")  # the text as the model saw it
    assert openclaw.session.user == "ou_5e1c9b3d7f2a4c6e8b0d2f4a6c8e0b1d"
    assert prompts[0].to_ingest()["feishu_conversation_id"] == FEISHU_CHAT


def test_openclaw_models_errors_and_session(openclaw):
    models = [(m.line, m.model) for m in openclaw.messages if m.role in ("assistant", "error")]
    assert models == [(5, "qwen3-max"), (7, "qwen3-max"), (11, "claude-sonnet-4-5"), (12, "claude-sonnet-4-5")]
    error = next(m for m in openclaw.messages if m.role == "error")
    assert error.request_id == "a0000010" and "rate_limit_error" in error.content  # a failed call: a request
    assert (error.input_tokens, error.output_tokens, error.finish_reason) == (0, 0, "error")
    assert openclaw.messages[2].tool_name == "web_fetch"
    session = openclaw.session
    assert (session.agent_session_id, session.cwd, session.version) == (
        "0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36",
        "/home/dev/.openclaw/workspace",
        "3",
    )
    assert session.metadata["models"] == ["qwen3-max", "claude-sonnet-4-5"] and session.metadata["agent"] == "main"


def test_openclaw_header_read_earlier_comes_back_from_the_carry(tmp_path):
    cut = line_start(DATA / OPENCLAW, 10)
    first, second = parse_in_two_steps(OPENCLAW, tmp_path, cut)
    assert "0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36" in second.messages[0].conversation
    assert second.session.agent_session_id == "0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36"
    assert second.messages[2].model == "claude-sonnet-4-5"  # from the model_change read in the first call


def test_feishu_direct_chat_metadata():
    text = (
        "Conversation info (untrusted metadata):\n```json\n"
        '{\n  "message_id": "om_x100b53d7ec74f8a8c328d320d2d8d6b",\n  "sender_id": "ou_0e015152c8b8",\n'
        '  "sender": "ou_0e015152c8b8",\n  "timestamp": "Thu 2026-04-02 17:43 GMT+8"\n}\n```\n\n'
        "Sender (untrusted metadata):\n```json\n"
        '{\n  "label": "ou_0e015152c8b8",\n  "id": "ou_0e015152c8b8",\n  "name": "ou_0e015152c8b8"\n}\n```\n\n'
        "[message_id: om_x100b53d7ec74f8a8c328d320d2d8d6b]\nou_0e015152c8b8: 在干嘛呢？"
    )
    meta = parse_inbound_metadata(text)
    assert meta["body"] == "在干嘛呢？"
    context = feishu_context(meta)
    assert (context["chat_type"], context["conversation_id"], context["message_id"]) == (
        "direct",
        "ou_0e015152c8b8",
        "om_x100b53d7ec74f8a8c328d320d2d8d6b",
    )
    envelope = parse_inbound_metadata("[Feishu oc_abc123:ou_def456 +2m Thu 2026-01-01 10:00 GMT+8] 你好")
    assert feishu_context(envelope)["conversation_id"] == "oc_abc123" and envelope["body"] == "你好"
    telegram = parse_inbound_metadata(
        'Conversation info (untrusted metadata):\n```json\n{"message_id": "4542", "sender_id": "5003590611"}\n```\n\nhi'
    )
    assert feishu_context(telegram) is None and telegram["body"] == "hi"


# -- the seed's worked example --------------------------------------------------------------------------


def test_the_seeds_weather_example_logged_by_openclaw():
    result = parse_file(DATA / SEED)
    counts = count_usage(result.messages)
    assert (counts["messages"], counts["message_user"], counts["message_assistant"], counts["message_toolresult"]) == (
        6,
        2,
        3,
        1,
    )
    assert counts["conversations"] == 2
    # Three LLM calls are logged (each assistant message is one); the seed's diagram counts a fourth for
    # the tool result. See docs/accounting.md, "The worked example".
    assert counts["requests"] == 3
    assert (counts["input_tokens"], counts["output_tokens"], counts["total_tokens"]) == (360, 36, 396)
    first, second = sorted({m.conversation for m in result.messages}, key=lambda ref: ref[-1])
    assert [m.role for m in result.messages if m.conversation == first] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert [m.role for m in result.messages if m.conversation == second] == ["user", "assistant"]


# -- what goes to the ingest ----------------------------------------------------------------------------


@pytest.mark.parametrize("relative", ALL_LOGS, ids=lambda p: p.stem[:8])
def test_every_message_is_a_valid_messages_api_item(relative):
    for item in parse_file(DATA / relative).ingest_items():
        serializer = MessageInSerializer(data=item)
        assert serializer.is_valid(), (item, serializer.errors)
        assert isinstance(item["metadata"]["line"], int)
        json.dumps(item, ensure_ascii=False)


def test_count_usage_follows_the_ingest_rules():
    lines = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "request_id": "r1", "input_tokens": 10, "output_tokens": 1},
        {"role": "assistant", "content": "b", "request_id": "r1", "input_tokens": 10, "output_tokens": 7},
        {"role": "toolResult", "content": "t", "auth_type": "oauth"},
        {"role": "assistant", "content": "c", "input_tokens": 5, "output_tokens": 5, "total_tokens": 99},
        {"role": "user", "content": "q2", "conversation": "mine"},
        {"role": "system", "content": "s", "conversation": "mine", "external_id": "x"},
        {"role": "system", "content": "s", "conversation": "mine", "external_id": "x"},
    ]
    counts = count_usage(lines)
    assert (counts["requests"], counts["conversations"], counts["messages"], counts["message_system"]) == (2, 2, 7, 1)
    assert (counts["input_tokens"], counts["output_tokens"], counts["total_tokens"]) == (15, 12, 17 + 99)


def test_text_that_postgres_cannot_store_is_cleaned():
    # Text columns here; JSON fields where they are stored (test_imports: text no database can hold).
    message = ParsedMessage(role="user", content="a\x00b", external_id="e\x00", line=1, model="m\x00")
    item = message.to_ingest()
    assert (item["content"], item["external_id"], item["model"]) == ("a\ufffdb", "e\ufffd", "m\ufffd")


# -- detection and input that is not a log --------------------------------------------------------------


def test_detection_by_path():
    assert detect_tool(DATA / CLAUDE, []) == "claude-code"
    assert detect_tool(DATA / CLAUDE_AGENT, []) == "claude-code"
    assert detect_tool(DATA / QWEN, []) == "qwen-code"
    assert detect_tool(DATA / OPENCLAW, []) == "openclaw"
    layout = describe_layout(DATA / CLAUDE_AGENT)
    assert (layout.is_subagent, layout.parent_session_id, layout.agent_id) == (True, CLAUDE_SESSION, "a1b2c3d")
    assert describe_layout("/home/u/.clawdbot/agents/main/sessions/x.jsonl").tool == "openclaw"
    assert describe_layout("/home/u/.qwen/projects/p/subagents/s1/agent-x.jsonl").parent_session_id == "s1"


@pytest.mark.parametrize(
    ("relative", "tool"), [(CLAUDE, "claude-code"), (QWEN, "qwen-code"), (OPENCLAW, "openclaw"), (SEED, "openclaw")]
)
def test_detection_by_content_when_the_path_says_nothing(relative, tool, tmp_path):
    path = tmp_path / "exported.jsonl"
    shutil.copy(DATA / relative, path)
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()[:25]
    detection = explain_detection(path, lines)
    assert detection.tool == tool, detection.reason
    assert parse_file(path).messages == parse_file(path, tool=tool).messages
    assert len(parse_file(path).messages) == len(parse_file(DATA / relative).messages)


def test_garbage_gives_no_messages_and_says_why():
    result = parse_file(DATA / "unknown" / "garbage.jsonl")
    assert (result.messages, result.session, result.tool, result.end_offset) == ([], None, None, 0)
    (issue,) = result.issues
    assert issue.level == "error" and issue.line == 0
    assert issue.message.startswith("not a recognised agent log: none of the first")
    assert "JSON object" in issue.message


def test_json_of_another_shape_gives_no_messages_and_says_why():
    result = parse_file(DATA / "unknown" / "other-tool.jsonl")
    assert result.messages == []
    assert "none has the shape of a record of Claude Code, Qwen Code, Gemini CLI" in result.issues[0].message
    assert detect_tool(DATA / "unknown" / "other-tool.jsonl", ['{"event": "x"}']) is None


def test_empty_files_and_bad_arguments(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = parse_file(empty)
    assert result.messages == [] and result.issues[0].level == "warning"
    assert "no complete line" in result.issues[0].message
    assert parse_file(empty, tool="aider").issues[0].message.startswith("unknown tool 'aider'")
    assert "cannot read" in parse_file(tmp_path / "missing.jsonl").issues[0].message
    beyond = parse_file(DATA / SEED, start_offset=10**9)
    assert beyond.messages == [] and "beyond the end of the file" in beyond.issues[0].message


def test_reader_edge_cases(tmp_path):
    path = tmp_path / "edge.jsonl"
    header = {"type": "session", "version": 3, "id": "s-edge", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/w"}
    prompt = {
        "type": "message",
        "id": "m1",
        "timestamp": "2025-01-01T00:00:01Z",
        "message": {"role": "user", "content": "hi"},
    }
    path.write_bytes(
        b"\xef\xbb\xbf"  # a byte-order mark
        + json.dumps(header).encode()
        + b"\r\n\n   \n[1, 2]\n"
        + json.dumps(prompt).encode()  # complete JSON, newline not written yet
    )
    first = parse_file(path)
    assert [(m.line, m.content) for m in first.messages] == [(5, "hi")]
    assert [(i.line, i.level) for i in first.issues] == [(4, "error")]
    assert "not an object" in first.issues[0].message
    assert first.end_offset == path.stat().st_size and first.carry["line_open"] is True

    reply = {
        "type": "message",
        "id": "m2",
        "timestamp": "2025-01-01T00:00:02Z",
        "message": {"role": "assistant", "content": "yo"},
    }
    with path.open("ab") as handle:
        handle.write(b"\n" + json.dumps(reply).encode() + b"\n")
    second = parse_file(path, start_offset=first.end_offset, carry=first.carry)
    assert [(m.line, m.role) for m in second.messages] == [(6, "assistant")]  # line numbers do not shift
    assert second.session.agent_session_id == "s-edge"

    stale = parse_file(path, start_offset=second.end_offset, carry=first.carry)
    assert stale.issues[0].level == "warning" and "ignored" in stale.issues[0].message
    mid_line = parse_file(path, start_offset=3, tool="openclaw")
    assert any("not at a line start" in issue.message for issue in mid_line.issues)


def test_a_tool_folder_below_another_projects_or_agents_folder_names_the_right_project():
    """The project (Claude Code) and the agent (OpenClaw) are the folders below the tool's own home, not below
    the first `projects` / `agents` anywhere in the path (a backup kept in ~/projects/backup/…)."""
    claude = describe_layout("/home/u/projects/backup/.claude/projects/-home-u-app/5f0c2a9e.jsonl")
    assert (claude.tool, claude.project_dir) == ("claude-code", "-home-u-app")
    openclaw = describe_layout("/srv/agents/old/.openclaw/agents/main/sessions/0f3a.jsonl")
    assert (openclaw.tool, openclaw.project_dir) == ("openclaw", "main")


def test_claude_code_lines_stripped_of_their_ids_are_still_read_and_each_answer_is_a_call(tmp_path):
    """Seen in other parsers' fixtures (an exporter that keeps only type, timestamp, message and cwd): the
    lines are still recognised as Claude Code, and an assistant line without `message.id`, `requestId` or
    `uuid` is a call of its own (it was not synthetic, an error or a fork's copy)."""
    path = tmp_path / "exported.jsonl"
    lines = [
        {"type": "user", "timestamp": "2024-01-01T10:00:00Z", "message": {"content": "Fix the login bug"}},
        {
            "type": "assistant",
            "timestamp": "2024-01-01T10:00:05Z",
            "message": {"content": [{"type": "text", "text": "Looking."}, {"type": "tool_use", "id": "t1"}]},
        },
        {"type": "user", "timestamp": "2024-01-01T10:05:00Z", "message": {"content": "That looks right"}},
        {
            "type": "assistant",
            "timestamp": "2024-01-01T10:05:05Z",
            "message": {"content": [{"type": "text", "text": "Done."}]},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = parse_file(path, flush=True)
    assert result.tool == "claude-code"
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert count_usage([m.to_ingest() for m in result.messages])["requests"] == 2


def test_a_token_count_beyond_the_apis_bound_is_not_imported_as_one():
    """A log can say anything; the import stores what the API would take (schema.MAX_TOKENS), so no sum of
    imported counts can overflow either."""
    from ingest_app.importers.base import ParsedMessage

    message = ParsedMessage(
        role="assistant", content="x", external_id="e", line=1, input_tokens=10**12, output_tokens=10**9
    )
    item = message.to_ingest()
    assert "input_tokens" not in item and item["output_tokens"] == 10**9
