"""Nothing pending in silence: an import stores every response in the bytes it read, at once, and completes it in
place when its later lines arrive — exact after every import, never a second message or request.

A live Claude Code session is imported as it is written: the real-shaped samples (tests/agent_logs.py)
cut at every line boundary, in the middle of every line and just before every newline (inside streamed
responses too), and imported after each cut. The oracle is `accounting.count_usage` over a one-pass parse
of the bytes written so far.
"""

import io
import json
from collections import defaultdict

import pytest
from django.core.management import call_command

from ingest_app.importers import parse_file
from ingest_app.pipeline import import_path
from memory_app.models import MessageEmbedding
from sessions_app.accounting import SessionAccount, count_usage, hour_of, message_tokens
from sessions_app.models import LlmRequest, Message, Session, UsageHourly
from sessions_app.schema import MEASURE_FIELDS, ROLLUP_FIELDS
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from sessions_app.services.messages import AMENDED_FIELDS, messages_append, messages_append_to_sessions
from sessions_app.signals import messages_amended
from tests.ingest_app.test_importer_parsers import (
    CLAUDE,
    CLAUDE_STREAMING,
    DATA,
    cut_points,
    line_start,
)
from tests.ingest_app.test_imports import COUNTERS, SUMMARY_LINE, stats
from tests.support.agent_logs import copy_log
from tests.support.api import make_client


def account_of(messages) -> SessionAccount:
    account = SessionAccount()
    for message in messages:
        account.add(message.to_ingest())
    return account


def stored_requests(session) -> dict[str, tuple]:
    return {
        r.request_id: tuple(getattr(r, name) for name in MEASURE_FIELDS)
        for r in LlmRequest.objects.filter(session=session)
    }


def expected_requests(account: SessionAccount) -> dict[str, tuple]:
    return {key: tuple(request[name] for name in MEASURE_FIELDS) for key, request in account.requests.items()}


def stored_rollups(tenant) -> dict[tuple, list[int]]:
    rows = defaultdict(lambda: [0] * len(ROLLUP_FIELDS))
    for row in UsageHourly.objects.filter(tenant=tenant):
        tally = rows[(row.hour, row.model)]
        for position, name in enumerate(ROLLUP_FIELDS):
            tally[position] += getattr(row, name)
    return {key: tally for key, tally in rows.items() if any(tally)}


def stored_messages(session) -> list[dict]:
    fields = ["external_id", "role", "request_id", *AMENDED_FIELDS, *MEASURE_FIELDS]
    return list(Message.objects.filter(session=session).order_by("seq").values(*fields))


def as_rows(items: list[dict]) -> list[dict]:
    """Ingest items as the stored rows' fields (blank where the item says nothing), in seq order."""
    defaults = {"request_id": "", "content": "", "thinking": "", "tool_calls": None, "finish_reason": ""}
    rows = []
    for item in items:
        row = {"external_id": item["external_id"], "role": item["role"], "metadata": item["metadata"]}
        for name, default in defaults.items():
            row[name] = item.get(name, default)
        row.update(zip(MEASURE_FIELDS, message_tokens(item), strict=True))  # as stored: a lone write is 5-minute
        rows.append(row)
    return rows


def final_stop_reason_on_every_line(data: bytes) -> bytes:
    """The session as versions that write a response's final `stop_reason` on each of its lines log it."""
    final = {}
    lines = data.splitlines(keepends=True)
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        records.append(record)
        message = record.get("message") if isinstance(record, dict) else None
        if isinstance(message, dict) and message.get("stop_reason"):
            final[message.get("id")] = message["stop_reason"]
    out = []
    for line, record in zip(lines, records, strict=True):
        message = record.get("message") if isinstance(record, dict) else None
        if isinstance(message, dict) and message.get("id") in final:
            message["stop_reason"] = final[message["id"]]
            line = json.dumps(record, ensure_ascii=False).encode() + b"\n"
        out.append(line)
    return b"".join(out)


LIVE = {
    "5f0c2a9e": (CLAUDE, lambda data: data),
    "6a1d3b8f": (CLAUDE_STREAMING, lambda data: data),
    "stop-reason-on-every-line": (CLAUDE, final_stop_reason_on_every_line),
}


@pytest.mark.parametrize("variant", LIVE)
def test_a_live_session_imported_as_it_grows_is_exact_after_every_import(api, other_api, variant, tmp_path, settings):
    settings.ACE_IMPORT_IDLE_SECONDS = 3600  # the file is being written: never flushed as idle
    relative, shape = LIVE[variant]
    data = shape((DATA / relative).read_bytes())
    path = copy_log(relative, tmp_path, upto=0)
    streamed = 0
    for cut in cut_points(data):
        path.write_bytes(data[:cut])  # what the agent has written so far
        summary = import_path(tenant=api.tenant, path=path)
        one_pass = parse_file(path, flush=True)  # every response of these bytes, as far as it is written
        session = Session.objects.filter(tenant=api.tenant).first()
        if not one_pass.messages:
            assert session is None or session.messages == 0
            continue
        account = account_of(one_pass.messages)
        where = f"after an import of {cut} bytes"
        assert stats(api, session) == {name: count_usage(one_pass.messages)[name] for name in COUNTERS}, where
        assert stored_requests(session) == expected_requests(account), where
        assert stored_rollups(api.tenant) == {
            (hour_of(hour), model): tally[: len(ROLLUP_FIELDS)] for (hour, model), tally in account.rollups.items()
        }, where
        assert stored_messages(session) == as_rows(one_pass.ingest_items()), where  # one row per response
        assert session_count_drift(session=session) == {} and not any(rollup_drift(tenant=api.tenant).values())
        assert SUMMARY_LINE.match(summary.line()), summary.line()
        streamed += summary.streaming

    assert streamed > 0 or b'"stop_reason":null' not in data  # responses cut while streaming were said so
    # The same file imported in one pass (by another tenant) is the same, row for row.
    one_pass = copy_log(relative, tmp_path / "one-pass")
    one_pass.write_bytes(data)
    import_path(tenant=other_api.tenant, path=one_pass)
    (whole,) = Session.objects.filter(tenant=other_api.tenant)
    assert stored_messages(session) == stored_messages(whole) and stats(api, session) == stats(other_api, whole)


def test_ace_import_right_after_copying_live_logs_leaves_no_response_out(db, tmp_path):
    # A copy of a tree taken while two sessions were streaming: each file ends inside a response.
    logs = tmp_path / "logs"
    copy_log(CLAUDE, logs, upto=line_start(DATA / CLAUDE, 9))  # msg_01's last line not written
    copy_log(CLAUDE_STREAMING, logs, upto=line_start(DATA / CLAUDE_STREAMING, 5))  # msg_P1 open
    for relative in (CLAUDE, CLAUDE_STREAMING):
        (logs / relative).rename(logs / relative)  # (the copy's mtime is now: the files are not idle)
    out = io.StringIO()
    call_command("ace_import", str(logs), "--tenant", "cli", stdout=out)
    line = out.getvalue().splitlines()[-1]

    parsed = [parse_file(logs / relative, flush=True) for relative in (CLAUDE, CLAUDE_STREAMING)]
    responses = sum(1 for result in parsed for m in result.messages if m.role == "assistant")
    assert LlmRequest.objects.filter(tenant__name="cli").count() == responses == 2
    assert line.endswith("; 2 responses still streaming (stored; completed when their last lines arrive)"), line
    assert SUMMARY_LINE.match(line).group("requests") == "2"


def test_an_upload_reports_the_responses_still_streaming(api, tmp_path):
    path = copy_log(CLAUDE_STREAMING, tmp_path, upto=line_start(DATA / CLAUDE_STREAMING, 5))
    with path.open("rb") as handle:
        response = api.post("/api/v1/imports/", {"files": [handle]}, format="multipart")
    body = response.json()
    assert response.status_code == 201 and body["streaming"] == 1 and body["requests"] == 1
    assert body["files"][0]["streaming"] == 1 and "1 response still streaming" in body["summary"]


# -- the message service's amend ------------------------------------------------------------------------


def test_amend_completes_the_stored_message_and_its_request_and_grows_every_counter_by_the_difference(
    api, django_capture_on_commit_callbacks
):
    session = Session.objects.create(tenant=api.tenant, user_id="u1", tool="claude-code")
    first = {"role": "user", "content": "查看天气", "external_id": "p1", "conversation": "c1"}
    partial = {
        "role": "assistant",
        "content": "让我",
        "external_id": "r1",
        "request_id": "msg_1",
        "model": "m",
        "input_tokens": 100,
        "output_tokens": 8,
        "cache_read_tokens": 5000,
        "conversation": "c1",
        "metadata": {"line": 2},
    }
    messages_append(tenant=api.tenant, session_id=session.pk, items=[first, partial])
    amended_signals = []
    messages_amended.connect(
        lambda sender, amended, **kw: amended_signals.append(amended), weak=False, dispatch_uid="t"
    )
    complete = {
        **partial,
        "content": "让我查一下 Hangzhou 的 forecast",
        "thinking": "look it up",
        "tool_calls": [{"id": "toolu_1", "name": "WebFetch", "arguments": {}}],
        "finish_reason": "tool_use",
        "output_tokens": 61,
        "metadata": {"line": 2, "lines": [2, 4]},
    }
    session.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        (result,) = messages_append_to_sessions(appends=[(session, [complete])], amend=True)
    messages_amended.disconnect(dispatch_uid="t")
    stored = Message.objects.get(session=session, external_id="r1")
    assert [[entry.message_ids for entry in signal] for signal in amended_signals] == [[[stored.pk]]]
    assert (result.created, result.amended, result.new) == (0, 1, [False])
    assert result.counters["output_tokens"] == 53 and result.counters["total_tokens"] == 53
    assert result.counters["requests"] == 0 and result.counters["messages"] == 0

    stored.refresh_from_db()
    assert (stored.content, stored.thinking, stored.finish_reason, stored.output_tokens) == (
        complete["content"],
        "look it up",
        "tool_use",
        61,
    )
    assert stored.tool_calls == complete["tool_calls"] and stored.metadata == complete["metadata"]
    (request,) = LlmRequest.objects.filter(session=session)
    assert (request.input_tokens, request.output_tokens, request.cache_read_tokens) == (100, 61, 5000)
    counts = stats(api, session)
    assert counts == {name: count_usage([first, complete])[name] for name in COUNTERS}
    assert session_count_drift(session=session) == {} and not any(rollup_drift(tenant=api.tenant).values())
    # Searchable by its new words at once (the update trigger redid its search vector).
    found = api.get(f"/api/v1/sessions/{session.pk}/messages/", {"q": "forecast"}).json()["results"]
    assert [m["external_id"] for m in found] == ["r1"]

    # A version with nothing new changes nothing; a smaller count never shrinks what was counted.
    (again,) = messages_append_to_sessions(appends=[(session, [{**complete, "output_tokens": 30}])], amend=True)
    assert (again.amended, again.counters["output_tokens"]) == (0, 0)
    assert Message.objects.get(pk=stored.pk).output_tokens == 61


def test_through_the_api_a_repeated_external_id_still_returns_the_stored_row_untouched(api, session):
    url = f"/api/v1/sessions/{session.pk}/messages/"
    item = {"role": "assistant", "content": "first", "external_id": "x1", "request_id": "r", "output_tokens": 5}
    first = api.post(url, item, format="json")
    again = api.post(url, {**item, "content": "second", "output_tokens": 50}, format="json")
    assert (first.status_code, again.status_code) == (201, 200) and again.json()["id"] == first.json()["id"]
    assert (again.json()["content"], again.json()["output_tokens"]) == ("first", 5)
    stored = Message.objects.get(session=session, external_id="x1")
    assert (stored.content, stored.output_tokens) == ("first", 5)
    assert api.get(f"{url[: -len('messages/')]}stats/").json()["output_tokens"] == 5


def test_a_response_completed_in_place_is_embedded_again(burst, settings, tmp_path):
    settings.ACE_EMBED_MESSAGES = True
    settings.ACE_IMPORT_IDLE_SECONDS = 3600
    tenant = make_client("embedding-amend").tenant
    data = (DATA / CLAUDE_STREAMING).read_bytes()
    path = copy_log(CLAUDE_STREAMING, tmp_path, upto=line_start(DATA / CLAUDE_STREAMING, 5))
    import_path(tenant=tenant, path=path)
    response = Message.objects.get(tenant=tenant, request_id="msg_P1")
    assert response.content == "Checking both cities."
    burst()
    assert MessageEmbedding.objects.filter(message_id=response.pk).exists()
    before = list(MessageEmbedding.objects.get(message_id=response.pk).embedding)

    # Its last line says more: the stored message is completed, its old vector dropped and made again.
    lines = data.splitlines(keepends=True)
    lines[4] = lines[4].replace(
        b'"tool_use","id":"toolu_S"', b'"text","text":"Shanghai next."},{"type":"tool_use","id":"toolu_S"', 1
    )
    path.write_bytes(b"".join(lines))
    import_path(tenant=tenant, path=path)
    response.refresh_from_db()
    assert response.content == "Checking both cities.\n\nShanghai next."
    burst()
    assert MessageEmbedding.objects.filter(message_id=response.pk).exists()
    assert list(MessageEmbedding.objects.get(message_id=response.pk).embedding) != before


def test_a_record_rewritten_twice_in_one_read_is_one_message_with_its_last_version(api):
    # Gemini CLI's JSONL rewrites a record under the same id; a whole-document log is read again whole.
    session = Session.objects.create(tenant=api.tenant, user_id="u1", tool="gemini-cli")
    versions = [
        {"role": "assistant", "content": "", "external_id": "g1", "request_id": "g1", "input_tokens": 900},
        {"role": "assistant", "content": "Sunny", "external_id": "g1", "request_id": "g1", "output_tokens": 3},
        {"role": "assistant", "content": "Sunny, 25°C", "external_id": "g1", "request_id": "g1", "output_tokens": 7},
        {"role": "system", "content": "note", "external_id": "n1", "total_tokens": 4},
        {"role": "system", "content": "note, longer", "external_id": "n1", "total_tokens": 9},
    ]
    (result,) = messages_append_to_sessions(appends=[(session, versions)], amend=True)
    assert (result.created, result.amended) == (2, 0)  # made in this call: inserted as their last versions
    rows = stored_messages(session)
    assert [(r["content"], r["input_tokens"], r["output_tokens"], r["total_tokens"]) for r in rows] == [
        ("Sunny, 25°C", 900, 7, 900),  # each field its largest value, the total too (rule 3, as for a request)
        ("note, longer", None, None, 9),
    ]
    counts = stats(api, session)
    assert (counts["requests"], counts["messages"], counts["total_tokens"]) == (1, 2, 900 + 9)
    assert session_count_drift(session=session) == {} and not any(rollup_drift(tenant=api.tenant).values())
