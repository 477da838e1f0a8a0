"""A call's request id is the provider's id plus where it sits (LogParser.request_key): two calls never merge
because a provider reused an id (OpenAI-compatible servers such as Ollama answer `chatcmpl-<small number>`),
the same bytes give the same ids however they are read, and a copy of a call in another file counts once.

The sessions are the real-shaped samples of the importers (tests/agent_logs.py), their ids re-drawn from a small range.
"""

import json
import random
import re
from pathlib import Path

import pytest

from ingest_app.importers import parse_file
from ingest_app.pipeline import import_path
from sessions_app.accounting import count_usage
from sessions_app.models import LlmRequest, Session
from sessions_app.selectors.recount import session_count_drift
from tests.ingest_app.test_importer_parsers import (
    CLAUDE,
    CLAUDE_AGENT,
    DATA,
    OPENCLAW,
    QWEN,
    as_stored,
    cut_points,
)
from tests.support.agent_logs import copy_log

REUSED_IDS = 20  # ids drawn from chatcmpl-0 … chatcmpl-19, as a local server's counter


def claude_session(copies: int) -> bytes:
    """The Claude Code fixture's session `copies` times over (complete lines only), each copy with its own line
    uuids, message ids and request ids: a longer session of the same real shape."""
    data = (DATA / CLAUDE).read_bytes()
    data = data[: data.rindex(b"\n") + 1]
    parts = []
    for copy in range(copies):
        part = re.sub(rb"c0de", b"%02xde" % copy, data)
        part = re.sub(rb'"(msg|req|toolu)_', rb'"\g<1>_%d_' % copy, part)
        parts.append(part)
    return b"".join(parts)


def with_reused_ids(data: bytes, seed: int, rewrite) -> bytes:
    """Each call's provider id replaced by one drawn at random from REUSED_IDS; `rewrite(record, draw)`
    changes one JSON line in place (draw(old id) gives the same new id for the same old one)."""
    rng = random.Random(seed)
    drawn: dict[str, str] = {}

    def draw(old: str) -> str:
        if old not in drawn:
            drawn[old] = f"chatcmpl-{rng.randrange(REUSED_IDS)}"
        return drawn[old]

    lines = []
    for line in data.splitlines(keepends=True):
        try:
            record = json.loads(line)
        except ValueError:
            lines.append(line)  # a corrupt line of the sample stays as it is
            continue
        if isinstance(record, dict):
            rewrite(record, draw)
        lines.append(json.dumps(record, ensure_ascii=False).encode() + b"\n")
    return b"".join(lines)


def claude_ids(record: dict, draw) -> None:
    message = record.get("message")
    if record.get("type") == "assistant" and isinstance(message, dict) and str(message.get("id", "")).startswith("msg"):
        message["id"] = draw(message["id"])
        record.pop("requestId", None)  # an Anthropic-compatible local server gives no request id


def qwen_ids(record: dict, draw) -> None:
    attributes = (record.get("systemPayload") or {}).get("uiEvent") or {}
    if isinstance(attributes.get("response_id"), str):
        attributes["response_id"] = draw(attributes["response_id"])


def openclaw_ids(record: dict, draw) -> None:
    message = record.get("message")
    if isinstance(message, dict) and message.get("role") == "assistant" and message.get("usage"):
        message["responseId"] = draw(record.get("id") or "")


def write(tmp_path: Path, relative: Path, data: bytes) -> Path:
    path = copy_log(relative, tmp_path)
    path.write_bytes(data)
    return path


def requests_of(messages) -> list[str]:
    return [m.request_id for m in messages if m.request_id]


def responses_of(messages) -> list[str]:
    """The request ids of the answered calls (a failed call's error has the line's own id, re-drawn by none)."""
    return [m.request_id for m in messages if m.request_id and m.role == "assistant"]


@pytest.mark.parametrize("seed", range(5))
def test_claude_code_calls_that_reuse_ids_are_one_request_each(seed, tmp_path):
    original = claude_session(copies=8)
    expected = count_usage(parse_file(write(tmp_path / "original", CLAUDE, original)).messages)
    reused = with_reused_ids(original, seed, claude_ids)
    assert len(set(re.findall(rb'"id": "(chatcmpl-\d+)"', reused))) <= REUSED_IDS < expected["requests"]

    result = parse_file(write(tmp_path / "reused", CLAUDE, reused))
    counts = count_usage(result.messages)
    assert counts == expected  # every call its own request, with its own tokens
    assert len(set(requests_of(result.messages))) == counts["requests"] == 7 * 8  # 6 responses and a failed call
    # A counter-like id is qualified by the call's input (the copies of the sample repeat it): then counted.
    assert all(re.fullmatch(r"chatcmpl-\d+@[\d/]+(#\d+)?", request_id) for request_id in responses_of(result.messages))
    assert any("#" in request_id for request_id in responses_of(result.messages))


def test_a_response_streamed_over_several_lines_is_still_one_call_under_a_reused_id(tmp_path):
    reused = with_reused_ids(claude_session(copies=1), 0, claude_ids)
    result = parse_file(write(tmp_path, CLAUDE, reused))
    (first,) = [m for m in result.messages if m.line == 7]  # lines 7-9 share one id: one response
    assert (first.output_tokens, first.metadata["lines"]) == (61, [7, 9])


@pytest.mark.parametrize("seed", range(3))
def test_reading_in_pieces_gives_the_same_request_ids(seed, tmp_path):
    data = with_reused_ids(claude_session(copies=4), seed, claude_ids)
    path = write(tmp_path / "whole", CLAUDE, data)
    whole = as_stored(parse_file(path).ingest_items())
    for budget in (1, 700, 5000):
        items, offset, carry = [], 0, None
        while True:
            chunk = parse_file(path, start_offset=offset, carry=carry, max_bytes=budget)
            items += chunk.ingest_items()
            offset, carry = chunk.end_offset, json.loads(json.dumps(chunk.carry))
            if chunk.complete:
                break
        assert [item.get("request_id") for item in as_stored(items)] == [item.get("request_id") for item in whole]
    for cut in cut_points(data)[::7]:
        growing = write(tmp_path / str(cut), CLAUDE, data[:cut])
        first = parse_file(growing)
        growing.write_bytes(data)
        second = parse_file(growing, start_offset=first.end_offset, carry=json.loads(json.dumps(first.carry)))
        stored = as_stored(first.ingest_items() + second.ingest_items())
        assert [item.get("request_id") for item in stored] == [item.get("request_id") for item in whole], cut


@pytest.mark.parametrize(
    ("relative", "rewrite"), [(QWEN, qwen_ids), (OPENCLAW, openclaw_ids)], ids=["qwen-code", "openclaw"]
)
def test_qwen_code_and_openclaw_calls_that_reuse_ids_are_one_request_each(relative, rewrite, tmp_path):
    data = (DATA / relative).read_bytes()
    expected = count_usage(parse_file(write(tmp_path / "original", relative, data)).messages)
    # Every call answered with the same id: the worst a provider's counter can do.
    reused = with_reused_ids(data, 0, lambda record, draw: rewrite(record, lambda old: "chatcmpl-1"))
    assert reused.count(b'"chatcmpl-1"') >= 3
    result = parse_file(write(tmp_path / "reused", relative, reused))
    assert count_usage(result.messages) == expected
    first_three = responses_of(result.messages)[:3]
    assert len(set(first_three)) == 3 and all(request_id.startswith("chatcmpl-1") for request_id in first_three)


def test_a_subagent_file_that_copies_a_parents_call_counts_it_once(api, tmp_path):
    main = copy_log(CLAUDE, tmp_path)
    agent = copy_log(CLAUDE_AGENT, tmp_path)
    import_path(tenant=api.tenant, path=tmp_path)
    before = LlmRequest.objects.filter(tenant=api.tenant).count()
    assert before == 9  # 8 responses and the failed call

    # The sub-agent file grows a copy of the parent's call msg_03Task (its own line uuid, the same message.id).
    (line,) = [line for line in main.read_bytes().splitlines() if b'"id":"msg_03Task"' in line]
    record = json.loads(line)
    record.update(uuid="c0de0199-0000-4000-8000-000000000199", isSidechain=True, agentId="a1b2c3d")
    with agent.open("ab") as handle:
        handle.write(json.dumps(record).encode() + b"\n")
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert summary.messages == 1 and summary.requests == 0 and summary.tokens["total_tokens"] == 0
    assert LlmRequest.objects.filter(tenant=api.tenant).count() == before


def test_a_subagent_call_that_drew_its_parents_id_is_its_own_request_and_a_copy_counts_once(api, tmp_path):
    main = copy_log(CLAUDE, tmp_path)
    agent = copy_log(CLAUDE_AGENT, tmp_path)
    # The parent's Task call and the sub-agent's own call drew the same number from a server's counter.
    main.write_bytes(main.read_bytes().replace(b'"id":"msg_03Task"', b'"id":"chatcmpl-7"'))
    agent.write_bytes(agent.read_bytes().replace(b'"id":"msg_S1"', b'"id":"chatcmpl-7"'))
    import_path(tenant=api.tenant, path=tmp_path)
    assert LlmRequest.objects.filter(tenant=api.tenant).count() == 9  # two calls, two requests (and 7 more)

    # A copy of the parent's call in the sub-agent's file (its own line uuid; the same id and input): once.
    (line,) = [line for line in main.read_bytes().splitlines() if b'"chatcmpl-7"' in line]
    record = json.loads(line)
    record.update(uuid="c0de0199-0000-4000-8000-000000000199", isSidechain=True, agentId="a1b2c3d")
    with agent.open("ab") as handle:
        handle.write(json.dumps(record).encode() + b"\n")
    summary = import_path(tenant=api.tenant, path=tmp_path)
    assert summary.messages == 1 and summary.requests == 0 and summary.tokens["total_tokens"] == 0
    assert LlmRequest.objects.filter(tenant=api.tenant).count() == 9


ODD_VALUES = [None, "", "x", -1, 2**70, 1.5, float("nan"), [], {}, True, "chatcmpl-3", {"id": "chatcmpl-3"}]


def mutated(data: bytes, rng: random.Random) -> bytes:
    """The sample with lines dropped, repeated, cut or garbled, and odd values put in assistant lines' ids,
    usage and content."""
    lines = data.splitlines(keepends=True)
    out = []
    for line in lines:
        roll = rng.random()
        if roll < 0.05:
            continue
        if roll < 0.1:
            out.append(line[: rng.randrange(len(line) + 1)])
            continue
        if roll < 0.15:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(40))) + b"\n")
            continue
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        message = record.get("message") if isinstance(record, dict) else None
        if isinstance(message, dict) and rng.random() < 0.5:
            target = rng.choice([message, message.get("usage") if isinstance(message.get("usage"), dict) else {}])
            target[rng.choice(["id", "content", "stop_reason", "input_tokens", "output_tokens", "model"])] = rng.choice(
                ODD_VALUES
            )
        out.append(json.dumps(record, ensure_ascii=False, default=str).encode() + b"\n")
        if rng.random() < 0.1:
            out.append(out[-1])  # a line written twice
    return b"".join(out)


@pytest.mark.parametrize("seed", range(40))
def test_mutated_logs_read_in_random_pieces_never_raise(seed, tmp_path):
    rng = random.Random(seed)
    data = mutated(with_reused_ids(claude_session(copies=2), seed, claude_ids), rng)
    path = write(tmp_path, CLAUDE, b"")
    offset, carry, items, written = 0, None, [], 0
    while written < len(data) or offset < written:
        written = min(len(data), written + rng.randrange(1, 4000))
        path.write_bytes(data[:written])
        chunk = parse_file(path, start_offset=offset, carry=carry, max_bytes=rng.choice([None, 1, 500]))
        items += chunk.ingest_items()
        assert chunk.pending >= 0 and all(issue.level in ("error", "warning") for issue in chunk.issues)
        offset, carry = chunk.end_offset, json.loads(json.dumps(chunk.carry))
        if chunk.complete and written == len(data) and offset == chunk.end_offset:
            last = parse_file(path, start_offset=offset, carry=carry, flush=True)
            items += last.ingest_items()
            break
    count_usage(as_stored(items))  # the versions fold as the import stores them


@pytest.mark.parametrize("seed", range(3))
def test_mutated_logs_imported_as_they_grow_keep_the_counters_exact(seed, api, tmp_path, settings):
    settings.ACE_IMPORT_IDLE_SECONDS = 3600
    rng = random.Random(seed)
    data = mutated(with_reused_ids(claude_session(copies=2), seed, claude_ids), rng)
    path = write(tmp_path, CLAUDE, b"")
    written = 0
    while written < len(data):
        written = min(len(data), written + rng.randrange(1, 6000))
        path.write_bytes(data[:written])
        import_path(tenant=api.tenant, path=path)
        for session in Session.objects.filter(tenant=api.tenant):
            assert session_count_drift(session=session) == {}, written
