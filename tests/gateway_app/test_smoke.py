import json

import openai
import pytest

from gateway_app.models import Provider
from sessions_app.models import Message, Session, Turn
from sessions_app.services.apikeys import apikey_create
from tests.support.gateway import GatewayServer
from tests.support.http import FakeServer


def sse(request):
    chunks = [
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [{"index": 0, "delta": {"content": "Hello"}}]},
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]},
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22, "prompt_tokens_details": {"cached_tokens": 5}}},
    ]
    body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
    return 200, body, {"Content-Type": "text/event-stream"}


@pytest.fixture
def gateway(transactional_db):
    server = GatewayServer()
    yield server
    server.close()


def test_smoke(gateway):
    upstream = FakeServer(sse)
    key = apikey_create(tenant_name="acme").plain_key
    provider = Provider(tenant=Session._meta.get_field("tenant").related_model.objects.get(name="acme"), name="oa", kind="openai", base_url=f"{upstream.url}/v1")
    provider.api_key = "sk-upstream-secret-123"
    provider.save()
    client = openai.OpenAI(api_key=key, base_url=gateway.base_url("oa"))
    stream = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], stream=True, extra_headers={"X-ACE-Session": "s1"})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello there"
    assert gateway.drained()
    turn = Turn.objects.get()
    assert turn.status == "completed"
    answer = Message.objects.get(pk=turn.assistant_message_id)
    assert answer.content == "Hello there"
    assert (answer.input_tokens, answer.cache_read_tokens, answer.output_tokens) == (15, 5, 2)
    assert upstream.received[0].headers["authorization"] == "Bearer sk-upstream-secret-123"
    assert upstream.received[0].json()["stream_options"] == {"include_usage": True}
    upstream.close()
