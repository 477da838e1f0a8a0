"""Failed calls are requests (docs/accounting.md "Failed calls"): each importer, and the OTLP receiver, counts a call
the provider answered with an error as one request of the model called, with the tokens its line reports (none:
zero). A failure no provider answered (a connection error) is an error and no request; a failed attempt the log
writes twice counts once; retries the log does not write are not counted.

The logs are the importers' samples of failed calls (each `samples/README.md` says where their shapes come from).
Parsing needs no database; the imports and the OTLP pairing use the real PostgreSQL.
"""

import copy
import json
from pathlib import Path

import pytest
from django.test import Client

from ingest_app.importers import parse_file
from ingest_app.importers.failures import provider_answered
from ingest_app.models import TelemetryRecord
from ingest_app.pipeline import import_path
from sessions_app.accounting import SessionAccount, count_usage
from sessions_app.models import LlmRequest, Message, Session
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from tests.ingest_app.otlp_payloads import logs_payload, post, records, set_attribute
from tests.ingest_app.test_importer_parsers import as_stored, cut_points, normalised, parse_in_two_steps
from tests.ingest_app.test_opencode import TOP, home, sources
from tests.support.agent_logs import DATA, copy_log
from tests.support.api import make_client

CLAUDE = Path("claude_code/.claude/projects/-home-dev-weather/9b2e4c6a-3f1d-4e8b-a7c5-2d0f1e3b5a79.jsonl")
QWEN = Path("qwen_code/.qwen/projects/-home-dev-weather/chats/3c7d9e1f-6a2b-4c8d-9e0f-1a2b3c4d5e6f.jsonl")
GEMINI = Path(
    "gemini_cli/.gemini/tmp/a33c3345ed592a7d6c2eb32b6ad11a280e0cafc473b2669402655b56894f5391/chats/"
    "session-2026-10-02T08-00-d7e4a1c9.jsonl"
)
CODEX = Path("codex/.codex/sessions/2026/03/02/rollout-2026-03-02T09-00-00-019c8a3e-6f2d-7b41-9e5a-3c7d1f0b2a64.jsonl")
CODEX_SESSION = "019c8a3e-6f2d-7b41-9e5a-3c7d1f0b2a64"
OPENCLAW = Path("openclaw/.openclaw/agents/main/sessions/5a7c9e1b-3d5f-4a7c-9e1b-3d5f7a9c1e3b.jsonl")
SAMPLES = [CLAUDE, QWEN, GEMINI, CODEX, OPENCLAW]
SONNET = "claude-sonnet-4-5-20250929"


def failures(messages) -> list[tuple]:
    """Each error: its line, whether it is a request, and of which model."""
    return [(m.line, m.request_id is not None, m.model) for m in messages if m.role == "error"]


def requests_by_model(messages) -> dict[str, int]:
    account = SessionAccount()
    for message in messages:
        account.add(message.to_ingest())
    found: dict[str, int] = {}
    for (_, model), tally in account.rollups.items():
        if tally[0]:
            found[model] = found.get(model, 0) + tally[0]
    return found


# -- the rule ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "text", "answered"),
    [
        (529, "Overloaded", True),
        ("401", "", True),
        (None, 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}', True),
        (None, "You've hit your session limit · resets 3pm", True),
        (None, "Prompt is too long", True),
        (None, "Connection closed mid-response", True),  # the answer had begun
        (None, "API Error: Connection error.", False),
        (None, "Connection error. (cause: fetch failed)", False),
        (None, "read ECONNRESET", False),
        (None, "Request timed out.", False),
        (None, "retry in 500ms", True),  # "500ms" is no status, and no connection failure either
    ],
)
def test_a_failed_call_is_a_request_when_the_provider_answered_it(status, text, answered):
    assert provider_answered(status, text) is answered


# -- each importer ------------------------------------------------------------------------------------------------
def test_claude_code_counts_every_failed_attempt_it_wrote_once_under_the_model_called():
    parsed = parse_file(DATA / CLAUDE)
    assert failures(parsed.messages) == [
        (4, True, SONNET),  # a 529, retried (`system` `api_error`, retryAttempt 1)
        (5, False, None),  # ECONNRESET, retried: no answer, no request
        (8, True, SONNET),  # a 429 a persistent retry waits on …
        (10, True, SONNET),  # … then the login expired: the last attempt (`isApiErrorMessage`, 401)
        (12, False, None),  # "API Error: Connection error."
        (14, True, SONNET),  # the plan's limit (429)
    ]
    wait = next(m for m in parsed.messages if m.line == 9)  # the 429 again, 30 s later: the same attempt
    assert (wait.role, wait.request_id, wait.metadata["kind"], wait.metadata["attempt_line"]) == (
        "system", None, "api_retry_wait", 8,
    )  # fmt: skip
    counts = count_usage(parsed.messages)
    assert (counts["requests"], counts["message_error"], counts["message_assistant"]) == (2 + 4, 6, 2)
    assert requests_by_model(parsed.messages) == {SONNET: 6}  # never `<synthetic>`
    by_line = {m.line: m for m in parsed.messages}
    assert by_line[4].metadata["api_request_id"] == "req_011CYfa11ed04"  # quoted in the error's text
    assert by_line[10].request_id == "3c0f6a2e-8d4b-4f1a-9e7c-5b2d1a0f9e31"  # Claude Code's id of the line
    assert (by_line[10].metadata["status"], by_line[10].metadata["error"]) == (401, "authentication_failed")
    assert (by_line[10].input_tokens, by_line[10].output_tokens, by_line[10].total_tokens) == (0, 0, 0)


def test_a_claude_code_call_that_fails_before_any_answer_names_no_model(tmp_path):
    lines = (DATA / CLAUDE).read_text().splitlines()
    path = copy_log(CLAUDE, tmp_path)
    path.write_text("\n".join([lines[0], lines[9]]) + "\n")  # the first prompt, then the 401
    (prompt, failed) = parse_file(path).messages
    assert (failed.role, failed.request_id is not None, failed.model) == ("error", True, None)
    assert "model_from" not in failed.metadata


def test_a_claude_code_failed_call_copied_into_another_file_counts_once(tmp_path):
    line = json.loads((DATA / CLAUDE).read_text().splitlines()[9])  # the 401's line
    copy_of = {**line, "uuid": "fa11ed00-0000-4000-8000-000000000099", "isSidechain": True, "agentId": "a9"}
    agent = tmp_path / "agent-a9.jsonl"
    agent.write_text(json.dumps(copy_of) + "\n")
    main = parse_file(DATA / CLAUDE).messages
    assert count_usage(main + parse_file(agent).messages)["requests"] == count_usage(main)["requests"]


def test_qwen_code_counts_each_api_error_it_recorded_with_its_model_and_auth_type():
    parsed = parse_file(DATA / QWEN)
    model = "qwen3-coder-plus"
    assert failures(parsed.messages) == [(2, True, model), (3, False, None), (7, True, model), (8, True, model)]
    assert {m.auth_type for m in parsed.messages if m.role == "error" and m.request_id} == {"openai"}
    counts = count_usage(parsed.messages)
    assert (counts["requests"], counts["message_error"], counts["input_tokens"]) == (1 + 3, 4, 900)


def test_a_qwen_code_api_error_written_in_two_files_counts_once(tmp_path):
    # A sub-agent's event lands in its own file and in its parent's: the same event, one request.
    lines = (DATA / QWEN).read_text().splitlines()
    event = json.loads(lines[6])  # the 429
    event["systemPayload"]["uiEvent"]["subagent_name"] = "general-purpose"
    parent, child = tmp_path / "parent.jsonl", tmp_path / "child.jsonl"
    parent.write_text(lines[0] + "\n" + json.dumps(event) + "\n")
    child.write_text(json.dumps({**event, "uuid": "9e220099-0000-4000-8000-000000000099"}) + "\n")
    both = parse_file(parent).messages + parse_file(child).messages
    assert count_usage(both)["requests"] == 1 and count_usage(both)["message_error"] == 2


def test_gemini_cli_counts_each_api_error_record_under_the_model_of_the_last_response():
    parsed = parse_file(DATA / GEMINI)
    assert failures(parsed.messages) == [(8, True, "gemini-2.5-pro"), (12, False, None), (16, True, "gemini-2.5-pro")]
    counts = count_usage(parsed.messages)
    assert (counts["requests"], counts["message_error"], counts["message_system"]) == (1 + 2, 3, 1)
    failed = next(m for m in parsed.messages if m.line == 8)
    assert failed.request_id == failed.external_id and failed.input_tokens is None


def test_codex_counts_failed_attempts_and_a_failed_turn_once():
    parsed = parse_file(DATA / CODEX)
    assert failures(parsed.messages) == [
        (6, True, "gpt-5-codex"),  # a stream cut by a 503 after it began, retried
        (7, False, None),  # no connection, retried
        (14, True, "gpt-5-codex"),  # the usage limit; its turn's task_complete (line 15) repeats it: no message
        (19, True, "gpt-5-codex"),  # a task_complete with an error and no error event before it (401)
    ]
    assert [m.metadata["kind"] for m in parsed.messages if m.role == "error"] == [
        "stream_error", "stream_error", "error", "turn_error",
    ]  # fmt: skip
    assert next(m for m in parsed.messages if m.line == 14).request_id == f"{CODEX_SESSION}:failed:14"
    counts = count_usage(parsed.messages)
    assert (counts["requests"], counts["message_error"], counts["input_tokens"]) == (1 + 3, 4, 5200 - 4096)


def test_openclaw_counts_each_failed_attempt_with_its_zero_usage():
    parsed = parse_file(DATA / OPENCLAW)
    model = "claude-opus-4-7"
    assert failures(parsed.messages) == [(4, True, model), (5, False, model), (8, True, model)]
    failed = next(m for m in parsed.messages if m.line == 4)
    assert (failed.request_id, failed.input_tokens, failed.output_tokens, failed.finish_reason) == (
        "f0000003", 0, 0, "error",
    )  # fmt: skip
    assert count_usage(parsed.messages)["requests"] == 1 + 2


def test_opencode_counts_an_api_error_but_not_a_missing_key(tmp_path):
    parsed = parse_file(sources(home(tmp_path))[TOP])
    errors = [(m.metadata["name"], m.request_id is not None, m.model) for m in parsed.messages if m.role == "error"]
    assert errors == [
        ("APIError", True, "claude-sonnet-4-5"),  # 529
        ("ProviderAuthError", False, None),  # no API key: nothing was sent
        ("APIError", True, "gpt-5"),  # 401
    ]
    assert requests_by_model(parsed.messages) == {"claude-sonnet-4-5": 4 + 1, "gpt-5": 1}


# -- read in pieces, and imported ------------------------------------------------------------------------------------
@pytest.mark.parametrize("relative", SAMPLES, ids=lambda p: p.parts[0])
def test_a_log_of_failed_calls_read_in_pieces_gives_what_one_pass_gives(relative, tmp_path):
    data = (DATA / relative).read_bytes()
    whole = parse_file(copy_log(relative, tmp_path / "whole"))
    for cut in cut_points(data):
        first, second = parse_in_two_steps(relative, tmp_path / str(cut), cut)
        got = as_stored(first.ingest_items() + second.ingest_items())
        assert normalised(got) == normalised(whole.ingest_items()), f"cut at byte {cut}"
    path = copy_log(relative, tmp_path / "chunks")
    for budget in (1, 600):
        items, offset, carry = [], 0, None
        while True:
            chunk = parse_file(path, start_offset=offset, carry=carry, max_bytes=budget)
            items += chunk.ingest_items()
            offset, carry = chunk.end_offset, json.loads(json.dumps(chunk.carry))
            if chunk.complete:
                break
        assert normalised(as_stored(items)) == normalised(whole.ingest_items()), budget


def test_failed_calls_are_imported_as_requests_of_their_models_once(api, tmp_path):
    for relative in SAMPLES:
        copy_log(relative, tmp_path)
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert (summary.files_imported, summary.sessions_created) == (5, 5)
    for relative in SAMPLES:
        parsed = parse_file(tmp_path / relative)
        session = Session.objects.get(tenant=api.tenant, agent_session_id=parsed.session.agent_session_id)
        stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
        expected = count_usage(parsed.messages)
        assert {name: stats[name] for name in expected} == expected, relative
        assert session_count_drift(session=session) == {}
    rows = api.get("/api/v1/stats/", {"group_by": "model"}).json()["results"]
    by_model = {row["key"]: row["requests"] for row in rows if row["requests"]}  # prompts are under no model
    # Every failed call under the model called: Claude Code 2 + 4, Qwen Code 1 + 3, Gemini CLI 1 + 2, Codex
    # 1 + 3, OpenClaw 1 + 2.
    assert by_model == {SONNET: 6, "qwen3-coder-plus": 4, "gemini-2.5-pro": 3, "gpt-5-codex": 4, "claude-opus-4-7": 3}
    failed = LlmRequest.objects.filter(session__tenant=api.tenant, message_set__role="error").distinct().count()
    assert failed == 4 + 3 + 2 + 3 + 2
    assert rollup_drift(tenant=api.tenant) == {"hourly": [], "daily": [], "session_model": []}
    again = import_path(tenant=api.tenant, path=tmp_path)  # nothing twice
    assert (again.messages, again.requests) == (0, 0)


# -- OpenTelemetry: the event of a failed call and its log line count once ----------------------------------------
SESSION = "9b2e4c6a-3f1d-4e8b-a7c5-2d0f1e3b5a79"  # the Claude Code sample's session


def api_error_event(*, when: str, prompt_id: str, status: str, error: str, attempt: str) -> dict:
    """Claude Code's `claude_code.api_error` event (the recorded payload's, retold) for the sample session."""
    payload = copy.deepcopy(logs_payload())
    record = next(r for r in records(payload) if r["body"]["stringValue"] == "claude_code.api_error")
    for key, value in (
        ("session.id", SESSION), ("event.timestamp", when), ("prompt.id", prompt_id), ("status_code", status),
        ("error", error), ("attempt", attempt), ("model", SONNET),
    ):  # fmt: skip
        set_attribute(record, key, {"stringValue": value})
    payload["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = [record]
    return payload


# The 401 that ended the third round (line 10 of the log; its retried 429, line 8, has no event) and a connection
# error Claude Code reports with no status (no answer: raw telemetry, like the log's line 12).
EVENTS = [
    api_error_event(
        when="2026-03-02T10:07:05.120Z",
        prompt_id="5e7a0c1d-0003-4000-8000-0000000000a3",
        status="401",
        error="OAuth access token has expired. Re-authenticate to continue.",
        attempt="2",
    ),
    api_error_event(
        when="2026-03-02T10:09:30.050Z",
        prompt_id="5e7a0c1d-0004-4000-8000-0000000000a4",
        status="undefined",
        error="Connection error.",
        attempt="1",
    ),
]


@pytest.mark.parametrize("events_first", [True, False], ids=["events first", "log first"])
def test_a_failed_calls_event_and_its_log_line_count_once(db, tmp_path, events_first):
    log = copy_log(CLAUDE, tmp_path)
    alone = make_client("alone")
    import_path(tenant=alone.tenant, path=log)
    session_alone = Session.objects.get(tenant=alone.tenant)
    expected = alone.get(f"/api/v1/sessions/{session_alone.pk}/stats/").json()
    assert (expected["requests"], expected["message_error"]) == (6, 6)

    acme = make_client("acme")
    steps = [lambda: import_path(tenant=acme.tenant, path=log)]
    steps.insert(0 if events_first else 1, lambda: [post(Client(), "/v1/logs", e, key=acme.key) for e in EVENTS])
    for step in steps:
        step()
    session = Session.objects.get(tenant=acme.tenant)
    assert acme.get(f"/api/v1/sessions/{session.pk}/stats/").json() == expected
    assert session_count_drift(session=session) == {} and rollup_drift(tenant=acme.tenant)["hourly"] == []
    (last_attempt,) = Message.objects.filter(session=session, role="error", metadata__status=401)
    if events_first:  # the event's message, completed by the log's line
        assert (last_attempt.metadata["source"], last_attempt.metadata["completed_by"]) == ("otel", "log")
        assert last_attempt.metadata["attempt"] == "2" and last_attempt.external_id.startswith("otel:")
    else:  # the log's message; the event is kept as telemetry paired with it
        assert TelemetryRecord.objects.get(tenant=acme.tenant, message=last_attempt).name == "claude_code.api_error"
    unanswered = TelemetryRecord.objects.get(tenant=acme.tenant, attributes__status_code="undefined")
    assert unanswered.message_id is None  # no answer: kept as telemetry, never counted
