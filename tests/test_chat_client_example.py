"""docs/examples/chat_client.py, run for real: a fake OpenAI-compatible SSE server, Open ACE on live_server."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sessions_app.models import Role, Turn, TurnStatus
from sessions_app.services.apikeys import apikey_create
from tests.support.factories import SessionFactory
from tests.support.http import FakeServer, Request

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "chat_client.py"
SYSTEM = "你是 NewLife.ChatAI 助手。\n[记忆] 用户住在杭州。"
PIECES = ["杭州", "明天", "多云，", "18~25°C，", "适合", "出行。"]
REASONING = ["用户问天气，", "直接回答。"]
USAGE = {"prompt_tokens": 321, "completion_tokens": 17, "total_tokens": 338}


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chat_client_example", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeLLM(FakeServer):
    """Streams PIECES as chat.completion.chunk events, then a usage chunk and [DONE] (or breaks off early)."""

    def __init__(self, break_after: int | None = None, delay: float = 0.05):
        self.break_after = break_after
        self.delay = delay
        super().__init__(self.stream)
        self.base_url = f"{self.url}/v1"

    def chunks(self) -> Iterator[dict]:
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-qwen"}
        yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        for text in REASONING:
            yield {**base, "choices": [{"index": 0, "delta": {"reasoning_content": text}}]}
        for index, text in enumerate(PIECES):
            if index == self.break_after:
                return
            yield {**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        yield {**base, "choices": [], "usage": USAGE}

    def stream(self, request: Request):
        assert request.path == "/v1/chat/completions"
        return 200, self.events(), {"Content-Type": "text/event-stream"}

    def events(self) -> Iterator[bytes]:
        # No Content-Length: the body ends when the connection closes, as a dropped stream does.
        yield b": keep-alive\n\n"
        for chunk in self.chunks():
            time.sleep(self.delay)  # a model's pace
            yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
        if self.break_after is None:
            yield b"data: [DONE]\n\n"


@pytest.fixture
def ace(live_server, transactional_db):
    new_key = apikey_create(tenant_name="chat-example")
    session = SessionFactory(tenant=new_key.api_key.tenant, user_id="xiaoming")
    return {"url": live_server.url, "key": new_key.plain_key, "session": session}


def run_example(example: ModuleType, ace: dict, base_url: str, monkeypatch) -> tuple[int, list[tuple[str, str]]]:
    """Runs the example's main(); returns its exit code and the (method, url) of every Open ACE call it made."""
    calls: list[tuple[str, str]] = []
    real_call = example.call

    def spy(method, url, *args, **kwargs):
        calls.append((method, url))
        return real_call(method, url, *args, **kwargs)

    monkeypatch.setattr(example, "call", spy)
    argv = ["帮我查一下杭州明天的天气", "--system", SYSTEM, "--ace-url", ace["url"], "--ace-key", ace["key"]]
    argv += ["--session", str(ace["session"].pk), "--base-url", base_url, "--api-key", "sk-fake", "--model", "qwen"]
    argv += ["--checkpoint-chunks", "3", "--checkpoint-seconds", "60"]
    return example.main(argv), calls


def test_streamed_turn_is_persisted(example, ace, monkeypatch):
    with FakeLLM() as fake:
        code, calls = run_example(example, ace, fake.base_url, monkeypatch)

    assert code == 0
    sent = fake.received[0].json()
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["messages"][0] == {"role": "system", "content": SYSTEM}
    assert fake.received[0].headers["Authorization"] == "Bearer sk-fake"

    turn = Turn.objects.select_related("user_message", "assistant_message").get(session=ace["session"])
    assert turn.status == TurnStatus.COMPLETED and turn.system_ready_at is not None
    user, answer = turn.user_message, turn.assistant_message
    assert user.content == "帮我查一下杭州明天的天气"
    assert user.thinking == SYSTEM  # the system prompt snapshot
    assert answer.role == Role.ASSISTANT and answer.finish_reason == "stop"
    assert answer.content == "".join(PIECES)
    assert answer.thinking == "".join(REASONING)
    assert answer.model == "fake-qwen"  # as the server reported it
    assert (answer.input_tokens, answer.output_tokens, answer.total_tokens) == (321, 17, 338)
    assert answer.elapsed_ms >= 50 * len(PIECES)

    methods = [method for method, _url in calls]
    assert methods[:2] == ["POST", "POST"] and methods[-1] == "POST"  # start, system-ready, ..., complete
    assert calls[1][1].endswith("/system-ready/") and calls[-1][1].endswith("/complete/")
    assert methods.count("PATCH") >= 2  # checkpoints every 3 chunks

    ace["session"].refresh_from_db()
    assert (ace["session"].message_user, ace["session"].message_assistant, ace["session"].message_error) == (1, 1, 0)
    assert ace["session"].total_tokens == 338


def test_broken_stream_is_stored_as_an_error_with_the_partial_answer(example, ace, monkeypatch):
    with FakeLLM(break_after=4) as fake:
        code, calls = run_example(example, ace, fake.base_url, monkeypatch)

    assert code == 1
    turn = Turn.objects.select_related("user_message", "assistant_message").get(session=ace["session"])
    answer = turn.assistant_message
    assert turn.status == TurnStatus.FAILED
    assert answer.role == Role.ERROR and answer.finish_reason == "error"
    assert answer.content == "".join(PIECES[:4])  # what had arrived is kept
    assert "ended before [DONE]" in answer.metadata["error"]
    assert turn.user_message.thinking == SYSTEM
    assert (answer.input_tokens, answer.output_tokens) == (0, 0)  # no usage chunk came

    ace["session"].refresh_from_db()
    assert (ace["session"].message_assistant, ace["session"].message_error) == (0, 1)
