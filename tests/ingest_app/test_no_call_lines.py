"""Assistant-like lines that made no API call, per tool (no database): see docs/accounting.md, "Lines that are
not API calls, and failed calls that are". The OpenClaw cases are in test_openclaw_lines.py."""

import json

import pytest

from ingest_app.importers import parse_file
from sessions_app.accounting import count_usage

CLAUDE_PARENT = "5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11"
CLAUDE_FORK = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"


def write(tmp_path, relative: str, lines: list[dict]):
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


def claude_line(kind: str, uuid: str, message: dict, **extra) -> dict:
    return {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/weather",
        "sessionId": CLAUDE_FORK,
        "version": "2.1.30",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-03-04T09:00:00.000Z",
        "message": message,
        **extra,
    }


def test_a_claude_code_fork_copies_its_parents_responses_without_calling_again(tmp_path):
    forked = {"sessionId": CLAUDE_PARENT, "messageUuid": "c0de0007-0000-4000-8000-000000000007"}
    usage = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 5000,
        "output_tokens": 40,
    }
    path = write(
        tmp_path,
        f".claude/projects/-home-dev-weather/{CLAUDE_FORK}.jsonl",
        [
            claude_line("user", "f0000001", {"role": "user", "content": "查看天气"}, forkedFrom=forked),
            claude_line(
                "assistant",
                "f0000002",
                {"id": "msg_01WeatherA", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                 "content": [{"type": "text", "text": "让我查一下..."}], "stop_reason": "end_turn", "usage": usage},
                requestId="req_011CTgWeatherA",
                forkedFrom=forked,
            ),
            claude_line("user", "f0000003", {"role": "user", "content": "明天呢？"}),
            claude_line(
                "assistant",
                "f0000004",
                {"id": "msg_01ForkNew", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                 "content": [{"type": "text", "text": "明天有雨。"}], "stop_reason": "end_turn",
                 "usage": {"input_tokens": 120, "cache_read_input_tokens": 5200, "output_tokens": 9}},
                requestId="req_011CTgForkNew",
            ),
        ],
    )  # fmt: skip
    result = parse_file(path)
    copy = next(m for m in result.messages if m.metadata.get("kind") == "forked_copy")
    assert (copy.role, copy.request_id, copy.input_tokens, copy.metadata["forked_from"]) == (
        "system",
        None,
        None,
        CLAUDE_PARENT,
    )
    counts = count_usage(result.messages)
    assert (counts["requests"], counts["input_tokens"], counts["output_tokens"]) == (1, 120, 9)


def test_a_claude_code_synthetic_message_is_no_request_unless_it_is_a_failed_call(tmp_path):
    # "You've hit your session limit" is the provider's answer (a 429): a failed call, one request (see
    # test_failed_calls.py); "No response requested." after an interrupt was no call at all.
    synthetic = {"id": "6e0f", "role": "assistant", "model": "<synthetic>", "stop_reason": "stop_sequence",
                 "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0},
                 "content": [{"type": "text", "text": "You've hit your session limit · resets 10:40am"}]}  # fmt: skip
    path = write(
        tmp_path,
        f".claude/projects/-home-dev-weather/{CLAUDE_FORK}.jsonl",
        [
            claude_line("assistant", "e0000001", synthetic, isApiErrorMessage=True, error="rate_limit"),
            claude_line("assistant", "e0000002", {**synthetic, "content": "No response requested."}),
        ],
    )  # fmt: skip
    result = parse_file(path)
    assert [(m.role, m.metadata["kind"], m.request_id) for m in result.messages] == [
        ("error", "api_error", "6e0f"),
        ("system", "synthetic", None),
    ]


@pytest.mark.parametrize("forked", [True, False], ids=["fork copy", "own call"])
def test_a_qwen_code_fork_copy_is_no_request(tmp_path, forked):
    record = {
        "uuid": "9e110003-0000-4000-8000-000000000003",
        "parentUuid": None,
        "sessionId": "1a2b3c4d-0000-4000-8000-00000000f0f0",
        "timestamp": "2026-03-04T09:00:04.000Z",
        "type": "assistant",
        "cwd": "/home/dev/weather",
        "version": "0.9.0",
        "model": "qwen3-coder-plus",
        "message": {"role": "model", "parts": [{"text": "今天是晴天。"}]},
        "usageMetadata": {"promptTokenCount": 1300, "candidatesTokenCount": 12, "totalTokenCount": 1312},
    }
    if forked:
        record["forkedFrom"] = {"sessionId": "8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12", "messageUuid": record["uuid"]}
    path = write(
        tmp_path, ".qwen/projects/-home-dev-weather/chats/1a2b3c4d-0000-4000-8000-00000000f0f0.jsonl", [record]
    )
    (message,) = parse_file(path).messages
    if forked:
        assert (message.role, message.request_id, message.output_tokens) == ("system", None, None)
        assert message.metadata["kind"] == "forked_copy" and message.content == "今天是晴天。"
    else:
        assert (message.role, message.output_tokens) == ("assistant", 12) and message.request_id
