"""Spans emitted for a completed chat turn (sessions_app.tracing). No database needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

from opentelemetry.trace import StatusCode

from sessions_app.tracing import record_turn_spans

ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 4, 13, 9, 30, 0, 123456, tzinfo=UTC)
END = START + timedelta(seconds=7, microseconds=654321)


def _ns(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def record(**overrides) -> None:
    kwargs = {
        "turn_id": 42,
        "session_id": 7,
        "conversation_id": 3,
        "model": "qwen-max",
        "started_at": START,
        "ended_at": END,
        "finish_reason": "tool_calls",
        "input_tokens": 120,
        "output_tokens": 80,
        "tool_calls": [
            {"id": "call_1", "name": "weather", "arguments": {"city": "杭州"}, "result": {"temp": 21}},
            {"id": "call_2", "name": "search", "arguments": '{"q": "西湖"}', "result": "three hits"},
        ],
        "tool_schema": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
    }
    kwargs.update(overrides)
    record_turn_spans(**kwargs)


def test_span_names_and_parentage(spans):
    record()
    by_name = spans()
    assert set(by_name) == {"ai:Stream:qwen-max", "ai:ToolSchema", "ai:ToolCall:weather", "ai:ToolCall:search"}
    stream = by_name["ai:Stream:qwen-max"]
    assert stream.parent is None
    for name in ("ai:ToolSchema", "ai:ToolCall:weather", "ai:ToolCall:search"):
        child = by_name[name]
        assert child.parent is not None and child.parent.span_id == stream.context.span_id
        assert child.context.trace_id == stream.context.trace_id


def test_timing_covers_the_turn_and_tool_calls_sit_inside(spans):
    record()
    by_name = spans()
    stream = by_name["ai:Stream:qwen-max"]
    assert (stream.start_time, stream.end_time) == (_ns(START), _ns(END))
    weather, search = by_name["ai:ToolCall:weather"], by_name["ai:ToolCall:search"]
    for span in (weather, search, by_name["ai:ToolSchema"]):
        assert stream.start_time <= span.start_time <= span.end_time <= stream.end_time
    assert weather.end_time <= search.start_time  # sequential, in the order given
    assert weather.attributes["ai.tool.timing_estimated"] is True


def test_explicit_tool_call_times_are_used_and_clamped(spans):
    call = {
        "id": "c",
        "name": "late",
        "arguments": {},
        "result": None,
        "started_at": START + timedelta(seconds=2),
        "ended_at": END + timedelta(hours=1),
    }
    record(tool_calls=[call])
    span = spans()["ai:ToolCall:late"]
    assert (span.start_time, span.end_time) == (_ns(START + timedelta(seconds=2)), _ns(END))
    assert "ai.tool.timing_estimated" not in span.attributes
    assert "ai.tool.result" not in span.attributes


def test_attributes(spans):
    record()
    by_name = spans()
    stream = by_name["ai:Stream:qwen-max"].attributes
    assert stream["ace.turn.id"] == 42
    assert stream["ace.session.id"] == 7
    assert stream["ace.conversation.id"] == 3
    assert stream["gen_ai.request.model"] == "qwen-max"
    assert stream["gen_ai.usage.input_tokens"] == 120
    assert stream["gen_ai.usage.output_tokens"] == 80
    assert tuple(stream["gen_ai.response.finish_reasons"]) == ("tool_calls",)

    schema = json.loads(by_name["ai:ToolSchema"].attributes["ai.tool_schema"])
    assert schema[0]["function"]["name"] == "weather"

    weather = by_name["ai:ToolCall:weather"].attributes
    assert weather["ai.tool.call_id"] == "call_1"
    assert weather["ai.tool.name"] == "weather"
    assert json.loads(weather["ai.tool.arguments"]) == {"city": "杭州"}
    assert json.loads(weather["ai.tool.result"]) == {"temp": 21}

    search = by_name["ai:ToolCall:search"].attributes
    assert search["ai.tool.arguments"] == '{"q": "西湖"}'  # already a JSON string: not encoded twice
    assert search["ai.tool.result"] == "three hits"


def test_no_tool_schema_span_without_schema(spans):
    record(tool_schema=None, tool_calls=None)
    assert set(spans()) == {"ai:Stream:qwen-max"}


def test_error_finish_reason_sets_error_status(spans):
    record(finish_reason="error", error="upstream timed out", tool_calls=[], tool_schema=None)
    stream = spans()["ai:Stream:qwen-max"]
    assert stream.status.status_code == StatusCode.ERROR
    assert stream.status.description == "upstream timed out"


def test_normal_finish_is_not_an_error(spans):
    record(finish_reason="stop")
    assert spans()["ai:Stream:qwen-max"].status.status_code != StatusCode.ERROR


def test_none_values_are_omitted_and_missing_model_is_unknown(spans):
    record(model="", input_tokens=None, output_tokens=None, conversation_id=None, tool_calls=[{"arguments": None}])
    by_name = spans()
    stream = by_name["ai:Stream:unknown"].attributes
    assert stream["gen_ai.request.model"] == "unknown"
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "ace.conversation.id"):
        assert key not in stream
    tool = by_name["ai:ToolCall:unknown"].attributes
    assert "ai.tool.call_id" not in tool and "ai.tool.arguments" not in tool


def test_odd_input_does_not_raise(spans):
    class Opaque:
        def __str__(self) -> str:
            return "<opaque>"

    circular: dict = {}
    circular["self"] = circular
    record(
        turn_id=Opaque(),
        started_at=END,
        ended_at=START,  # reversed: clamped, not rejected
        input_tokens="not a number",
        tool_calls=[
            {"id": 1, "name": "odd", "arguments": {"when": START, "blob": b"\x00"}, "result": circular},
            "not a dict",
            {"name": "keys", "arguments": {(1, 2): "tuple key"}, "result": {1, 2}},
        ],
        tool_schema={"x": Opaque()},
    )
    by_name = spans()
    stream = by_name["ai:Stream:qwen-max"]
    assert stream.attributes["ace.turn.id"] == "<opaque>"
    assert "gen_ai.usage.input_tokens" not in stream.attributes
    assert stream.end_time >= stream.start_time
    odd = by_name["ai:ToolCall:odd"].attributes
    assert json.loads(odd["ai.tool.arguments"])["when"] == str(START)
    assert isinstance(odd["ai.tool.result"], str)
    assert isinstance(by_name["ai:ToolCall:keys"].attributes["ai.tool.arguments"], str)
    assert json.loads(by_name["ai:ToolSchema"].attributes["ai.tool_schema"]) == {"x": "<opaque>"}


def _run_isolated(code: str, **env_overrides: str) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (the global provider is per process) without Django settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "DJANGO_SETTINGS_MODULE"}
    env.update(env_overrides)
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_configure_without_endpoint_leaves_the_noop_provider():
    result = _run_isolated(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from sessions_app.tracing import configure_tracing

        before = trace.get_tracer_provider()
        configure_tracing()
        configure_tracing()
        assert trace.get_tracer_provider() is before, trace.get_tracer_provider()
        assert not isinstance(trace.get_tracer_provider(), TracerProvider)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_configure_with_endpoint_installs_sdk_provider_and_tolerates_dead_collector():
    result = _run_isolated(
        """
        from datetime import datetime, timezone
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from sessions_app.tracing import configure_tracing, record_turn_spans

        configure_tracing()
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider), provider
        assert provider.resource.attributes["service.name"] == "ace-test"
        configure_tracing()
        assert trace.get_tracer_provider() is provider
        now = datetime.now(timezone.utc)
        record_turn_spans(
            turn_id=1, session_id=2, conversation_id=3, model="m", started_at=now, ended_at=now,
            finish_reason="stop", input_tokens=1, output_tokens=2,
            tool_calls=[{"id": "c", "name": "t", "arguments": {}, "result": "r"}], tool_schema={"a": 1},
        )
        provider.shutdown()
        print("ok")
        """,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9/",
        OTEL_EXPORTER_OTLP_TIMEOUT="2",
        OTEL_SERVICE_NAME="ace-test",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
