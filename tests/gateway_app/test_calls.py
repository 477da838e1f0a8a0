"""Calls through the gateway with the official SDKs, against the stand-in upstream: what the client gets, what the
upstream gets, and the chat turn each call leaves (docs/gateway.md)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from datetime import timedelta

import anthropic
import httpx2
import openai
import pytest
from django.utils import timezone

from gateway_app.models import Provider
from memory_app.services import record_create
from sessions_app.models import ApiKey, Budget, Message, Role, Session, Tenant, Turn, TurnStatus
from sessions_app.services.apikeys import apikey_create
from tests.support.stand_in_upstream import StandInUpstream, answer_text, thinking_text
from tests.support.waiting import wait_for

UPSTREAM_KEY = "sk-upstream-0123456789"


@pytest.fixture
def upstream():
    with StandInUpstream(api_key=UPSTREAM_KEY) as server:
        yield server


@pytest.fixture
def key(transactional_db) -> str:
    return apikey_create(tenant_name="acme", name="chat-app").plain_key


def provider(name: str, kind: str, base_url: str, **fields) -> Provider:
    row = Provider(tenant=Tenant.objects.get(name="acme"), name=name, kind=kind, base_url=base_url, **fields)
    row.api_key = UPSTREAM_KEY
    row.save()
    return row


@pytest.fixture
def oa(upstream, key) -> Provider:
    return provider("oa", "openai", upstream.openai_base_url)


@pytest.fixture
def claude(upstream, key) -> Provider:
    return provider("claude", "anthropic", upstream.anthropic_base_url)


def openai_client(gateway, key, **headers) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=gateway.base_url("oa"), default_headers=headers, max_retries=0)


def anthropic_client(gateway, key, **headers) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=key, base_url=gateway.base_url("claude", "anthropic"), default_headers=headers, max_retries=0
    )


@contextlib.contextmanager
def raw_stream(gateway, key, model: str):
    """A streamed OpenAI call read byte by byte, for tests that stop reading part-way."""
    with httpx2.Client(timeout=10) as client:
        body = {"model": model, "messages": [{"role": "user", "content": "Go"}], "stream": True}
        with client.stream(
            "POST", gateway.base_url("oa") + "/chat/completions", headers={"Authorization": f"Bearer {key}"}, json=body
        ) as response:
            yield response


def the_turn(gateway) -> tuple[Turn, Message, Message]:
    assert gateway.drained()
    turn = Turn.objects.select_related("session").get()
    return turn, Message.objects.get(pk=turn.user_message_id), Message.objects.get(pk=turn.assistant_message_id)


# -- OpenAI ---------------------------------------------------------------------------------------------------
def test_an_openai_call_is_answered_and_recorded_with_its_usage(gateway, upstream, oa, key):
    client = openai_client(gateway, key, **{"X-ACE-Session": "chat-42", "X-ACE-User": "alice"})
    reply = client.chat.completions.with_raw_response.create(
        model="gpt-4o;chunks=4;cache_read=3",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Earlier question"},
            {"role": "assistant", "content": "Earlier answer"},
            {"role": "user", "content": "What is new?"},
        ],
    )
    completion = reply.parse()
    assert completion.choices[0].message.content == answer_text(4)

    sent = upstream.last
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the provider's key, never the client's
    assert key not in json.dumps(sent.headers)
    assert not any(name.startswith("x-ace-") for name in sent.headers)

    turn, question, answer = the_turn(gateway)
    assert reply.headers["x-ace-call-id"] == turn.external_id.removeprefix("gw_")
    assert turn.status == TurnStatus.COMPLETED
    assert (turn.session.tool, turn.session.agent_session_id, turn.session.user_id) == ("gateway", "chat-42", "alice")
    assert question.content == "What is new?"  # the new input, not the history
    assert question.thinking == "Be brief."  # the system prompt as forwarded
    assert answer.content == answer_text(4)
    assert answer.finish_reason == "stop"
    usage = sent.usage  # OpenAI counts the cached prompt inside prompt_tokens: input is the rest
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert (answer.input_tokens, answer.cache_read_tokens, answer.output_tokens) == (
        usage["prompt_tokens"] - cached,
        cached,
        usage["completion_tokens"],
    )
    assert answer.metadata["gateway"]["provider"] == "oa"
    session = Session.objects.get(pk=turn.session_id)
    assert (session.requests, session.input_tokens, session.output_tokens) == (
        1,
        answer.input_tokens,
        answer.output_tokens,
    )


def test_a_stream_reaches_the_client_as_sent_and_its_usage_is_asked_for(gateway, upstream, oa, key):
    client = openai_client(gateway, key)
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o;chunks=6;reasoning=2", messages=[{"role": "user", "content": "Stream it"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == answer_text(6)
    assert all(c.choices for c in chunks)  # the usage chunk it did not ask for is not shown
    assert upstream.last.json["stream_options"] == {"include_usage": True}

    turn, _, answer = the_turn(gateway)
    assert turn.status == TurnStatus.COMPLETED
    assert answer.content == answer_text(6)
    assert answer.thinking  # DeepSeek/Qwen-style reasoning_content kept as the answer's thinking
    assert answer.output_tokens == upstream.last.usage["completion_tokens"] > 0
    assert answer.metadata["gateway"]["ttft_ms"] is not None
    # The default session: the key's name, per UTC day.
    assert turn.session.agent_session_id == f"chat-app:{timezone.now():%Y-%m-%d}"


def test_a_client_that_asked_for_usage_gets_it(gateway, upstream, oa, key):
    client = openai_client(gateway, key)
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "Stream it"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage.completion_tokens == upstream.last.usage["completion_tokens"]


def test_tool_calls_are_recorded(gateway, upstream, oa, key):
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
    client = openai_client(gateway, key)
    list(
        client.chat.completions.create(
            model="gpt-4o;tool_call=1", messages=[{"role": "user", "content": "Weather?"}], tools=tools, stream=True
        )
    )
    turn, question, answer = the_turn(gateway)
    assert answer.finish_reason == "tool_calls"
    assert answer.tool_calls[0]["name"] == "weather"
    assert answer.tool_calls[0]["input"] == {"query": "stand-in"}
    assert question.tool_names == ["weather"]


# -- Anthropic ------------------------------------------------------------------------------------------------
def test_an_anthropic_stream_keeps_thinking_and_cache_writes_by_lifetime(gateway, upstream, claude, key):
    client = anthropic_client(gateway, key, **{"X-ACE-Session": "code-1"})
    with client.messages.stream(
        model="claude-sonnet-4-5;chunks=5;cache_read=100;cache_write=40;cache_write_1h=60",
        max_tokens=1000,
        thinking={"type": "enabled", "budget_tokens": 1024},
        system=[{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        messages=[{"role": "user", "content": "Summarise"}],
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == answer_text(5)
    sent = upstream.last
    assert sent.headers["x-api-key"] == UPSTREAM_KEY
    assert sent.json["thinking"] == {"type": "enabled", "budget_tokens": 1024}  # passed through untouched
    assert sent.json["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}

    turn, question, answer = the_turn(gateway)
    assert turn.status == TurnStatus.COMPLETED
    assert question.thinking == "You are terse."
    assert answer.content == answer_text(5)
    assert answer.thinking == thinking_text(3)
    assert (answer.input_tokens, answer.cache_read_tokens) == (sent.usage["input_tokens"], 100)
    assert (answer.cache_creation_tokens, answer.cache_creation_5m_tokens, answer.cache_creation_1h_tokens) == (
        100,
        40,
        60,
    )
    assert answer.output_tokens == sent.usage["output_tokens"]
    assert Session.objects.get(pk=turn.session_id).requests == 1  # counted once


def test_an_anthropic_call_not_streamed(gateway, upstream, claude, key):
    client = anthropic_client(gateway, key)
    message = client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "Hi"}],
        extra_headers={"X-Stand-In": "chunks=3"},
    )
    assert message.content[0].text == answer_text(3)
    _, _, answer = the_turn(gateway)
    assert (answer.content, answer.model, answer.finish_reason) == (answer_text(3), "claude-haiku-4-5", "stop")


# -- failures -------------------------------------------------------------------------------------------------
def test_an_upstream_error_comes_back_in_its_shape_and_is_a_failed_request(gateway, upstream, claude, key):
    client = anthropic_client(gateway, key)
    with pytest.raises(anthropic.RateLimitError) as raised:
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"X-Stand-In": "status=429; retry_after=7"},
        )
    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.body["error"]["type"] == "rate_limit_error"
    turn, _, answer = the_turn(gateway)
    assert turn.status == TurnStatus.FAILED
    assert answer.role == Role.ERROR
    assert "429" in answer.metadata["error"]
    assert Session.objects.get(pk=turn.session_id).requests == 1  # every API call counts


def test_a_stream_the_upstream_breaks_keeps_what_the_client_saw(gateway, upstream, oa, key):
    client = openai_client(gateway, key)
    seen = []
    with pytest.raises(openai.APIError):
        for chunk in client.chat.completions.create(
            model="gpt-4o;chunks=8;break_after=3", messages=[{"role": "user", "content": "Go"}], stream=True
        ):
            seen.extend(c.delta.content or "" for c in chunk.choices)
    turn, _, answer = the_turn(gateway)
    assert turn.status == TurnStatus.FAILED
    assert answer.content == "".join(seen) and answer.content
    assert "broke the stream" in answer.metadata["error"]


def test_a_client_that_leaves_mid_stream_leaves_the_partial_answer(gateway, upstream, oa, key):
    with raw_stream(gateway, key, "gpt-4o;chunks=8;hold_after=3") as response:
        received = b""
        for part in response.iter_raw():
            received += part
            if received.count(b"\n\n") >= 3:  # what comes before the stand-in holds
                break
    # The client is gone once the gateway's server has seen its connection close (the test shares its interpreter
    # with that server: under load the stand-in's next events could otherwise be relayed into the void first).
    assert wait_for(lambda: not gateway.server.server_state.connections, 10)
    upstream.release()
    # The gateway learns of the leaving when its server does: wait for the turn's close, not for idle tasks.
    assert wait_for(lambda: Turn.objects.filter(status=TurnStatus.FAILED).exists(), 20), list(
        Turn.objects.values_list("status", "assistant_message__content", "assistant_message__metadata")
    )
    assert gateway.drained()
    turn = Turn.objects.get()
    answer = Message.objects.get(pk=turn.assistant_message_id)
    assert turn.status == TurnStatus.FAILED
    assert answer.content == answer_text(8)[: len(answer.content)] and answer.content
    assert "client disconnected" in answer.metadata["error"]


# -- before anything is forwarded -----------------------------------------------------------------------------
def test_a_used_up_hard_budget_refuses_before_forwarding(gateway, upstream, oa, key):
    Budget.objects.create(
        tenant=Tenant.objects.get(name="acme"),
        name="monthly",
        scope="tenant",
        period="month",
        limit=1,
        hard_limit=True,
        blocked_until=timezone.now() + timedelta(days=3),
    )
    client = openai_client(gateway, key)
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert raised.value.body["code"] == "budget_exceeded"
    assert int(raised.value.response.headers["retry-after"]) > 86400
    assert upstream.received == []  # nothing forwarded
    assert not Turn.objects.exists()


def test_a_keys_rate_limit_answers_429_with_retry_after(gateway, upstream, oa, key):
    ApiKey.objects.update(requests_per_minute=2)
    client = openai_client(gateway, key)
    for _ in range(2):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert 1 <= int(raised.value.response.headers["retry-after"]) <= 60
    assert len(upstream.received) == 2


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({}, 401, "Send your Open ACE API key"),
        ({"Authorization": "Bearer ace_nope_nope"}, 401, "Unknown or revoked"),
    ],
)
def test_keys_are_checked_and_answered_in_the_providers_shape(gateway, upstream, claude, headers, status, says):
    answer = httpx2.post(
        gateway.base_url("claude", "anthropic") + "/v1/messages",
        headers=headers,
        json={"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]},
    )
    assert answer.status_code == status
    assert answer.json()["type"] == "error" and says in answer.json()["error"]["message"]
    assert upstream.received == []


def test_another_tenants_provider_is_not_found(gateway, upstream, oa):
    other = apikey_create(tenant_name="globex").plain_key
    with pytest.raises(openai.NotFoundError):
        openai_client(gateway, other).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]
        )
    assert upstream.received == []


def test_the_allow_list_and_inactive_providers(gateway, upstream, oa, key):
    Provider.objects.update(allowed_models=["gpt-4o-mini"])
    client = openai_client(gateway, key)
    with pytest.raises(openai.PermissionDeniedError, match="does not allow the model"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert upstream.received == []


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', "'model' is required"),
        (b'{"model": "gpt-4o", "messages": []}', "'messages' is required"),
    ],
)
def test_a_body_it_cannot_read_is_a_400_that_says_why(gateway, upstream, oa, key, body, says):
    answer = httpx2.post(
        gateway.base_url("oa") + "/chat/completions",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        content=body,
    )
    assert answer.status_code == 400
    assert says in answer.json()["error"]["message"]
    assert upstream.received == [] and not Turn.objects.exists()


def test_an_upstream_the_outbound_policy_refuses_is_a_502(gateway, upstream, key, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    provider("oa", "openai", upstream.openai_base_url)
    with pytest.raises(openai.APIStatusError) as raised:
        openai_client(gateway, key).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]
        )
    assert raised.value.status_code == 502
    assert "outbound policy" in raised.value.message
    assert upstream.received == []


# -- memory ---------------------------------------------------------------------------------------------------
def test_memory_inject_adds_the_users_records_to_the_system_prompt(gateway, upstream, oa, key):
    tenant = Tenant.objects.get(name="acme")
    record_create(tenant=tenant, user_id="alice", type="fact", content="Alice lives in Hangzhou and cycles.")
    client = openai_client(gateway, key, **{"X-ACE-User": "alice", "X-ACE-Memory": "inject"})
    client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Where does Alice live?"}],
    )
    system = upstream.last.json["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be kind.\n\n# Memory (Open ACE)")
    assert "Hangzhou" in system["content"]
    _, question, _ = the_turn(gateway)
    assert "Hangzhou" in question.thinking  # the system prompt as forwarded is what the turn keeps


# -- other paths ----------------------------------------------------------------------------------------------
def test_other_paths_of_the_provider_pass_through(gateway, upstream, oa, claude, key):
    models = openai_client(gateway, key).models.list()
    assert models.data
    count = anthropic_client(gateway, key).messages.count_tokens(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "one two three"}]
    )
    assert count.input_tokens > 0
    assert not Turn.objects.exists()  # not calls of a model


def test_system_messages_among_the_messages_are_the_system_prompts(gateway, upstream, claude, key):
    """Claude Code (2.x) puts a system message after the user's, and names its device in metadata.user_id (JSON)."""
    device = "d" * 64
    httpx2.post(
        gateway.base_url("claude", "anthropic") + "/v1/messages",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01", "x-claude-code-session-id": "cc-1"},
        json={
            "model": "claude-sonnet-4-5",
            "max_tokens": 20,
            "system": "You are Claude Code.",
            "metadata": {"user_id": json.dumps({"device_id": device, "account_uuid": "", "session_id": "cc-1"})},
            "messages": [{"role": "user", "content": "Fix the bug"}, {"role": "system", "content": "Mode: plan"}],
        },
    ).raise_for_status()
    turn, question, _ = the_turn(gateway)
    assert question.content == "Fix the bug"
    assert question.thinking == "You are Claude Code.\n\nMode: plan"
    assert (turn.session.user_id, turn.session.agent_session_id) == (device, "cc-1")


def test_images_json_mode_and_tools_reach_the_upstream_untouched(gateway, upstream, oa, key):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()
    body = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}", "detail": "low"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                ],
            }
        ],
        "response_format": {"type": "json_object"},
        "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
        "seed": 7,
    }
    answer = httpx2.post(
        gateway.base_url("oa") + "/chat/completions", headers={"Authorization": f"Bearer {key}"}, json=body
    )
    assert answer.status_code == 200
    assert upstream.last.json == body  # byte for byte what the client sent (nothing injected: not streamed)
    _, question, _ = the_turn(gateway)
    assert question.content == "What is in this picture?"
    inline, linked = question.attachments
    assert inline == {
        "type": "image",
        "media_type": "image/png",
        "bytes": 72,
        "sha256": hashlib.sha256(base64.b64decode(png)).hexdigest(),
    }
    assert linked == {"type": "image", "url": "https://example.com/cat.jpg"}


def test_the_call_that_uses_a_budget_up_is_the_last_one_forwarded(gateway, upstream, oa, key):
    Budget.objects.create(
        tenant=Tenant.objects.get(name="acme"), name="tiny", scope="tenant", period="month", limit=1, hard_limit=True
    )
    client = openai_client(gateway, key)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert gateway.drained()  # its usage counted: the budget is used up
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Again"}])
    assert raised.value.body["code"] == "budget_exceeded"
    assert len(upstream.received) == 1


def test_a_long_stream_is_checkpointed_while_it_streams(gateway, upstream, oa, key, settings):
    settings.ACE_GATEWAY_CHECKPOINT_SECONDS = 0.1
    with raw_stream(gateway, key, "gpt-4o;chunks=8;hold_after=4;chunk_ms=60") as response:
        parts = response.iter_raw()
        next(parts)
        # Held mid-answer upstream: what streamed so far is stored, the turn still open.
        stored = wait_for(
            lambda: Message.objects.filter(role=Role.ASSISTANT)
            .exclude(content="")
            .values_list("content", flat=True)
            .first(),
            10,
        )
        assert stored and answer_text(8).startswith(stored)
        assert Turn.objects.get().status == TurnStatus.STREAMING
        upstream.release()
        for _ in parts:
            pass
    turn, _, answer = the_turn(gateway)
    assert (turn.status, answer.content) == (TurnStatus.COMPLETED, answer_text(8))


def test_redaction_applies_to_what_is_stored_never_to_what_is_forwarded(gateway, upstream, oa, key):
    secret = "AKIAIOSFODNN7EXAMPLE"
    openai_client(gateway, key).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": f"My key is {secret}, is it valid?"}]
    )
    assert secret in upstream.last.json["messages"][0]["content"]  # the model sees what the user wrote
    _, question, _ = the_turn(gateway)
    assert secret not in question.content and "[REDACTED]" in question.content


def test_a_malformed_event_from_the_upstream_is_relayed_and_the_turn_still_completes(gateway, upstream, claude, key):
    answer = httpx2.post(
        gateway.base_url("claude", "anthropic") + "/v1/messages",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        json={
            "model": "claude-sonnet-4-5;chunks=6;malformed_after=2",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "Go"}],
        },
    )
    assert answer.status_code == 200
    turn, _, stored = the_turn(gateway)
    assert turn.status == TurnStatus.COMPLETED
    assert stored.content == answer_text(6)  # the cut event carried nothing the answer lost
    assert answer.text.count("event: ") >= 6
