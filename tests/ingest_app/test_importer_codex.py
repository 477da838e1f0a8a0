"""The Codex CLI importer: rollouts become exact requests, messages and rounds, read in one pass or in pieces.

The samples in ingest_app/importers/codex/samples/ have the record shapes of real rollouts (Codex 0.46 wrapped lines,
the bare rollouts of spring 2025) and ccusage's Codex fixture as it is; see docs/accounting.md ("Codex CLI").
"""

import json
import random
import shutil
from pathlib import Path

import pytest

from ingest_app.importers import describe_layout, explain_detection, parse_file
from ingest_app.importers.codex.parser import call_usage, token_fields, usage_of
from ingest_app.importers.detect import shape_of
from ingest_app.pipeline import import_path
from sessions_app.accounting import count_usage
from sessions_app.api.serializers import MessageInSerializer
from sessions_app.models import Session
from sessions_app.selectors.recount import session_count_drift
from tests.ingest_app.test_importer_parsers import as_stored
from tests.support.agent_logs import DATA

SESSION = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
ROLLOUT = Path(f"codex/.codex/sessions/2025/10/29/rollout-2025-10-29T00-59-38-{SESSION}.jsonl")
BARE_SESSION = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
BARE = Path(f"codex/.codex/archived_sessions/rollout-2025-05-07T17-24-21-{BARE_SESSION}.jsonl")
CCUSAGE = Path("codex/ccusage-session-alpha.jsonl")
CODEX_LOGS = [ROLLOUT, BARE, CCUSAGE]


def by_line(messages):
    return [(m.line, m.role, m.metadata.get("kind")) for m in messages]


def copy(relative: Path, root: Path, data: bytes | None = None) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((DATA / relative).read_bytes() if data is None else data)
    return target


def rollout(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def line(at: str, kind: str, payload: dict) -> dict:
    return {"timestamp": f"2026-01-02T{at}Z", "type": kind, "payload": payload}


def usage(input_tokens, cached, output, reasoning=0) -> dict:
    return {
        "input_tokens": input_tokens,
        "cached_input_tokens": cached,
        "output_tokens": output,
        "reasoning_output_tokens": reasoning,
        "total_tokens": input_tokens + output,
    }


def token_count(at: str, last: dict | None, total: dict | None) -> dict:
    info = {key: value for key, value in (("last_token_usage", last), ("total_token_usage", total)) if value}
    return line(at, "event_msg", {"type": "token_count", "info": info or None})


# -- one rollout, counted exactly ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def codex():
    return parse_file(DATA / ROLLOUT)


def test_each_api_call_is_one_request_and_the_calls_add_up_to_codexs_own_session_total(codex):
    assert (codex.tool, codex.pending, codex.issues) == ("codex", 0, [])
    counts = count_usage(codex.messages)
    assert {key: counts[key] for key in ("requests", "conversations", "messages")} == {
        # 6 token_count calls + 1 call interrupted before its usage + 1 attempt whose stream broke (its
        # stream_error: a failed call, retried); the repeated event is none
        "requests": 8,
        "conversations": 4,
        "messages": 19,
    }
    assert (counts["message_user"], counts["message_assistant"], counts["message_toolresult"]) == (4, 7, 2)
    assert (counts["message_error"], counts["message_system"]) == (1, 5)
    # Codex's last total_token_usage: input 39,762 of which 30,720 cached, output 903 (192 of it reasoning).
    last_total = json.loads((DATA / ROLLOUT).read_text().splitlines()[-1])["payload"]["info"]["total_token_usage"]
    assert counts["input_tokens"] + counts["cache_read_tokens"] == last_total["input_tokens"] == 39762
    assert counts["cache_read_tokens"] == last_total["cached_input_tokens"] == 30720
    assert counts["output_tokens"] == last_total["output_tokens"] == 903
    assert (counts["input_tokens"], counts["total_tokens"]) == (9042, 9042 + 903)
    assert sum(m.metadata.get("reasoning_output_tokens", 0) for m in codex.messages) == 192


def test_a_calls_items_become_one_assistant_message_with_the_usage_of_its_token_count(codex):
    first = next(m for m in codex.messages if m.role == "assistant")
    assert (first.line, first.content, first.thinking) == (9, "", "**Listing files with shell**")
    assert first.tool_calls == [
        {
            "id": "call_AnMStssFtufeBXJJ9HuJQeb0",
            "name": "shell",
            "arguments": '{"command": ["bash", "-lc", "ls"], "workdir": "/home/dev/weather"}',
        }
    ]
    assert (first.input_tokens, first.cache_read_tokens, first.output_tokens, first.total_tokens) == (
        6040 - 4992,
        4992,
        129,
        6040 - 4992 + 129,
    )
    assert (first.model, first.request_id, first.metadata["usage_line"]) == ("gpt-5-codex", f"{SESSION}:call:1", 11)
    assert first.metadata["usage"]["reasoning_output_tokens"] == first.metadata["reasoning_output_tokens"] == 64
    # The same info written again at line 13 (a rate-limit update) made no call.
    assert [m.line for m in codex.messages if m.role == "assistant"] == [9, 15, 21, 25, 30, 38, 41]
    assert len({m.request_id for m in codex.messages if m.role == "assistant" and m.request_id}) == 7


def test_prompts_open_rounds_and_what_codex_wrote_itself_does_not(codex):
    assert by_line(codex.messages)[:6] == [
        (2, "system", "context"),  # <user_instructions>
        (3, "system", "context"),  # <environment_context>
        (4, "user", "prompt"),
        (9, "assistant", "response"),
        (12, "toolResult", "tool_result"),
        (15, "assistant", "response"),
    ]
    prompts = [m for m in codex.messages if m.role == "user"]
    assert [m.conversation for m in prompts] == [f"codex:{SESSION}:{n}" for n in (4, 17, 27, 34)]
    assert all(m.conversation is None for m in codex.messages if m.line < 4)
    results = [m for m in codex.messages if m.role == "toolResult"]
    assert [(m.tool_name, m.metadata["tool_call_id"]) for m in results] == [
        ("shell", "call_AnMStssFtufeBXJJ9HuJQeb0"),
        ("apply_patch", "call_fnIi6MnTDYfAHIKJsyUyzkvr"),
    ]


def test_what_codex_sends_besides_the_prompt_is_system_and_opens_no_round(tmp_path):
    def user(at, text, role="user"):
        return line(
            at, "response_item", {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}
        )

    path = rollout(
        tmp_path / "r.jsonl",
        [
            line("00:00:00", "session_meta", {"id": "s1", "cwd": "/w/p"}),
            user("00:00:00", "<permissions instructions>\nsandboxed\n</permissions instructions>", "developer"),
            user("00:00:00", "# AGENTS.md instructions for /w/p\n\n<INSTRUCTIONS>\nbe brief\n</INSTRUCTIONS>"),
            user("00:00:01", "<user_shell_command>\n<command>ls</command>\n</user_shell_command>"),
            line(
                "00:00:02",
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what is this?"},
                        {"type": "input_image", "image_url": "data:"},
                    ],
                },
            ),
            user("00:00:03", "<subagent_notification>\n{}\n</subagent_notification>"),
        ],
    )
    result = parse_file(path)
    assert by_line(result.messages) == [
        (2, "system", "instructions"),
        (3, "system", "context"),
        (4, "system", "shell"),
        (5, "user", "prompt"),
        (6, "system", "context"),
    ]
    assert result.messages[3].content == "what is this?\n[image]"
    assert count_usage(result.messages)["conversations"] == 1


def test_an_interrupted_call_an_error_and_a_compaction(codex):
    interrupted = next(m for m in codex.messages if m.line == 30)
    assert interrupted.metadata["usage_missing"] and interrupted.request_id == f"{SESSION}:call:5"
    assert interrupted.input_tokens is None and interrupted.tool_calls[0]["name"] == "shell"
    assert by_line(m for m in codex.messages if 30 < m.line < 42) == [
        (32, "system", "turn_aborted"),
        (33, "system", "context"),
        (34, "user", "prompt"),
        (37, "error", "stream_error"),
        (38, "assistant", "response"),
        (40, "system", "compaction"),
        (41, "assistant", "usage_only"),  # the compaction's call: usage, no output items
    ]
    # The attempt whose stream broke after the answer began (then retried: "retrying 1/5") was a call: a request
    # of the model, without tokens (Codex writes none for it).
    failed = next(m for m in codex.messages if m.line == 37)
    assert (failed.request_id, failed.model, failed.input_tokens) == (f"{SESSION}:failed:37", "gpt-5-codex", None)


def test_the_session_comes_from_session_meta_and_turn_context(codex):
    session = codex.session
    assert (session.agent_session_id, session.cwd, session.project) == (SESSION, "/home/dev/weather", "weather")
    assert (session.version, session.git_branch) == ("0.46.0", "main")
    assert session.metadata["models"] == ["gpt-5-codex"]
    assert (session.metadata["originator"], session.metadata["model_provider"]) == ("codex_cli_rs", "openai")


def test_a_bare_rollout_of_2025_has_calls_without_usage(tmp_path):
    result = parse_file(DATA / BARE)
    assert (result.tool, result.pending, result.session.agent_session_id) == ("codex", 1, BARE_SESSION)
    assert result.session.git_branch == "feature/forecast"
    flushed = parse_file(DATA / BARE, flush=True)
    assert by_line(flushed.messages) == [
        (3, "user", "prompt"),
        (5, "assistant", "response"),  # reasoning + function_call
        (8, "toolResult", "tool_result"),
        (9, "assistant", "response"),  # a model item after the tool output is the next call
    ]
    counts = count_usage(flushed.messages)
    assert (counts["requests"], counts["input_tokens"], counts["output_tokens"]) == (2, 0, 0)
    assert flushed.messages[2].tool_name == "shell"


def test_ccusages_codex_fixture_gives_ccusages_figures():
    # ccusage (rust/crates/ccusage/src/adapter/codex): inputTokens = input - cached, cacheReadTokens = cached.
    result = parse_file(DATA / CCUSAGE)
    counts = count_usage(result.messages)
    assert (counts["requests"], counts["input_tokens"], counts["cache_read_tokens"]) == (2, 2750, 750)
    assert counts["output_tokens"] == 425
    # ccusage's totalTokens (4,200) is the log's total_tokens, which includes the cached input (and, in this
    # hand-written fixture, reasoning on top of output); ours is input + output (docs/accounting.md).
    assert counts["total_tokens"] == 2750 + 425
    assert sum(m.metadata["usage"]["total_tokens"] for m in result.messages) == 4200
    assert [m.model for m in result.messages] == ["gpt-5.2-codex", "gpt-5.3-codex"]


# -- token_count: every shape Codex wrote ---------------------------------------------------------------


def test_the_usage_of_one_token_count_event():
    first, second = usage(100, 10, 50), usage(200, 20, 75)
    # Only totals (ccusage's loads_session_usage_with_spaced_type_fields): the call is the difference.
    first_counts = usage_of(first)
    assert call_usage({"info": {"total_token_usage": first}}, None) == (first_counts, first_counts, "total_difference")
    got, total, source = call_usage({"info": {"total_token_usage": second}}, first_counts)
    assert (got["input_tokens"], got["cached_input_tokens"], got["output_tokens"], source) == (
        100,
        10,
        25,
        "total_difference",
    )
    assert got["total_tokens"] == 125 and total == usage_of(second)
    # The same total again: the event is repeated, no call.
    assert call_usage({"info": {"total_token_usage": first, "last_token_usage": first}}, first_counts)[0] is None
    # A total that went down (the totals started again): the total is the call.
    assert call_usage({"info": {"total_token_usage": usage(30, 0, 5)}}, total) == (
        usage_of(usage(30, 0, 5)),
        usage_of(usage(30, 0, 5)),
        "total_after_reset",
    )
    # last_token_usage wins over the difference.
    assert call_usage({"info": {"total_token_usage": second, "last_token_usage": first}}, first_counts)[2] == "last"
    # The earliest events: the call's usage flat in the payload.
    assert call_usage({"type": "token_count", **first}, None) == (first_counts, None, "flat")
    # No info (a rate-limit update at a turn's start), nothing counted, or garbage: no call.
    assert call_usage({"info": None, "rate_limits": {}}, first_counts)[0] is None
    assert call_usage({"info": {"last_token_usage": usage(0, 0, 0)}}, None)[0] is None
    assert call_usage({"info": {"last_token_usage": {"input_tokens": "x"}}}, None)[0] is None


def test_cached_and_written_cache_tokens_are_taken_out_of_the_input():
    counts = usage_of({"input_tokens": 1000, "cached_input_tokens": 600, "cache_write_input_tokens": 300})
    assert token_fields({**counts, "output_tokens": 40}) == {
        "input_tokens": 100,
        "cache_read_tokens": 600,
        "cache_creation_tokens": 300,
        "output_tokens": 40,
        "total_tokens": 140,
    }
    # A cached count above the input (never seen; ccusage clamps it) cannot make the input negative.
    assert token_fields(usage_of({"input_tokens": 10, "cached_input_tokens": 50}))["input_tokens"] == 0


def test_totals_only_rollouts_count_each_call_once(tmp_path):
    path = rollout(
        tmp_path / "r.jsonl",
        [
            line("00:00:00", "session_meta", {"id": "s1", "cwd": "/w/p"}),
            line("00:00:00", "turn_context", {"model": "gpt-5"}),
            line("00:00:01", "response_item", {"type": "message", "role": "user", "content": [{"text": "go"}]}),
            line("00:00:02", "response_item", {"type": "message", "role": "assistant", "content": [{"text": "a"}]}),
            token_count("00:00:02", None, usage(100, 10, 50)),
            token_count("00:00:03", None, usage(100, 10, 50)),  # repeated
            line("00:00:04", "response_item", {"type": "message", "role": "assistant", "content": [{"text": "b"}]}),
            token_count("00:00:04", None, usage(200, 20, 75)),
        ],
    )
    result = parse_file(path)
    calls = [m for m in result.messages if m.request_id]
    assert [(m.content, m.input_tokens, m.cache_read_tokens, m.output_tokens) for m in calls] == [
        ("a", 90, 10, 50),
        ("b", 90, 10, 25),
    ]
    assert [m.metadata["usage_source"] for m in calls] == ["total_difference", "total_difference"]


# -- sub-agents and forks -------------------------------------------------------------------------------


def test_a_spawned_thread_is_attributed_to_its_parent_and_its_prompt_is_no_round(tmp_path):
    path = rollout(
        tmp_path / ".codex/sessions/2026/01/02/rollout-2026-01-02T00-00-00-child.jsonl",
        [
            line(
                "00:00:00",
                "session_meta",
                {"id": "child", "source": {"subagent": {"thread_spawn": {"parent_thread_id": "root", "depth": 1}}}},
            ),
            line("00:00:00", "response_item", {"type": "message", "role": "user", "content": [{"text": "explore"}]}),
            line("00:00:03", "response_item", {"type": "message", "role": "assistant", "content": [{"text": "ok"}]}),
            token_count("00:00:03", usage(20, 0, 4), usage(20, 0, 4)),
        ],
    )
    result = parse_file(path)
    session = result.session
    assert (session.agent_session_id, session.attributed_session_id, session.is_subagent) == ("child", "root", True)
    assert by_line(result.messages) == [(2, "system", "subagent_prompt"), (3, "assistant", "response")]
    assert all(m.is_subagent and m.metadata["subagent"] for m in result.messages)
    assert count_usage(result.messages)["requests"] == 1


@pytest.mark.parametrize("restamped", [True, False], ids=["written-at-fork-time", "original-times"])
def test_a_forks_copy_of_its_parents_history_is_not_counted_again(restamped, tmp_path):
    parent_calls = [
        line("10:00:00", "turn_context", {"model": "gpt-5.2"}),
        line("10:00:01", "response_item", {"type": "message", "role": "user", "content": [{"text": "q1"}]}),
        line("10:00:05", "response_item", {"type": "message", "role": "assistant", "content": [{"text": "a1"}]}),
        token_count("10:00:05", None, usage(1000, 100, 200, 20)),
    ]
    copied = [{**entry, "timestamp": "2026-01-02T11:00:00.010Z"} if restamped else entry for entry in parent_calls]
    path = rollout(
        tmp_path / ".codex/sessions/2026/01/02/rollout-2026-01-02T11-00-00-branch.jsonl",
        [
            line("11:00:00", "session_meta", {"id": "branch", "forked_from_id": "parent", "cwd": "/w/p"}),
            *copied,
            line("11:00:30", "response_item", {"type": "message", "role": "user", "content": [{"text": "q2"}]}),
            line("11:00:35", "response_item", {"type": "message", "role": "assistant", "content": [{"text": "a2"}]}),
            token_count("11:00:35", None, usage(1600, 300, 450, 40)),
        ],
    )
    result = parse_file(path)
    assert by_line(result.messages) == [(6, "user", "prompt"), (7, "assistant", "response")]
    (call,) = [m for m in result.messages if m.request_id]
    # ccusage's dedupes_copied_branch_history_across_session_files: the branch's own call is 600/200/250/20.
    assert (call.input_tokens + call.cache_read_tokens, call.cache_read_tokens, call.output_tokens) == (600, 200, 250)
    assert call.metadata["reasoning_output_tokens"] == 20 and call.model == "gpt-5.2"
    assert result.session.metadata["forked_from_id"] == "parent"
    assert result.session.metadata["replayed_lines"] == 4
    assert result.session.started_at.isoformat() == "2026-01-02T11:00:00+00:00"  # the copy is not the fork's span


# -- a call read before its token_count ------------------------------------------------------------------


def test_a_call_read_before_its_token_count_is_emitted_at_once_and_again_when_its_usage_arrives(tmp_path):
    lines = [
        line("00:00:00", "session_meta", {"id": "s1", "cwd": "/w/p"}),
        line("00:00:00", "turn_context", {"model": "gpt-5"}),
        line("00:00:01", "response_item", {"type": "message", "role": "user", "content": [{"text": "go"}]}),
        line("00:00:02", "response_item", {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": ""}),
        line("00:00:03", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        line("00:00:04", "event_msg", {"type": "error", "message": "stream disconnected"}),
        token_count("00:00:05", usage(100, 10, 50), usage(100, 10, 50)),
    ]
    path = rollout(tmp_path / "r.jsonl", lines[:4])
    first = parse_file(path)
    call = first.messages[-1]
    assert (call.line, call.request_id, call.input_tokens, first.pending) == (4, "s1:call:1", None, 1)
    assert call.metadata["awaiting_usage"] and "usage_missing" not in call.metadata
    # Its tool output and an error come next: stored at once, the call being stored already.
    rollout(path, lines[:6])
    second = parse_file(path, start_offset=first.end_offset, carry=json.loads(json.dumps(first.carry)))
    assert (by_line(second.messages), second.pending) == ([(5, "toolResult", "tool_result"), (6, "error", "error")], 1)
    rollout(path, lines)
    third = parse_file(path, start_offset=second.end_offset, carry=json.loads(json.dumps(second.carry)))
    (done,) = third.messages  # the same message, complete: the import completes it in place
    assert (done.external_id, done.request_id, done.input_tokens, done.output_tokens) == (
        call.external_id,
        "s1:call:1",
        90,
        50,
    )
    assert "awaiting_usage" not in done.metadata and third.pending == 0


# -- read in pieces: exactly what one pass gives ----------------------------------------------------------


def cut_points(data: bytes) -> list[int]:
    points, start = {0, len(data)}, 0
    while (end := data.find(b"\n", start)) >= 0:
        points.update({start, (start + end) // 2, end, end + 1})
        start = end + 1
    return sorted(points)


@pytest.mark.parametrize("relative", CODEX_LOGS, ids=lambda p: p.stem[:12])
def test_reading_in_two_steps_at_any_byte_gives_what_one_pass_gives(relative, tmp_path):
    data = (DATA / relative).read_bytes()
    whole = parse_file(copy(relative, tmp_path / "whole"), flush=True)
    for cut in cut_points(data):
        path = copy(relative, tmp_path / str(cut), data[:cut])
        first = parse_file(path)
        path.write_bytes(data)
        second = parse_file(path, start_offset=first.end_offset, carry=json.loads(json.dumps(first.carry)), flush=True)
        # The call open at the cut is emitted by both reads (as far as written, then complete): stored once.
        stored = as_stored(first.ingest_items() + second.ingest_items())
        assert stored == whole.ingest_items(), f"cut at byte {cut}"
        assert second.session.to_carry() == whole.session.to_carry(), f"cut at byte {cut}"
        assert count_usage(stored) == count_usage(whole.messages)


@pytest.mark.parametrize("relative", CODEX_LOGS, ids=lambda p: p.stem[:12])
@pytest.mark.parametrize("budget", [1, 2, 64, 300, 1000, 2000, 5000])
def test_reading_in_chunks_of_any_size_gives_what_one_pass_gives(relative, budget, tmp_path):
    path = copy(relative, tmp_path)
    whole = parse_file(path)
    messages, offset, carry = [], 0, None
    while True:
        chunk = parse_file(path, start_offset=offset, carry=carry, max_bytes=budget)
        messages += chunk.messages
        offset, carry = chunk.end_offset, json.loads(json.dumps(chunk.carry))
        if chunk.complete:
            break
    assert as_stored([m.to_ingest() for m in messages]) == whole.ingest_items()
    assert (offset, chunk.pending) == (whole.end_offset, whole.pending)


def test_random_damage_never_raises_and_only_gives_issues(tmp_path):
    rng = random.Random(15)
    originals = [(DATA / relative).read_bytes() for relative in CODEX_LOGS]
    garbage = [b"{", b"[]", b"null", b'{"type":"event_msg","payload":{"type":"token_count","info":[1]}}', b"\xff\xfe"]
    for attempt in range(150):
        data = bytearray(rng.choice(originals))
        for _ in range(rng.randint(1, 6)):
            where = rng.randrange(len(data) + 1)
            action = rng.random()
            if action < 0.3:
                del data[where : where + rng.randint(1, 40)]
            elif action < 0.6:
                data[where:where] = rng.choice(garbage) + b"\n"
            elif where < len(data):
                data[where] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data) + 1)]
        path = tmp_path / ".codex" / "sessions" / f"rollout-{attempt}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(data))
        result = parse_file(path, flush=rng.random() < 0.5)
        for item in result.ingest_items():
            assert MessageInSerializer(data=item).is_valid(), item
        json.dumps(result.carry)


# -- what goes to the ingest, detection -----------------------------------------------------------------


@pytest.mark.parametrize("relative", CODEX_LOGS, ids=lambda p: p.stem[:12])
def test_every_message_is_a_valid_messages_api_item(relative):
    for item in parse_file(DATA / relative, flush=True).ingest_items():
        serializer = MessageInSerializer(data=item)
        assert serializer.is_valid(), (item, serializer.errors)


def test_codex_folders_are_detected_by_path():
    assert describe_layout(DATA / ROLLOUT).tool == "codex"
    assert describe_layout(DATA / BARE).tool == "codex"
    assert describe_layout("/home/u/.codex/archived_sessions/rollout-x.jsonl").file_key == "rollout-x"
    assert describe_layout("/home/u/.codex/history.jsonl").tool is None


SAMPLES = {
    "claude-code": [
        "claude_code/.claude/projects/-home-dev-weather/5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11.jsonl",
        "claude_code/.claude/projects/-home-dev-weather/6a1d3b8f-2c45-4e9a-8f7b-0d1e2f3a4b5c.jsonl",
    ],
    "qwen-code": ["qwen_code/.qwen/projects/-home-dev-weather/chats/8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12.jsonl"],
    "openclaw": ["openclaw/.openclaw/agents/main/sessions/0f3a9c27-6b1d-4e58-8a40-d5c2b7e91f36.jsonl"],
    "codex": [str(relative) for relative in CODEX_LOGS],
}


@pytest.mark.parametrize(("tool", "relative"), [(t, r) for t, paths in SAMPLES.items() for r in paths])
def test_each_tools_lines_have_the_shape_of_that_tool_only(tool, relative, tmp_path):
    texts = (DATA / relative).read_bytes().decode("utf-8", errors="replace").splitlines()
    shapes = set()
    for text in texts:
        try:
            data = json.loads(text)
        except ValueError:
            continue  # the fixtures' deliberately corrupt lines
        shapes.add(shape_of(data) if isinstance(data, dict) else None)
    assert shapes - {None} == {tool}
    exported = tmp_path / "exported.jsonl"
    shutil.copy(DATA / relative, exported)
    assert explain_detection(exported, texts[:25]).tool == tool


def test_a_codex_folder_imports_into_exact_sessions(api, tmp_path):
    for relative in (ROLLOUT, BARE):
        copy(relative, tmp_path)
    summary = import_path(tenant=api.tenant, path=tmp_path / "codex" / ".codex")
    assert (summary.files_imported, summary.sessions_created) == (2, 2)
    session = Session.objects.get(tenant=api.tenant, agent_session_id=SESSION)
    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    expected = count_usage(parse_file(tmp_path / ROLLOUT).messages)
    for name in ("requests", "conversations", "messages", "input_tokens", "cache_read_tokens", "output_tokens"):
        assert stats[name] == expected[name], name
    assert (session.tool, session.project, stats["requests"]) == ("codex", "weather", 8)
    assert session_count_drift(session=session) == {}
    again = import_path(tenant=api.tenant, path=tmp_path / "codex" / ".codex")
    assert again.messages == 0


def test_a_rollout_and_its_archived_copy_count_once(api, tmp_path):
    live = copy(ROLLOUT, tmp_path)
    import_path(tenant=api.tenant, path=live)
    archived = tmp_path / "codex" / ".codex" / "archived_sessions" / live.name
    archived.parent.mkdir(parents=True)
    shutil.move(live, archived)  # what `codex archive` does
    summary = import_path(tenant=api.tenant, path=archived)
    assert (summary.sessions_created, summary.messages, summary.requests) == (0, 0, 0)
    (session,) = Session.objects.filter(tenant=api.tenant)
    assert api.get(f"/api/v1/sessions/{session.pk}/stats/").json()["requests"] == 8


def test_message_items_written_without_their_type_are_read(tmp_path):
    """Seen in another parser's fixtures: `response_item` payloads with `role` and `content` but no
    `"type": "message"`. They are the prompt and the answer all the same (before, nothing was read)."""
    path = rollout(
        tmp_path / "rollout-2024-01-01T10-00-00-abc.jsonl",
        [
            line("10:00:00", "session_meta", {"id": "abc-123", "cwd": "/Users/alice/code/my-api"}),
            line(
                "2024-01-01T10:00:01Z",
                "response_item",
                {"role": "user", "content": [{"type": "input_text", "text": "Add rate limiting"}]},
            ),
            line(
                "2024-01-01T10:00:05Z",
                "response_item",
                {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            ),
        ],
    )
    result = parse_file(path, flush=True)
    assert [(m.role, m.content) for m in result.messages] == [("user", "Add rate limiting"), ("assistant", "Done.")]
    assert count_usage(result.messages)["requests"] == 1
