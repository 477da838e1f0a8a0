"""Importing Gemini CLI logs (JSON and JSONL) and older Qwen Code JSON into sessions: exact counts through the
API, documents read whole again when they change, a JSON session migrated to JSONL counted once, rewritten
records counted once, sub-agents in the round that spawned them.
"""

import json
import os
from pathlib import Path

import pytest

from ingest_app.importers import parse_file
from ingest_app.models import ImportedFile
from ingest_app.pipeline import import_path
from sessions_app.models import Message
from sessions_app.selectors.recount import session_count_drift
from tests.ingest_app.test_importer_gemini import (
    GEMINI_AGENT,
    GEMINI_AGENT_ID,
    GEMINI_JSON,
    GEMINI_JSONL,
    GEMINI_SESSION,
    QWEN_JSON,
    copy_to,
    jsonl_records,
)
from tests.ingest_app.test_imports import expected, only_session, stats


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))


def touch_later(path: Path) -> None:
    """A rewrite the import must notice even within the file system's time resolution."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


@pytest.mark.parametrize("relative", [GEMINI_JSON, GEMINI_JSONL, QWEN_JSON], ids=lambda p: p.suffix)
def test_each_form_is_imported_with_the_counts_its_parser_gives(api, relative, tmp_path):
    path = copy_to(relative, tmp_path)
    summary = import_path(tenant=api.tenant, path=tmp_path)

    parsed = parse_file(path)
    session = only_session(api)
    assert stats(api, session) == expected(parsed.messages)
    assert (summary.files_imported, summary.sessions_created, summary.messages) == (1, 1, len(parsed.messages))
    assert (session.tool, session.agent_session_id) == (parsed.tool, parsed.session.agent_session_id)
    assert session_count_drift(session=session) == {}
    again = import_path(tenant=api.tenant, path=tmp_path)
    assert (again.files_unchanged, again.messages) == (1, 0)


def test_the_gemini_json_sample_counts_four_calls_and_a_failed_one_with_the_cache_apart(api, tmp_path):
    copy_to(GEMINI_JSON, tmp_path)
    import_path(tenant=api.tenant, path=tmp_path)
    counts = stats(api, only_session(api))
    assert (counts["requests"], counts["conversations"], counts["messages"]) == (5, 2, 12)
    assert (counts["input_tokens"], counts["output_tokens"], counts["cache_read_tokens"]) == (24265, 13094, 313340)
    assert (counts["message_toolresult"], counts["message_error"]) == (3, 1)


def test_a_session_and_its_subagent_count_in_the_parent_session_in_the_round_that_spawned_it(api, tmp_path):
    main, agent = copy_to(GEMINI_JSONL, tmp_path), copy_to(GEMINI_AGENT, tmp_path)
    summary = import_path(tenant=api.tenant, path=tmp_path)

    parent = parse_file(main)
    spawner = next(m for m in parent.messages if m.metadata.get("spawned_agent_id") == GEMINI_AGENT_ID)
    sub = parse_file(agent, carry={"conversation": spawner.conversation})
    session = only_session(api)
    assert (summary.files_imported, summary.sessions_created) == (2, 1)
    assert session.agent_session_id == GEMINI_SESSION
    assert stats(api, session) == expected(parent.messages, sub.messages)
    assert stats(api, session)["requests"] == 5
    answer = Message.objects.get(session=session, external_id="6f7a8b9c-0d1e-4f2a-b3c4-d5e6f7a8b9c0")
    assert answer.conversation.conversation_id == spawner.conversation  # the sub-agent's call joined round 2
    assert GEMINI_AGENT_ID in session.metadata["subagents"]


def test_a_json_session_migrated_to_jsonl_counts_each_call_once(api, tmp_path):
    """Resuming a `.json` session (v0.39+) writes `<same name>.jsonl`: the session line, every message again,
    then the new ones; the `.json` stays. Both files are imported: the copies are the same messages."""
    document = copy_to(GEMINI_JSON, tmp_path)
    data = json.loads(document.read_text())
    header = {key: data[key] for key in ("sessionId", "projectHash", "startTime", "lastUpdated")}
    later = [
        {"id": "aa11bb22-cc33-4d44-8e55-ff6677889900", "timestamp": "2026-04-20T09:00:00.000Z", "type": "user",
         "content": [{"text": "Run the tests again"}]},
        {"id": "bb22cc33-dd44-4e55-9f66-0077889900aa", "timestamp": "2026-04-20T09:00:09.000Z", "type": "gemini",
         "content": "All 212 tests pass.", "model": "gemini-2.5-pro",
         "tokens": {"input": 157000, "output": 9, "cached": 155000, "thoughts": 0, "tool": 0, "total": 157009}},
    ]  # fmt: skip
    write_jsonl(document.with_name(document.name + "l"), [header, *data["messages"], *later])

    summary = import_path(tenant=api.tenant, path=tmp_path)
    session = only_session(api)
    counts = stats(api, session)
    assert summary.files_imported == 2
    assert (counts["requests"], counts["conversations"]) == (6, 3)
    assert counts["input_tokens"] == 24265 + 2000
    assert counts["messages"] == 12 + 2
    assert session_count_drift(session=session) == {}


def test_a_json_document_rewritten_with_a_new_round_adds_only_the_new_messages(api, tmp_path):
    document = copy_to(GEMINI_JSON, tmp_path)
    data = json.loads(document.read_text())
    first = dict(data, messages=data["messages"][:5])  # the first round only
    document.write_text(json.dumps(first))
    import_path(tenant=api.tenant, path=tmp_path)
    session = only_session(api)
    assert stats(api, session)["requests"] == 3

    document.write_text(json.dumps(data))  # Gemini CLI rewrote the whole file with the second round
    touch_later(document)
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert summary.messages == 12 - 8  # the first round: 8 messages, stored once
    assert stats(api, session) == expected(parse_file(document).messages)
    record = ImportedFile.objects.get(tenant=api.tenant)
    assert (record.tool, record.offset) == ("gemini-cli", document.stat().st_size)


def test_a_jsonl_file_read_as_it_grows_counts_each_rewritten_record_once(api, tmp_path):
    path = copy_to(GEMINI_JSONL, tmp_path)
    records = jsonl_records(path)
    # Cut after the third version of the record written three times: every version is in the first read.
    write_jsonl(path, records[:14])
    import_path(tenant=api.tenant, path=tmp_path)
    write_jsonl(path, records)
    touch_later(path)
    import_path(tenant=api.tenant, path=tmp_path)
    session = only_session(api)
    assert stats(api, session) == expected(parse_file(path).messages)
    assert stats(api, session)["requests"] == 4


def test_a_record_rewritten_with_more_tokens_after_an_import_keeps_the_last_version_counted_once(api, tmp_path):
    """The record is stored before its tokens are written (no usage yet: no request); the next import meets it
    again, with its tokens, under the same external id: the stored message is completed in place."""
    path = copy_to(GEMINI_JSONL, tmp_path)
    records = jsonl_records(path)
    write_jsonl(path, records[:12])  # the record's first version, without tokens
    import_path(tenant=api.tenant, path=tmp_path)
    write_jsonl(path, records)
    touch_later(path)
    import_path(tenant=api.tenant, path=tmp_path)
    session = only_session(api)
    assert stats(api, session) == expected(parse_file(path).messages)
    message = Message.objects.get(session=session, external_id="9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
    assert (message.input_tokens, message.output_tokens) == (440, 52)


def test_a_document_caught_mid_rewrite_is_left_with_a_warning_and_imported_whole_once_rewritten(api, tmp_path):
    document = copy_to(GEMINI_JSON, tmp_path)
    whole = document.read_bytes()
    document.write_bytes(whole[:3000])  # Gemini CLI was writing it
    first = import_path(tenant=api.tenant, path=tmp_path)
    assert (first.messages, first.files_refused) == (0, 0)
    assert [issue.level for issue in first.issues] == ["warning"]

    document.write_bytes(whole)
    touch_later(document)
    import_path(tenant=api.tenant, path=tmp_path)
    session = only_session(api)
    assert stats(api, session) == expected(parse_file(document).messages)
