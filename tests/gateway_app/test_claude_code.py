"""Claude Code, the real CLI, with `ANTHROPIC_BASE_URL` pointing at the gateway, against the stand-in upstream on
loopback (issue 33, item 7): what it prints is the stand-in's answer, and each of its calls is a completed turn with
the stand-in's usage in the gateway's default session of the key.

The CLI is `ACE_CLAUDE_CODE` (the `claude` executable; .ci/run installs the pinned version, CLAUDE_CODE_VERSION
there, into a cache folder and sets it) or `claude` on the PATH. Without it the tests are skipped, unless
`ACE_REQUIRE_CLAUDE_CODE=1` (CI), where they fail. It runs with a HOME of its own in a temporary folder, an
environment of only what is set here (no proxy, no key of the developer's), and no traffic but to the gateway.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gateway_app.models import Provider
from sessions_app.models import Message, Session, Tenant, Turn
from sessions_app.services.apikeys import apikey_create
from tests.support.stand_in_upstream import (
    DEFAULT_CHUNKS,
    DEFAULT_THINKING,
    StandInUpstream,
    answer_text,
    thinking_text,
)

UPSTREAM_KEY = "sk-ant-upstream-secret-123"
MODEL = "claude-sonnet-4-5"  # one of the stand-in's models; Claude Code sends it as given
# What the stand-in reports as cached for every call (the prompt's own words are the input tokens).
CACHE = "cache_read=1200;cache_write=300;cache_write_1h=45"
RUN_SECONDS = 60
PROMPT = "Say hello to the gateway."


def claude_code() -> str:
    """The CLI's path, or the test is skipped (failed when ACE_REQUIRE_CLAUDE_CODE=1)."""
    path = os.environ.get("ACE_CLAUDE_CODE") or shutil.which("claude")
    if path and Path(path).is_file() and os.access(path, os.X_OK):
        return path
    message = (
        f"Claude Code is not installed (ACE_CLAUDE_CODE={os.environ.get('ACE_CLAUDE_CODE', '')!r}, no `claude` on the"
        " PATH): `npm install --prefix DIR @anthropic-ai/claude-code@VERSION` and ACE_CLAUDE_CODE=DIR/node_modules/"
        ".bin/claude (.ci/run does, with the pinned version)"
    )
    if os.environ.get("ACE_REQUIRE_CLAUDE_CODE") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def cli():
    return claude_code()


@pytest.fixture
def upstream():
    with StandInUpstream(api_key=UPSTREAM_KEY, defaults=CACHE) as stand_in:
        yield stand_in


@pytest.fixture
def setup(gateway, upstream):
    """An Open ACE key of the tenant 'acme' and its Anthropic provider 'claude', the stand-in."""
    key = apikey_create(tenant_name="acme").plain_key
    provider = Provider(
        tenant=Tenant.objects.get(name="acme"), name="claude", kind="anthropic", base_url=upstream.anthropic_base_url
    )
    provider.api_key = UPSTREAM_KEY
    provider.save()
    return key


def run_claude(
    cli: str, home: Path, base_url: str, credentials: dict, *arguments: str, prompt: str = PROMPT, ok: bool = True
) -> dict:
    """`claude -p PROMPT --output-format json` as a script runs it, with nothing on the way but the gateway; its
    result (JSON). `credentials` is its environment's key (and any other variable of the test's)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),  # its settings, sessions and logs land here
        "XDG_CONFIG_HOME": str(home / ".config"),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": base_url,
        **credentials,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports, update checks
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "IS_SANDBOX": "1",
    }
    workdir = home / "project"
    workdir.mkdir(exist_ok=True)
    done = subprocess.run(
        [cli, "-p", prompt, "--output-format", "json", "--model", MODEL, *arguments],
        env=env,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    said = f"claude exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert (done.returncode == 0) == ok, said
    return json.loads(done.stdout)


def ledger_usage(usage: dict) -> tuple:
    """The stand-in's Anthropic usage in the ledger's measures: input, output, cache read, writes (all, 5m, 1h)."""
    return (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cache_read_input_tokens"],
        usage["cache_creation_input_tokens"],
        usage["cache_creation"]["ephemeral_5m_input_tokens"],
        usage["cache_creation"]["ephemeral_1h_input_tokens"],
    )


def recorded_usage(answer: Message) -> tuple:
    return (
        answer.input_tokens,
        answer.output_tokens,
        answer.cache_read_tokens,
        answer.cache_creation_tokens,
        answer.cache_creation_5m_tokens,
        answer.cache_creation_1h_tokens,
    )


@pytest.mark.parametrize(
    "credentials",
    [
        pytest.param(lambda key: {"ANTHROPIC_API_KEY": key}, id="x-api-key"),
        pytest.param(lambda key: {"ANTHROPIC_AUTH_TOKEN": key}, id="bearer"),
    ],
)
def test_claude_code_through_the_gateway(cli, gateway, upstream, setup, tmp_path, credentials):
    key = setup
    result = run_claude(cli, tmp_path, gateway.base_url("claude", "anthropic"), credentials(key))

    # What Claude Code printed is the stand-in's answer, relayed.
    assert result["is_error"] is False, result
    assert result["result"] == answer_text()
    calls = upstream.received
    assert [(r.method, r.path, r.query, r.status, r.outcome) for r in calls] == [
        ("POST", "/v1/messages", "beta=true", 200, "complete")
    ]
    call = calls[0]
    assert call.stream and call.json["thinking"]["type"] == "enabled"
    # The upstream got the provider's key, never the client's, and Claude Code's own headers as they were.
    assert call.headers["x-api-key"] == UPSTREAM_KEY
    assert "authorization" not in call.headers
    assert key not in json.dumps(call.headers)
    assert call.headers["anthropic-version"] == "2023-06-01"
    assert "claude-code-20250219" in call.headers["anthropic-beta"]
    assert call.headers["user-agent"].startswith("claude-cli/")
    # Claude Code's own count of the usage is what the stand-in reported.
    assert (result["usage"]["input_tokens"], result["usage"]["output_tokens"]) == (
        call.usage["input_tokens"],
        call.usage["output_tokens"],
    )
    assert result["usage"]["cache_read_input_tokens"] == 1200

    # The call is a completed turn, with the stand-in's usage, in the key's default session of the gateway.
    assert gateway.drained()
    turn = Turn.objects.get()
    assert turn.status == "completed"
    session = Session.objects.get(pk=turn.session_id)
    assert session.tool == "gateway"
    assert session.user_id == json.loads(call.json["metadata"]["user_id"])["device_id"]
    assert session.agent_session_id == call.headers["x-claude-code-session-id"] == result["session_id"]
    answer = Message.objects.get(pk=turn.assistant_message_id)
    assert answer.content == answer_text()
    assert answer.thinking == thinking_text()
    assert answer.model == MODEL
    # Output: the answer's pieces and the thinking's (Claude Code asks for thinking); the cache as the stand-in had it.
    output = DEFAULT_CHUNKS + DEFAULT_THINKING
    assert (
        recorded_usage(answer) == ledger_usage(call.usage) == (call.usage["input_tokens"], output, 1200, 345, 300, 45)
    )
    question = Message.objects.get(pk=turn.user_message_id)
    assert question.content.endswith(PROMPT)  # after the <system-reminder> blocks Claude Code puts before it
    session.refresh_from_db()
    assert (session.requests, session.input_tokens, session.cache_read_tokens, session.cache_creation_tokens) == (
        1,
        call.usage["input_tokens"],
        1200,
        345,
    )


def test_claude_code_agent_loop_in_a_named_session(cli, gateway, upstream, setup, tmp_path):
    """Claude Code's loop: the stand-in calls its tool, Claude Code answers with the tool's result, the stand-in
    answers. Two calls, two turns, in the session its ANTHROPIC_CUSTOM_HEADERS name (X-ACE-Session, X-ACE-User)."""
    upstream.queue("tool_call=1", "")  # the first call ends with a call of the request's first tool, Read here
    environment = {
        "ANTHROPIC_API_KEY": setup,
        "ANTHROPIC_CUSTOM_HEADERS": "X-ACE-Session: claude-code-loop\nX-ACE-User: alice",
    }
    result = run_claude(cli, tmp_path, gateway.base_url("claude", "anthropic"), environment, "--tools", "Read")

    assert result["result"] == answer_text()
    assert result["num_turns"] == 2
    first, second = upstream.received
    assert [r.json["tools"][0]["name"] for r in (first, second)] == ["Read", "Read"]
    (tool_use,) = [block for block in second.json["messages"][-2]["content"] if block["type"] == "tool_use"]
    assert tool_use["name"] == "Read" and tool_use["input"] == {"query": "stand-in"}
    tool_result = second.json["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == tool_use["id"]
    assert tool_result["is_error"] is True  # Read wants a file_path: Claude Code says so to the model
    for call in (first, second):
        assert not [name for name in call.headers if name.startswith("x-ace-")]  # ours, not forwarded
        assert call.headers["x-api-key"] == UPSTREAM_KEY

    assert gateway.drained()
    session = Session.objects.get()
    assert (session.tool, session.agent_session_id, session.user_id) == ("gateway", "claude-code-loop", "alice")
    turns = list(Turn.objects.filter(session=session).order_by("started_at"))
    assert [t.status for t in turns] == ["completed", "completed"]
    answers = [Message.objects.get(pk=t.assistant_message_id) for t in turns]
    assert [a.finish_reason for a in answers] == ["tool_calls", "stop"]
    assert [(c["id"], c["name"], c["input"]) for c in answers[0].tool_calls] == [
        (tool_use["id"], "Read", {"query": "stand-in"})
    ]
    assert answers[1].content == answer_text()
    for answer, call in zip(answers, (first, second), strict=True):
        assert recorded_usage(answer) == ledger_usage(call.usage)
    question = Message.objects.get(pk=turns[1].user_message_id)
    assert "InputValidationError" in question.content  # the second turn's new input is the tool's result
    session.refresh_from_db()
    assert (session.requests, session.cache_read_tokens) == (2, 2400)


def test_claude_code_context_counts_tokens_through_the_gateway(cli, gateway, upstream, setup, tmp_path):
    """`/context` asks count_tokens for each part of its context: passed through, with the provider's key; not
    recorded."""
    result = run_claude(
        cli, tmp_path, gateway.base_url("claude", "anthropic"), {"ANTHROPIC_API_KEY": setup}, prompt="/context"
    )

    assert "## Context Usage" in result["result"]
    calls = upstream.received
    assert len(calls) > 5
    assert {(r.method, r.path, r.query, r.status) for r in calls} == {
        ("POST", "/v1/messages/count_tokens", "beta=true", 200)
    }
    assert {r.headers["x-api-key"] for r in calls} == {UPSTREAM_KEY}
    assert gateway.drained()
    assert not Turn.objects.exists() and not Session.objects.exists()


def test_claude_code_shows_the_gateway_refusal(cli, gateway, upstream, setup, tmp_path):
    """An unknown Open ACE key: the gateway's 401, in Anthropic's error shape, is what Claude Code reports."""
    environment = {"ANTHROPIC_API_KEY": "ace_not-a-key-of-this-server", "CLAUDE_CODE_MAX_RETRIES": "0"}
    result = run_claude(cli, tmp_path, gateway.base_url("claude", "anthropic"), environment, ok=False)

    assert result["is_error"] is True
    assert result["api_error_status"] == 401
    assert "Unknown or revoked Open ACE API key." in json.dumps(result)
    assert upstream.received == []
    assert not Turn.objects.exists()
