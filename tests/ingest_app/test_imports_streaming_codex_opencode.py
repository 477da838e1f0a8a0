"""Nothing pending in silence, for Codex CLI and OpenCode: a session imported while it is written is exact after
every import — every call in what was read is stored at once and completed in place later, never twice.

Codex: the real-shaped rollouts of ingest_app/importers/codex/samples (and a totals-only and a fork variant) cut at
every line boundary, in the middle of every line and just before every newline, imported after each cut. A
call is stored as soon as its first item is read (a request with no tokens yet) and grows when its
`token_count` arrives. OpenCode: the fixture database's rows written again one by one as OpenCode writes them
(a message, then its parts, text half written, tools running then completed, the message completed last),
imported after each write; a step is stored at once without a request and becomes its request when its
`step-finish` arrives.

The oracle is `accounting.count_usage` over a flushed one-pass parse of what is written so far; the stored rows
are those of a one-pass parse (unflushed: a call waiting for its usage says so), and the summary's "still
streaming" count is that parse's `pending`.
"""

import json
import sqlite3
import time
from pathlib import Path

import pytest

from ingest_app.importers import parse_file
from ingest_app.pipeline import import_path, plan
from sessions_app.accounting import count_usage, hour_of
from sessions_app.models import Session
from sessions_app.schema import ROLLUP_FIELDS
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from tests.ingest_app.test_importer_codex import BARE, CCUSAGE, ROLLOUT, line, rollout, token_count, usage
from tests.ingest_app.test_importer_parsers import DATA, cut_points
from tests.ingest_app.test_imports import COUNTERS, SUMMARY_LINE, stats
from tests.ingest_app.test_imports_streaming import (
    account_of,
    as_rows,
    expected_requests,
    stored_messages,
    stored_requests,
    stored_rollups,
)
from tests.ingest_app.test_opencode import home


def assert_exact(api, sessions: list[Session], flushed: list, unflushed: list, where: str) -> None:
    """The stored sessions against one-pass parses of the same sources: counters, requests, roll-ups, rows."""
    messages = [m for result in flushed for m in result.messages]
    account = account_of(messages)
    counts = count_usage(messages)
    totals = {name: sum(stats(api, session)[name] for session in sessions) for name in COUNTERS}
    assert totals == {name: counts[name] for name in COUNTERS}, where
    stored = {}
    for session in sessions:
        stored.update(stored_requests(session))
    assert stored == expected_requests(account), where
    expected_rollups = {(hour, model): tally[: len(ROLLUP_FIELDS)] for (hour, model), tally in account.rollups.items()}
    if any(hour is None for hour, _ in expected_rollups):  # lines without a time (bare rollouts): by model only
        assert by_model(stored_rollups(api.tenant)) == by_model(expected_rollups), where
    else:
        assert stored_rollups(api.tenant) == {(hour_of(h), m): t for (h, m), t in expected_rollups.items()}, where
    rows = [row for session in sessions for row in stored_messages(session)]
    expected_rows = [row for result in unflushed for row in as_rows(result.ingest_items())]
    assert sorted(rows, key=lambda r: r["external_id"]) == sorted(expected_rows, key=lambda r: r["external_id"]), where
    for session in sessions:
        assert session_count_drift(session=session) == {}, where
    assert not any(rollup_drift(tenant=api.tenant).values()), where


def by_model(rollups: dict[tuple, list[int]]) -> dict[str, list[int]]:
    totals: dict[str, list[int]] = {}
    for (_, model), tally in rollups.items():
        totals[model] = [a + b for a, b in zip(totals.get(model, [0] * len(tally)), tally, strict=True)]
    return totals


# -- Codex CLI ----------------------------------------------------------------------------------------------


def totals_only(data: bytes) -> bytes:
    """The rollout as Codex versions that wrote only the session total in `token_count` log it."""
    out = []
    for text in data.splitlines(keepends=True):
        try:
            record = json.loads(text)
        except ValueError:
            out.append(text)
            continue
        info = record.get("payload", {}).get("info") if isinstance(record.get("payload"), dict) else None
        if isinstance(info, dict) and "last_token_usage" in info:
            del info["last_token_usage"]
            text = json.dumps(record).encode() + b"\n"
        out.append(text)
    return b"".join(out)


def fork(tmp_path: Path) -> bytes:
    """A fork: the parent's history copied in one burst, then the fork's own prompt and call (its tool output
    written before the `token_count`, as some versions do)."""
    path = rollout(
        tmp_path / "fork.jsonl",
        [
            line("11:00:00", "session_meta", {"id": "branch", "forked_from_id": "parent", "cwd": "/w/p"}),
            line("11:00:00", "turn_context", {"model": "gpt-5.2"}),
            line("11:00:00", "response_item", {"type": "message", "role": "user", "content": [{"text": "q1"}]}),
            line("11:00:00", "response_item", {"type": "message", "role": "assistant", "content": [{"text": "a1"}]}),
            token_count("11:00:00", None, usage(1000, 100, 200, 20)),
            line("11:00:30", "response_item", {"type": "message", "role": "user", "content": [{"text": "q2"}]}),
            line("11:00:31", "response_item", {"type": "reasoning", "summary": [{"text": "look"}]}),
            line(
                "11:00:32",
                "response_item",
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
            ),  # fmt: skip
            line("11:00:33", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
            line("11:00:35", "response_item", {"type": "message", "role": "assistant", "content": [{"text": "a2"}]}),
            token_count("11:00:35", None, usage(1600, 300, 450, 40)),
            token_count("11:00:36", None, usage(1600, 300, 450, 40)),  # the same info again: no call
        ],
    )
    return path.read_bytes()


FORK = Path("codex/.codex/sessions/2026/01/02/rollout-2026-01-02T11-00-00-branch.jsonl")
CODEX_LIVE = {
    "rollout": (ROLLOUT, lambda data, tmp: data),
    "totals-only": (ROLLOUT, lambda data, tmp: totals_only(data)),
    "bare-2025": (BARE, lambda data, tmp: data),
    "ccusage": (CCUSAGE, lambda data, tmp: data),
    "fork": (FORK, lambda data, tmp: fork(tmp)),
}


@pytest.mark.parametrize("variant", CODEX_LIVE)
def test_a_live_codex_rollout_imported_as_it_grows_is_exact_after_every_import(api, other_api, variant, tmp_path,
                                                                               settings):  # fmt: skip
    settings.ACE_IMPORT_IDLE_SECONDS = 3600  # the file is being written: never flushed as idle
    relative, shape = CODEX_LIVE[variant]
    data = shape((DATA / relative).read_bytes() if (DATA / relative).exists() else b"", tmp_path / "source")
    path = tmp_path / "live" / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    waited = 0
    for cut in cut_points(data):
        path.write_bytes(data[:cut])  # what Codex has written so far
        summary = import_path(tenant=api.tenant, path=path)
        flushed, unflushed = parse_file(path, flush=True), parse_file(path)
        sessions = list(Session.objects.filter(tenant=api.tenant))
        where = f"after an import of {cut} bytes"
        if not flushed.messages:
            assert all(session.messages == 0 for session in sessions), where
            continue
        assert_exact(api, sessions, [flushed], [unflushed], where)
        assert summary.streaming == unflushed.pending, where  # a call stored, waiting for its usage
        assert SUMMARY_LINE.match(summary.line()), summary.line()
        waited += summary.streaming

    # Calls read before their token_count were stored and said so (ccusage's fixture has token_counts only).
    assert waited > 0 or variant == "ccusage"
    # The same file imported in one pass (by another tenant) is the same, row for row.
    whole = tmp_path / "one-pass" / relative
    whole.parent.mkdir(parents=True)
    whole.write_bytes(data)
    import_path(tenant=other_api.tenant, path=whole)
    (live,), (one,) = Session.objects.filter(tenant=api.tenant), Session.objects.filter(tenant=other_api.tenant)
    assert stored_messages(live) == stored_messages(one) and stats(api, live) == stats(other_api, one)


def test_an_archived_2025_rollout_uploaded_just_written_has_every_call(api, tmp_path):
    # A bare rollout has no usage at all: its last call is stored at once, and counted, though not idle.
    path = tmp_path / BARE
    path.parent.mkdir(parents=True)
    path.write_bytes((DATA / BARE).read_bytes())
    with path.open("rb") as handle:
        body = api.post("/api/v1/imports/", {"files": [handle]}, format="multipart").json()
    assert (body["messages"], body["requests"], body["streaming"]) == (4, 2, 1)
    assert "1 response still streaming" in body["summary"]


# -- OpenCode -----------------------------------------------------------------------------------------------


def half(text: str) -> str:
    return text[: len(text) // 2]


def writes_of(rows: dict) -> list[tuple[str, tuple]]:
    """The fixture's rows as OpenCode writes them while the sessions run, one write at a time: a session row
    before its first message; an assistant message first without `completed`, `error`, `finish` and tokens;
    then its parts in order — text and reasoning half written, then whole; a tool pending, running, then
    done — and last the message as it ends."""
    writes = []
    sessions = {row["id"]: row for row in rows["session"]}
    started: set[str] = set()
    parts_of: dict[str, list[dict]] = {}
    for part in rows["part"]:
        parts_of.setdefault(part["message_id"], []).append(part)
    for message in sorted(rows["message"], key=lambda m: (m["time_created"], m["id"])):
        if message["session_id"] not in started:
            started.add(message["session_id"])
            writes.append(("session", sessions[message["session_id"]]))
        data = json.loads(message["data"])
        if data.get("role") == "assistant":
            opening = {key: value for key, value in data.items() if key not in ("error", "finish")}
            opening["time"] = {"created": data["time"]["created"]}
            opening["tokens"] = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
            opening["cost"] = 0
            writes.append(("message", {**message, "data": json.dumps(opening)}))
        else:
            writes.append(("message", message))
        for part in sorted(parts_of.get(message["id"], []), key=lambda p: p["id"]):
            body = json.loads(part["data"])
            if body.get("type") in ("text", "reasoning") and len(body.get("text") or "") > 1:
                writes.append(("part", {**part, "data": json.dumps({**body, "text": half(body["text"])})}))
            elif body.get("type") == "tool" and isinstance(body.get("state"), dict):
                state = body["state"]
                pending = {"status": "pending", "input": {}, "raw": ""}
                running = {"status": "running", "input": state.get("input"), "time": {"start": 0}}
                for early in (pending, running):
                    writes.append(("part", {**part, "data": json.dumps({**body, "state": early})}))
            writes.append(("part", part))
        if data.get("role") == "assistant":
            writes.append(("message", message))
    return writes


def test_a_live_opencode_session_imported_as_its_rows_are_written_is_exact_after_every_import(
    api, other_api, tmp_path, settings
):
    settings.ACE_IMPORT_IDLE_SECONDS = 3600  # OpenCode is running: nothing is flushed as idle
    finished = home(tmp_path / "finished") / "opencode.db"
    with sqlite3.connect(finished) as connection:
        connection.row_factory = sqlite3.Row
        rows = {table: [dict(row) for row in connection.execute(f"SELECT * FROM {table}")]  # noqa: S608
                for table in ("session", "message", "part")}  # fmt: skip
    db = home(tmp_path / "live") / "opencode.db"
    with sqlite3.connect(db) as connection:
        for table in ("part", "message", "session"):
            connection.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed names
    connection.close()
    now = int(time.time() * 1000)
    streamed = 0
    writes = writes_of(rows)
    for step, (table, row) in enumerate(writes, start=1):
        row = {**row, "time_updated": now + step}  # what the store's stat sees change (the data keeps its times)
        with sqlite3.connect(db) as connection:
            columns = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            connection.execute(f"INSERT OR REPLACE INTO {table} ({columns}) VALUES ({marks})", tuple(row.values()))  # noqa: S608
            if table != "session":
                connection.execute("UPDATE session SET time_updated = ? WHERE id = ?", (now + step, row["session_id"]))
        connection.close()
        summary = import_path(tenant=api.tenant, path=tmp_path / "live")
        sources = plan.log_files(tmp_path / "live")
        flushed = [parse_file(source, flush=True) for source in sources]
        unflushed = [parse_file(source) for source in sources]
        sessions = list(Session.objects.filter(tenant=api.tenant))
        where = f"after write {step} of {len(writes)} ({table} {row['id']})"
        assert_exact(api, sessions, flushed, unflushed, where)
        assert summary.streaming == sum(result.pending for result in unflushed), where
        assert SUMMARY_LINE.match(summary.line()), summary.line()
        streamed += summary.streaming

    assert streamed > 0  # steps were stored while they streamed, and said so
    assert sum(result.pending for result in unflushed) == 0
    # The finished database imported in one go (by another tenant) is the same.
    import_path(tenant=other_api.tenant, path=tmp_path / "finished")
    live = {s.agent_session_id: s for s in Session.objects.filter(tenant=api.tenant)}
    whole = {s.agent_session_id: s for s in Session.objects.filter(tenant=other_api.tenant)}
    assert live.keys() == whole.keys()
    for key, session in live.items():
        assert stats(api, session) == stats(other_api, whole[key]), key
        by_id = sorted(stored_messages(session), key=lambda r: r["external_id"])
        assert by_id == sorted(stored_messages(whole[key]), key=lambda r: r["external_id"]), key
