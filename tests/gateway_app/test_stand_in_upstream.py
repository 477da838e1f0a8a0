"""The stand-in upstream (tests/support/stand_in_upstream.py) speaks OpenAI and Anthropic as the official SDKs
expect: the `openai` and `anthropic` clients, streamed and not, pointed straight at it, parse its answers, and
every body and event also validates against the SDK's own type with no field the type does not know. This is what
lets the gateway's tests and benchmark trust it as an upstream."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import anthropic
import httpx2
import openai
import pydantic
import pytest
from anthropic.types import (
    Message,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
)
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.support.processes import ROOT, free_port
from tests.support.stand_in_upstream import (
    SIGNATURE,
    StandInUpstream,
    answer_text,
    prompt_words,
    thinking_text,
)
from tests.support.waiting import wait_for

KEY = "sk-stand-in-provider-key"
QUESTION = [{"role": "user", "content": "Which garden in Suzhou is quiet in the morning?"}]  # 9 words
TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]
TOOLS_ANTHROPIC = [
    {"name": "web_search", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}
]
ANTHROPIC_EVENTS = {
    "message_start": RawMessageStartEvent,
    "content_block_start": RawContentBlockStartEvent,
    "content_block_delta": RawContentBlockDeltaEvent,
    "content_block_stop": RawContentBlockStopEvent,
    "message_delta": RawMessageDeltaEvent,
    "message_stop": RawMessageStopEvent,
}


@pytest.fixture
def upstream():
    with StandInUpstream(api_key=KEY) as server:
        yield server


@pytest.fixture
def oai(upstream) -> openai.OpenAI:
    return openai.OpenAI(base_url=upstream.openai_base_url, api_key=KEY, max_retries=0)


@pytest.fixture
def claude(upstream) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=upstream.anthropic_base_url, api_key=KEY, max_retries=0)


def strictly(model_type, data, *, extras: frozenset = frozenset()):
    """`data` validated as the SDK's `model_type`, and no object in it holding a field its type does not declare
    (a misspelt field would otherwise pass: the SDKs' models accept unknown fields)."""
    parsed = model_type.model_validate(data)

    def walk(value, where):
        if isinstance(value, pydantic.BaseModel):
            unknown = set(value.model_extra or {}) - extras
            assert not unknown, f"{where}: fields the SDK does not know: {unknown}"
            for name in type(value).model_fields:
                walk(getattr(value, name), f"{where}.{name}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")

    walk(parsed, model_type.__name__)
    return parsed


def sse_events(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) of each event of an SSE body."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        events.append((name, "\n".join(data)))
    return events


def post(url: str, body: dict, **headers) -> httpx2.Response:
    return httpx2.post(url, json=body, headers={"authorization": f"Bearer {KEY}", **headers}, timeout=30)


# -- OpenAI ------------------------------------------------------------------------------------------------------
def test_openai_answer_parses_with_the_sdk_and_its_usage_comes_from_the_request(oai, upstream):
    answer = oai.chat.completions.create(model="gpt-4o-mini", messages=QUESTION)

    assert answer.object == "chat.completion" and answer.model == "gpt-4o-mini"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == answer_text(5) == "Stand-in answer from the upstream:"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.tool_calls is None
    assert answer.usage.prompt_tokens == prompt_words({"messages": QUESTION}) == 9
    assert (answer.usage.completion_tokens, answer.usage.total_tokens) == (5, 14)
    assert answer.usage.prompt_tokens_details.cached_tokens == 0
    assert answer.usage.completion_tokens_details.reasoning_tokens == 0
    raw = post(f"{upstream.openai_base_url}/chat/completions", {"model": "gpt-4o-mini", "messages": QUESTION})
    assert raw.headers["content-type"] == "application/json" and raw.headers["x-request-id"]
    strictly(ChatCompletion, raw.json())
    first = upstream.received[0]
    assert (first.method, first.path, first.status, first.outcome) == ("POST", "/v1/chat/completions", 200, "complete")
    assert first.headers["authorization"] == f"Bearer {KEY}" and first.json["messages"] == QUESTION
    assert first.usage["prompt_tokens"] == 9 and first.stream is False


def test_openai_stream_as_openai_sends_it(oai, upstream):
    stream = oai.chat.completions.create(
        model="gpt-4o-mini;chunks=12", messages=QUESTION, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)

    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer_text(12) and "园林" in text and "🙂" in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    assert chunks[-1].usage.prompt_tokens == 9 and chunks[-1].usage.total_tokens == 21
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"
    assert upstream.last.json["stream_options"] == {"include_usage": True} and upstream.last.stream

    raw = post(
        f"{upstream.openai_base_url}/chat/completions",
        {"model": "gpt-4o-mini", "messages": QUESTION, "stream": True, "stream_options": {"include_usage": True}},
    )
    assert raw.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = sse_events(raw.content)
    assert events[-1] == (None, "[DONE]") and all(name is None for name, _ in events)
    for _, data in events[:-1]:
        chunk = json.loads(data)
        assert "usage" in chunk  # null on every chunk but the last, when usage is asked for
        strictly(ChatCompletionChunk, chunk)


def test_openai_stream_without_include_usage_has_no_usage_at_all(upstream):
    raw = post(f"{upstream.openai_base_url}/chat/completions", {"model": "m", "messages": QUESTION, "stream": True})
    chunks = [json.loads(data) for _, data in sse_events(raw.content)[:-1]]
    assert all("usage" not in c for c in chunks) and all(c["choices"] for c in chunks)
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert upstream.last.usage["completion_tokens"] == 5  # what it would have reported


def test_openai_tool_call_and_reasoning_accumulate_in_the_sdk_stream_helper(oai, upstream):
    with oai.chat.completions.stream(
        model="deepseek-reasoner;tool_call=1;reasoning=2;chunks=3;cache_read=40",
        messages=QUESTION,
        tools=TOOLS_OPENAI,
        stream_options={"include_usage": True},
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()

    message = final.choices[0].message
    assert message.content == answer_text(3) and final.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls[0].function.name == "web_search"
    assert json.loads(message.tool_calls[0].function.arguments) == {"query": "stand-in"}
    assert message.tool_calls[0].id.startswith("call_") and message.tool_calls[0].type == "function"
    assert final.usage.completion_tokens == 3 + 2 + 1
    assert final.usage.completion_tokens_details.reasoning_tokens == 2
    assert (final.usage.prompt_tokens, final.usage.prompt_tokens_details.cached_tokens) == (9 + 40, 40)

    answer = oai.chat.completions.create(model="m;tool_call=1;reasoning=2", messages=QUESTION, tools=TOOLS_OPENAI)
    assert answer.choices[0].message.tool_calls[0].function.arguments == '{"query": "stand-in"}'
    assert answer.choices[0].message.reasoning_content == thinking_text(2)  # DeepSeek's and Qwen's extra field
    raw = post(f"{upstream.openai_base_url}/chat/completions", {"model": "m;tool_call=1", "messages": QUESTION})
    strictly(ChatCompletion, raw.json())
    raw = post(
        f"{upstream.openai_base_url}/chat/completions",
        {"model": "m;tool_call=1;reasoning=1", "messages": QUESTION, "stream": True},
    )
    for _, data in sse_events(raw.content)[:-1]:
        strictly(ChatCompletionChunk, json.loads(data), extras=frozenset({"reasoning_content"}))


def test_openai_max_tokens_cuts_the_answer_with_finish_reason_length(oai):
    answer = oai.chat.completions.create(model="m;chunks=10", messages=QUESTION, max_completion_tokens=4)
    assert answer.choices[0].message.content == answer_text(4) and answer.choices[0].finish_reason == "length"
    assert answer.usage.completion_tokens == 4


@pytest.mark.parametrize(
    ("status", "error", "error_type"),
    [
        (401, openai.AuthenticationError, "invalid_request_error"),
        (404, openai.NotFoundError, "invalid_request_error"),
        (429, openai.RateLimitError, "requests"),
        (500, openai.InternalServerError, "server_error"),
        (503, openai.InternalServerError, "server_error"),
    ],
)
def test_openai_errors_in_openai_shape(oai, upstream, status, error, error_type):
    with pytest.raises(error) as raised:
        oai.chat.completions.create(model=f"gpt-4o-mini;status={status}", messages=QUESTION)
    assert raised.value.status_code == status
    body = raised.value.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["type"] == error_type
    assert raised.value.response.headers.get("retry-after") == ("1" if status == 429 else None)
    assert upstream.last.outcome == "error_status" and upstream.last.status == status


def test_openai_refuses_a_wrong_key_and_a_body_without_messages(upstream):
    wrong = openai.OpenAI(base_url=upstream.openai_base_url, api_key="ace_client_key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        wrong.chat.completions.create(model="m", messages=QUESTION)
    assert raised.value.body["code"] == "invalid_api_key"
    response = post(f"{upstream.openai_base_url}/chat/completions", {"model": "m"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "messages"
    response = httpx2.post(
        f"{upstream.openai_base_url}/chat/completions", content=b"{", headers={"authorization": f"Bearer {KEY}"}
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


# -- Anthropic ---------------------------------------------------------------------------------------------------
def test_anthropic_message_with_thinking_text_and_tool_use(claude, upstream):
    message = claude.messages.create(
        model="claude-sonnet-4-5;tool_call=1;cache_read=100;cache_write=20;cache_write_1h=5",
        max_tokens=1024,
        system="You are a travel guide.",
        messages=QUESTION,
        tools=TOOLS_ANTHROPIC,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )

    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[0].thinking == thinking_text(3) and message.content[0].signature == SIGNATURE
    assert message.content[1].text == answer_text(5)
    assert (message.content[2].name, message.content[2].input) == ("web_search", {"query": "stand-in"})
    assert message.stop_reason == "tool_use" and message.role == "assistant" and message.type == "message"
    usage = message.usage
    assert usage.input_tokens == 9 + 5  # the question and the system prompt
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (100, 25)
    assert (usage.cache_creation.ephemeral_5m_input_tokens, usage.cache_creation.ephemeral_1h_input_tokens) == (20, 5)
    assert usage.output_tokens == 5 + 3 + 1
    # This SDK sends its key as a Bearer token (older ones and Claude Code's API-key mode: x-api-key, accepted too)
    assert upstream.last.headers["authorization"] == f"Bearer {KEY}" and upstream.last.headers["anthropic-version"]

    raw = httpx2.post(
        f"{upstream.anthropic_base_url}/v1/messages",
        json={
            "model": "claude-sonnet-4-5;tool_call=1",
            "max_tokens": 64,
            "messages": QUESTION,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        },
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    )
    assert raw.headers["request-id"]
    strictly(Message, raw.json())


def test_anthropic_stream_events_accumulate_to_the_same_message(claude, upstream):
    kwargs = dict(
        model="claude-sonnet-4-5;chunks=8;tool_call=1;cache_read=30",
        max_tokens=1024,
        messages=QUESTION,
        tools=TOOLS_ANTHROPIC,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    with claude.messages.stream(**kwargs) as stream:
        kinds = [event.type for event in stream]
        streamed = stream.get_final_message()
    whole = claude.messages.create(**kwargs)

    assert [b.model_dump(exclude={"id"}) for b in streamed.content] == [
        b.model_dump(exclude={"id"}) for b in whole.content
    ]
    assert streamed.content[1].text == answer_text(8) and streamed.stop_reason == "tool_use"
    assert streamed.usage.output_tokens == whole.usage.output_tokens == 8 + 3 + 1
    assert streamed.usage.input_tokens == 9 and streamed.usage.cache_read_input_tokens == 30
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "signature" in kinds

    raw = httpx2.post(
        f"{upstream.anthropic_base_url}/v1/messages",
        json={**kwargs, "stream": True},
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    )
    events = sse_events(raw.content)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"] and names[-2:] == [
        "message_delta",
        "message_stop",
    ]
    for name, data in events:
        payload = json.loads(data)
        assert payload["type"] == name
        if name != "ping":
            strictly(ANTHROPIC_EVENTS[name], payload)
    deltas = [json.loads(d)["delta"]["type"] for n, d in events if n == "content_block_delta"]
    assert deltas == ["thinking_delta"] * 3 + ["signature_delta"] + ["text_delta"] * 8 + ["input_json_delta"] * 2
    start = json.loads(events[0][1])["message"]["usage"]
    assert start["input_tokens"] == 9 and start["cache_read_input_tokens"] == 30 and start["output_tokens"] == 1
    assert json.loads(events[-2][1])["usage"] == {"output_tokens": 12}


def test_anthropic_full_delta_usage_and_max_tokens(claude):
    with claude.messages.stream(
        model="claude-haiku-4-5;delta_usage=full;chunks=9", max_tokens=4, messages=QUESTION
    ) as stream:
        deltas = [event.usage for event in stream if event.type == "message_delta"]
        final = stream.get_final_message()
    assert deltas[0].input_tokens == 9 and deltas[0].output_tokens == 4
    assert final.content[0].text == answer_text(4) and final.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("status", "error", "error_type"),
    [
        (401, anthropic.AuthenticationError, "authentication_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_anthropic_errors_in_anthropic_shape(claude, status, error, error_type):
    with pytest.raises(error) as raised:
        claude.messages.create(model=f"claude-sonnet-4-5;status={status}", max_tokens=10, messages=QUESTION)
    body = raised.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == error_type and body["error"]["message"]
    assert raised.value.response.headers.get("retry-after") == ("1" if status in (429, 529) else None)


def test_anthropic_needs_its_version_header_and_max_tokens(upstream):
    headers = {"x-api-key": KEY}
    url = f"{upstream.anthropic_base_url}/v1/messages"
    missing_version = httpx2.post(url, json={"model": "m", "max_tokens": 5, "messages": QUESTION}, headers=headers)
    assert missing_version.status_code == 400 and "anthropic-version" in missing_version.json()["error"]["message"]
    headers["anthropic-version"] = "2023-06-01"
    missing_max = httpx2.post(url, json={"model": "m", "messages": QUESTION}, headers=headers)
    assert missing_max.status_code == 400 and missing_max.json()["error"]["type"] == "invalid_request_error"


def test_count_tokens_and_model_lists_through_the_sdks(claude, oai):
    counted = claude.messages.count_tokens(model="claude-sonnet-4-5", messages=QUESTION, system="Be brief.")
    assert counted.input_tokens == 9 + 2
    assert [m.id for m in claude.models.list()][0] == "claude-sonnet-4-5"
    assert "gpt-4o-mini" in [m.id for m in oai.models.list()]


# -- behaviour on demand -----------------------------------------------------------------------------------------
def test_stream_dropped_midway_reaches_the_sdk_as_a_broken_connection(oai, claude, upstream):
    seen = []
    with pytest.raises((openai.APIConnectionError, httpx2.RemoteProtocolError)):
        for chunk in oai.chat.completions.create(model="m;chunks=10;break_after=4", messages=QUESTION, stream=True):
            seen.append(chunk.choices[0].delta.content)
    assert "".join(seen) == answer_text(4)
    assert wait_for(lambda: upstream.last.outcome == "dropped")

    text = []
    with pytest.raises((anthropic.APIConnectionError, httpx2.RemoteProtocolError)):
        with claude.messages.stream(model="c;break_after=2", max_tokens=50, messages=QUESTION) as stream:
            for piece in stream.text_stream:
                text.append(piece)
    assert "".join(text) == answer_text(2)

    with pytest.raises((openai.APIConnectionError, httpx2.RemoteProtocolError)):
        oai.chat.completions.create(model="m;break_after=1", messages=QUESTION)


def test_error_event_and_malformed_sse_midway(oai, claude, upstream):
    with pytest.raises(openai.APIError, match="The server had an error"):
        list(oai.chat.completions.create(model="m;error_after=3", messages=QUESTION, stream=True))
    assert upstream.last.outcome == "error_event"
    with pytest.raises(anthropic.APIStatusError) as raised:
        with claude.messages.stream(model="c;error_after=2", max_tokens=50, messages=QUESTION) as stream:
            stream.until_done()
    assert raised.value.body["error"]["type"] == "overloaded_error"

    with pytest.raises(json.JSONDecodeError):
        list(oai.chat.completions.create(model="m;malformed_after=2", messages=QUESTION, stream=True))
    raw = post(
        f"{upstream.openai_base_url}/chat/completions",
        {"model": "m;malformed_after=2", "messages": QUESTION, "stream": True},
    )
    datas = [data for _, data in sse_events(raw.content)]
    assert datas[-1] == "[DONE]" and len(datas) == 5 + 1 + 1 + 1  # the stream goes on after the broken event
    with pytest.raises(ValueError):
        json.loads(datas[2])


def test_delays_before_the_first_chunk_and_between_chunks(oai):
    started = time.monotonic()
    stream = oai.chat.completions.create(model="m;first_ms=150;chunk_ms=40;chunks=6", messages=QUESTION, stream=True)
    arrivals = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - started)
    assert len(arrivals) == 6
    assert arrivals[0] >= 0.150 and arrivals[-1] >= 0.150 + 5 * 0.040
    assert arrivals[-1] - arrivals[0] >= 5 * 0.040 - 0.005
    started = time.monotonic()
    oai.chat.completions.create(model="m;first_ms=100;chunk_ms=30;chunks=4", messages=QUESTION)
    assert time.monotonic() - started >= 0.100 + 3 * 0.030


def test_controls_from_header_queue_and_defaults_in_that_order(upstream):
    upstream.defaults["chunks"] = 2
    upstream.queue("status=500", "chunks=3")
    url = f"{upstream.openai_base_url}/chat/completions"
    assert post(url, {"model": "m", "messages": QUESTION}).status_code == 500
    assert post(url, {"model": "m", "messages": QUESTION}).json()["usage"]["completion_tokens"] == 3
    assert post(url, {"model": "m", "messages": QUESTION}).json()["usage"]["completion_tokens"] == 2
    answer = post(url, {"model": "m;chunks=4", "messages": QUESTION}, **{"X-Stand-In": "chunks=7; first-ms=1"})
    assert answer.json()["usage"]["completion_tokens"] == 7 and answer.json()["model"] == "m;chunks=4"
    assert upstream.last.controls == {"chunks": 7, "first_ms": 1.0}
    typo = post(url, {"model": "m;chunk=4", "messages": QUESTION})
    assert typo.status_code == 400 and "unknown control 'chunk'" in typo.json()["error"]["message"]
    with pytest.raises(ValueError):
        upstream.queue("chunks=many")


def test_hold_until_released_and_a_client_that_goes_away(upstream):
    url = f"{upstream.openai_base_url}/chat/completions"
    body = {"model": "m;hold_after=2;chunks=4", "messages": QUESTION, "stream": True}
    with httpx2.Client(headers={"authorization": f"Bearer {KEY}"}, timeout=30) as client:
        with client.stream("POST", url, json=body) as response:
            lines = response.iter_lines()
            before = []
            while len(before) < 2:
                line = next(lines)
                if line.startswith("data:"):
                    before.append(json.loads(line[6:])["choices"][0]["delta"]["content"])
            assert "".join(before) == answer_text(2)
            time.sleep(0.2)
            assert upstream.last.outcome == ""  # still held
            upstream.release()
            after = [line for line in lines if line.startswith("data:")]
    assert after[-1] == "data: [DONE]" and len(after) == 2 + 1 + 1  # two more pieces, the finish, [DONE]
    assert wait_for(lambda: upstream.last.outcome == "complete")

    async def leave_early():
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {KEY}"}, timeout=30) as client:
            body = {"model": "m;chunks=50;chunk_ms=20", "messages": QUESTION, "stream": True}
            async with client.stream("POST", url, json=body) as response:
                async for line in response.aiter_lines():
                    if "Stand-in" in line:
                        return

    asyncio.run(leave_early())
    assert wait_for(lambda: upstream.last.outcome == "client_disconnected", 5)


def test_paths_under_a_prefix_and_unknown_paths(upstream):
    prefixed = post(f"{upstream.url}/compatible-mode/v1/chat/completions", {"model": "qwen-plus", "messages": QUESTION})
    assert prefixed.status_code == 200 and prefixed.json()["choices"][0]["message"]["content"] == answer_text(5)
    unknown = post(f"{upstream.url}/v1/embeddings", {"input": "x"})
    assert unknown.status_code == 404 and unknown.json()["error"]["message"].startswith("Unknown request URL")


def test_two_hundred_concurrent_streams(upstream):
    """Fast enough to stand in for a provider under the gateway's benchmark: 200 streams of 20 chunks 10 ms apart."""
    url = f"{upstream.openai_base_url}/chat/completions"

    async def one(client):
        body = {
            "model": "m;chunks=20;chunk_ms=10",
            "messages": QUESTION,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with client.stream("POST", url, json=body) as response:
            text = []
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    if chunk["choices"]:
                        text.append(chunk["choices"][0]["delta"].get("content") or "")
            return "".join(text)

    async def all_of_them():
        limits = httpx2.Limits(max_connections=250, max_keepalive_connections=250)
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {KEY}"}, limits=limits, timeout=60) as client:
            return await asyncio.gather(*(one(client) for _ in range(200)))

    started = time.monotonic()
    texts = asyncio.run(all_of_them())
    elapsed = time.monotonic() - started
    assert texts == [answer_text(20)] * 200
    assert len(upstream.received) == 200 and all(r.outcome == "complete" for r in upstream.received)
    assert elapsed < 30, elapsed  # 0.19 s of pacing; the rest is this process parsing 4,600 chunks


def test_its_own_process_for_benchmarks():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.stand_in_upstream", "--port", str(port), "--defaults", "chunks=3"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == f"stand-in upstream on http://127.0.0.1:{port}"
        url = f"http://127.0.0.1:{port}"
        answer = wait_for(lambda: _try_post(f"{url}/v1/chat/completions", {"model": "m", "messages": QUESTION}), 20)
        assert answer.json()["choices"][0]["message"]["content"] == answer_text(3)
        received = httpx2.get(f"{url}/_stand_in/received?last=1").json()
        assert received[0]["json"]["model"] == "m" and received[0]["usage"]["completion_tokens"] == 3
        assert httpx2.post(f"{url}/_stand_in/reset").json() == {"reset": True}
        assert httpx2.get(f"{url}/_stand_in/received").json() == []
    finally:
        process.terminate()
        process.wait(timeout=10)


def _try_post(url: str, body: dict):
    try:
        return httpx2.post(url, json=body, timeout=5)
    except httpx2.TransportError:
        return None
