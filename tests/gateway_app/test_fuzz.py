"""Hostile input where the gateway parses: the client's body, the upstream's SSE and JSON. Never an exception other
than the 400 it means, every byte relayed as it came, and every completion one the ledger takes whole."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_app import recording
from gateway_app.dialects import Answer, Anthropic, BadCall, OpenAI
from gateway_app.sse import SSEReader
from sessions_app.models import Message, Turn, TurnStatus
from sessions_app.services.apikeys import apikey_create
from sessions_app.services.turns import turn_start
from tests.support.factories import SessionFactory

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)
# Bodies shaped like calls, with anything in their fields.
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "tool", "developer", 3]), "content": json_values}
    )
    | json_values,
    max_size=5,
)
call_bodies = st.fixed_dictionaries(
    {"model": st.text(max_size=30) | json_values, "messages": messages},
    optional={
        "stream": json_values,
        "stream_options": json_values,
        "tools": json_values,
        "system": json_values,
        "metadata": json_values,
        "max_tokens": json_values,
        "temperature": json_values,
        "user": json_values,
    },
)


@pytest.mark.parametrize("dialect", [OpenAI, Anthropic])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=call_bodies | json_values)
def test_reading_a_call_raises_only_the_400_it_means(dialect, body):
    speaker = dialect()
    try:
        call = speaker.read_call(body)
    except BadCall:
        return
    assert isinstance(call.content, str) and isinstance(call.system_prompt, str)
    prepared = speaker.prepare(body, call, "# Memory (Open ACE)\n- a fact")
    json.dumps(prepared)  # still a body to forward


@pytest.mark.parametrize("dialect", [OpenAI, Anthropic])
@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(st.tuples(st.text(max_size=20), st.text(max_size=50) | json_values.map(json.dumps)), max_size=12)
)
def test_reading_any_stream_never_raises_and_makes_a_completion(dialect, events):
    speaker, answer = dialect(), Answer()
    for name, data in events:
        assert speaker.read_event(name, data, answer) in (True, False)
    for _, data in events[:1]:
        try:
            speaker.read_answer(json.loads(data), answer)  # a JSON answer of any shape
        except ValueError:
            pass
    data = recording.completion(
        call=speaker.read_call({"model": "m", "messages": [{"role": "user", "content": "x"}]}),
        answer=answer,
        dialect=speaker,
        ttft_ms=1,
        elapsed_ms=2,
        provider="p",
        status=200,
    )
    assert data["finish_reason"] in ("stop", "length", "tool_calls", "error")
    json.dumps(data)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=400), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_every_byte_of_a_stream_is_relayed_as_it_came(body, cuts):
    reader, relayed, start = SSEReader(), b"", 0
    for cut in sorted(cuts):
        relayed += b"".join(raw for raw, _, _ in reader.feed(body[start:cut]))
        start = max(start, cut)
    relayed += b"".join(raw for raw, _, _ in reader.feed(body[start:]))
    assert relayed + reader.rest() == body


@pytest.mark.django_db(transaction=True)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.tuples(st.sampled_from(["", "message_delta", "message_start"]), json_values.map(json.dumps))))
def test_a_completion_from_any_stream_is_taken_whole_by_the_ledger(events):
    """Whatever the upstream streamed, the turn completes: no half-written turn."""
    key = apikey_create(tenant_name="fuzz").api_key
    session = SessionFactory(tenant=key.tenant)
    turn = turn_start(tenant=key.tenant, session_id=session.pk, content="q").turn
    speaker, answer = Anthropic(), Answer()
    for name, data in events:
        speaker.read_event(name, data, answer)
    call = speaker.read_call({"model": "claude", "messages": [{"role": "user", "content": "q"}]})
    data = recording.completion(
        call=call, answer=answer, dialect=speaker, ttft_ms=None, elapsed_ms=5, provider="p", status=200
    )
    recording.complete(api_key=key, turn_id=turn.pk, data=data)
    turn.refresh_from_db()
    assert turn.status in (TurnStatus.COMPLETED, TurnStatus.FAILED)
    assert Message.objects.get(pk=turn.assistant_message_id).api_calls == 1
    Turn.objects.all().delete()
