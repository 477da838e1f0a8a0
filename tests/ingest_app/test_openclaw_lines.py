"""OpenClaw lines and file names, parsed (no database): which assistant lines are API calls, failed calls that
billed tokens, the Feishu metadata of every OpenClaw version, and the names of a session's history files.

The backup in ingest_app/importers/openclaw/samples/backup/ is shaped after OpenClaw's own writers (see
docs/accounting.md, "OpenClaw"): a live transcript, its pre-compaction checkpoint, a reset and a deleted
archive, a thread's session and sessions.json.
"""

import random

import pytest

from ingest_app.importers import describe_layout, openclaw, parse_file
from ingest_app.importers.detect import is_log_name
from ingest_app.importers.openclaw.parser import feishu_context, no_call_kind, parse_inbound_metadata, transcript_name
from sessions_app.accounting import count_usage

SESSIONS = openclaw.TOOL.samples / "backup" / ".openclaw"
SESSIONS = SESSIONS / "agents" / "main" / "sessions"
EARLIER, LIVE, DELETED, TOPIC = (
    "2b4e7a91-3c5d-4f6e-8a9b-0c1d2e3f4a5b",
    "9d8c7b6a-5f4e-4d3c-9b2a-1f0e9d8c7b6a",
    "4f1a2b3c-6d7e-4a8b-9c0d-1e2f3a4b5c6d",
    "7e6d5c4b-3a29-4f18-8e7d-6c5b4a392817",
)
RESET_FILE = SESSIONS / f"{EARLIER}.jsonl.reset.2026-03-04T09-12-33.411Z"
LIVE_FILE = SESSIONS / f"{LIVE}.jsonl"
CHECKPOINT_FILE = SESSIONS / f"{LIVE}.checkpoint.c0ffee12-3456-4789-8abc-def012345678.jsonl"
DELETED_FILE = SESSIONS / f"{DELETED}.jsonl.deleted.2026-03-02T11-40-17.052Z"
TOPIC_FILE = SESSIONS / f"{TOPIC}-topic-42.jsonl"
OU = "ou_7c1e5a9d3b2f4e6a8c0d1e3f5a7b9c2d"
OC = "oc_3b9d1f5a7c2e4b6d8f0a1c3e5b7d9f2a"


def roles(result):
    return [(m.line, m.role, m.metadata.get("kind"), m.request_id) for m in result.messages]


# -- what is and is not an API call -------------------------------------------------------------------


def test_a_delivery_mirror_and_an_injected_reply_are_system_lines_without_request_or_tokens():
    result = parse_file(RESET_FILE)
    assert roles(result)[-2:] == [(7, "system", "delivery_mirror", None), (8, "system", "injected", None)]
    mirror = result.messages[-2]
    assert (mirror.content, mirror.metadata["model"], mirror.metadata["provider"]) == (
        "明天杭州小雨，12°C，记得带伞。",
        "delivery-mirror",
        "openclaw",
    )
    counts = count_usage(result.messages)
    assert (counts["requests"], counts["message_assistant"], counts["message_system"]) == (2, 2, 2)
    assert (counts["input_tokens"], counts["output_tokens"]) == (1204 + 1302, 41 + 58)


def test_the_newer_gateway_injected_form_is_no_request_either():
    result = parse_file(LIVE_FILE)
    assert roles(result)[-1] == (11, "system", "injected", None)
    assert result.messages[-1].content == "[Cron]\n\n每日提醒：18:00 站会"


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({"model": "delivery-mirror", "provider": "openclaw"}, "delivery_mirror"),
        ({"model": "gateway-injected", "provider": "openclaw"}, "injected"),
        ({"stopReason": "injected"}, "injected"),
        ({"model": "qwen3-max", "openclawDeliveryMirror": {"kind": "channel-final"}}, "delivery_mirror"),
        ({"model": "qwen3-max", "stopReason": "stop"}, None),
        ({"model": "qwen3-max", "stopReason": "error"}, None),
        ({}, None),
    ],
)
def test_which_assistant_messages_made_no_call(message, kind):
    assert no_call_kind({"role": "assistant", **message}) == kind


def test_an_injected_row_replaying_tool_calls_keeps_them_and_is_no_request(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-05-01T00:00:00Z","cwd":"/w"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2026-05-01T00:00:01Z","message":{"role":"assistant",'
        '"parentToolCallId":"code-mode-exec","api":"openclaw-transcript","provider":"openclaw",'
        '"model":"gateway-injected","content":[{"type":"toolCall","id":"nested-read","name":"read",'
        '"arguments":{"path":"/repo/a.ts"}}],"timestamp":3}}\n'
    )
    (row,) = parse_file(path).messages
    assert (row.role, row.request_id, row.metadata["kind"]) == ("system", None, "injected")
    assert row.tool_calls == [{"id": "nested-read", "name": "read", "arguments": {"path": "/repo/a.ts"}}]


def test_a_failed_call_that_reports_usage_is_an_error_message_that_is_the_request_billing_its_tokens():
    result = parse_file(LIVE_FILE)
    failed = result.messages[6]
    assert (failed.line, failed.role, failed.request_id, failed.finish_reason) == (
        9,
        "error",
        "chatcmpl-6a7b8c9d",
        "error",
    )
    assert (failed.input_tokens, failed.output_tokens, failed.cache_read_tokens) == (2710, 8192, 4096)
    assert failed.content == failed.metadata["error"] == "400 Range of max_tokens should be [1, 8192]: output truncated"
    assert failed.metadata["partial_text"] == "主题：本周会议纪要\n\n各位好，"
    counts = count_usage(result.messages)
    assert (counts["requests"], counts["message_error"], counts["message_assistant"]) == (4, 1, 3)
    assert counts["output_tokens"] == 37 + 96 + 8192 + 412
    assert counts["total_tokens"] == (2210 + 37) + (2391 + 96) + (2710 + 8192) + (2733 + 412)


@pytest.mark.parametrize(
    ("error_message", "request_id"),
    [("429 rate limited", "a1"), ("Connection error.", None)],
    ids=["answered: a request", "no answer: no request"],
)
def test_a_failed_call_without_usage_is_a_request_when_the_provider_answered(tmp_path, error_message, request_id):
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T00:00:00Z","cwd":"/w"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-01T00:00:01Z","message":{"role":"assistant",'
        '"content":[],"model":"qwen3-max","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0},'
        f'"stopReason":"error","errorMessage":"{error_message}"}}}}\n'
    )
    (error,) = parse_file(path).messages
    assert (error.role, error.request_id, error.model, error.content) == (
        "error",
        request_id,
        "qwen3-max",
        error_message,
    )


# -- Feishu, every version ---------------------------------------------------------------------------


def test_the_2026_3_direct_message_names_its_sender_and_the_direct_chat():
    result = parse_file(LIVE_FILE)
    prompt = result.messages[0]
    assert prompt.feishu_conversation_id == OU
    assert prompt.metadata["body"] == "总结一下这周的会议纪要"
    assert prompt.metadata["feishu"] == {
        "chat_type": "direct",
        "conversation_id": OU,
        "chat_id": None,
        "sender_id": OU,
        "sender": None,
        "message_id": "om_x100b52a1d0f2e4c6a8b0d2f4e6a8c1b3",
    }
    assert result.session.user == OU


FEISHU_VERSIONS = {
    # 2026.1: the envelope formatAgentEnvelope wrote (`Feishu <chat>:<sender>` in a group, `<sender>` in a DM).
    "envelope-dm": (f"[Feishu {OU} Thu 2026-01-15 10:00 GMT+8] [message_id: om_a1]\n{OU}: 你好", OU, None, "你好"),
    "envelope-group": (f"[Feishu {OC}:{OU} Thu 2026-01-15 10:00 GMT+8] 大家好", OC, OU, "大家好"),
    # 2026.2: the untrusted-metadata blocks (buildInboundUserContextPrefix), then the tag and the speaker.
    "blocks-dm": (
        'Conversation info (untrusted metadata):\n```json\n{"message_id": "om_a2", "sender_id": "' + OU + '"}\n```\n\n'
        'Sender (untrusted metadata):\n```json\n{"label": "韩梅梅 ('
        + OU
        + ')", "id": "'
        + OU
        + '", "name": "韩梅梅"}\n'
        "```\n\n[message_id: om_a2]\n韩梅梅: 在吗",
        OU,
        OU,
        "在吗",
    ),
    # 2026.3: a queued system event line before the tag and the speaker; no blocks.
    "system-event-dm": (
        f"System: [Wed 2026-03-04 17:20 GMT+8] Feishu[main] DM from {OU}: 在吗\n\n[message_id: om_a3]\n{OU}: 在吗",
        OU,
        OU,
        "在吗",
    ),
    "system-event-group": (
        f"System: [Wed 2026-03-04 17:20 GMT+8] Feishu[work] message in group {OC}: 开会\n\n"
        f"[message_id: om_a4]\n{OU}: 开会",
        OC,
        OU,
        "开会",
    ),
    # Later: the system event is gone; the tag and the open_id speaker remain.
    "tag-and-speaker": (f"[message_id: om_a5]\n{OU}: 早", OU, OU, "早"),
}


@pytest.mark.parametrize("version", FEISHU_VERSIONS)
def test_every_feishu_message_format_gives_the_sender_and_the_conversation(version):
    text, conversation, sender, body = FEISHU_VERSIONS[version]
    meta = parse_inbound_metadata(text)
    context = feishu_context(meta)
    assert context["conversation_id"] == conversation
    if sender:
        assert context["sender_id"] == sender
    assert context["chat_type"] == ("group" if conversation.startswith("oc_") else "direct")
    assert meta["body"] == body


def test_a_system_event_of_another_channel_is_not_feishu():
    assert parse_inbound_metadata("System: [Wed 2026-03-04 17:20 GMT+8] Exec finished (code 0)\n\nwhat now?") == {}
    telegram = parse_inbound_metadata("System: [Wed 2026-03-04 17:20 GMT+8] Telegram[main] DM from 5003590611: hi")
    assert telegram == {}


# -- the files of one session's history ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "key", "variant"),
    [
        (LIVE_FILE, LIVE, "live"),
        (CHECKPOINT_FILE, LIVE, "checkpoint"),
        (RESET_FILE, EARLIER, "reset"),
        (DELETED_FILE, DELETED, "deleted"),
        (TOPIC_FILE, f"{TOPIC}-topic-42", "live"),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 12 else None,
)
def test_each_file_of_a_session_is_read_and_keyed_by_its_session(path, key, variant):
    assert is_log_name(path)
    assert transcript_name(path.name).variant == variant
    layout = describe_layout(path)
    assert (layout.tool, layout.file_key, layout.project_dir) == ("openclaw", key, "main")
    assert parse_file(path).session.agent_session_id == key.removesuffix("-topic-42")


def test_backups_and_the_session_store_are_not_transcripts():
    assert not is_log_name(SESSIONS / "sessions.json")
    assert not is_log_name(SESSIONS / f"{LIVE}.jsonl.bak.2026-03-04T09-12-33.411Z")
    assert not is_log_name(SESSIONS / f"{LIVE}.jsonl.reset.yesterday")
    assert not is_log_name(SESSIONS / f"{LIVE}.trajectory.jsonl")  # run timings; the transcript has the usage
    assert transcript_name("sessions.json") is None
    # Outside the OpenClaw folders the archive name still gives the session's key.
    assert describe_layout(f"/backup/{EARLIER}.jsonl.reset.2026-03-04T09-12-33Z").file_key == EARLIER


def test_a_checkpoint_holds_the_same_messages_as_the_start_of_the_live_file():
    live, checkpoint = parse_file(LIVE_FILE), parse_file(CHECKPOINT_FILE)
    same = [(m.external_id, m.request_id, m.conversation) for m in checkpoint.messages]
    assert same == [(m.external_id, m.request_id, m.conversation) for m in live.messages[: len(same)]]


@pytest.mark.parametrize("path", [LIVE_FILE, RESET_FILE, DELETED_FILE], ids=["live", "reset", "deleted"])
def test_mangled_openclaw_lines_never_raise(path, tmp_path):
    data = path.read_bytes()
    rng = random.Random(15)
    target = tmp_path / path.name
    for _ in range(150):
        mangled = bytearray(data[: rng.randrange(len(data) + 1)])
        for _ in range(rng.randrange(6)):
            if mangled:
                mangled[rng.randrange(len(mangled))] = rng.choice(b'{}[]":,\\\n 0aZ\xff')
        target.write_bytes(bytes(mangled))
        result = parse_file(target, tool="openclaw")
        assert all(issue.level in ("error", "warning") for issue in result.issues)
    for text in ("System: [x] Feishu[", "[message_id: om_]\nou_: ", "System: [] Feishu[a] DM from :", "\x00" * 5):
        feishu_context(parse_inbound_metadata(text))
