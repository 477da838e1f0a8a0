"""OpenTelemetry spans for completed chat turns.

A turn is streamed by the chat app, not by this service: we only learn about it when the app calls the
``complete`` endpoint. So the spans named in the persistence flow (``ai:Stream:{model}``, ``ai:ToolSchema``,
``ai:ToolCall:{name}``) are emitted *after the fact*, with explicit start/end timestamps taken from the turn.

This module deliberately imports nothing from Django, so it can be configured and exercised without settings.
Tracing must never break turn persistence: every public function swallows (and logs) its own failures.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

logger = logging.getLogger(__name__)

TRACER_NAME = "open-ace.turns"
DEFAULT_SERVICE_NAME = "open-ace"
_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

_configure_lock = threading.Lock()
_configured = False

AttrValue = str | bool | int | float | list[str]


def configure_tracing() -> None:
    """Install an SDK TracerProvider exporting over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; otherwise leave OpenTelemetry's no-op default. Idempotent.
    Resource service.name from OTEL_SERVICE_NAME (default "open-ace").

    With no endpoint we install nothing, so an unconfigured deployment pays nothing for tracing. If some
    other code already installed an SDK provider (tests, an agent), it is left alone: OpenTelemetry only lets
    the global provider be set once per process.
    """
    global _configured
    with _configure_lock:
        if _configured:
            return
        _configured = True
        if not any(os.environ.get(var) for var in _ENDPOINT_VARS):
            return
        try:
            # Imported lazily: the SDK and exporter are only needed when tracing is actually switched on.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            if isinstance(trace.get_tracer_provider(), TracerProvider):
                return
            service_name = os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
            provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
            # The exporter reads endpoint, headers and timeout from the standard OTEL_* variables itself.
            # Batching keeps exports (and a collector that is down) off the request path.
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            trace.set_tracer_provider(provider)
        except Exception:
            logger.exception("Could not configure OpenTelemetry tracing; continuing without it")


def record_turn_spans(
    *,
    turn_id: object,
    session_id: object,
    conversation_id: object,
    model: str,
    started_at: datetime,
    ended_at: datetime,
    finish_reason: str,
    input_tokens: int | None,
    output_tokens: int | None,
    tool_calls: list[dict] | None,
    tool_schema: object | None,
    error: str | None = None,
) -> None:
    """Emit, after the fact, the spans of one completed chat turn, named as in the seed:

    - ``ai:Stream:{model}`` covering the whole turn (``started_at`` .. ``ended_at``), with the turn's ids, model,
      token usage and finish reason; status ERROR (``error`` as description) when ``finish_reason == "error"``.
    - child ``ai:ToolSchema`` (only when ``tool_schema`` is not None): the schema as JSON in ``ai.tool_schema``.
      The schema is never stored in the database (it may carry credentials); this span is its only record.
    - child ``ai:ToolCall:{name}`` per tool call (dicts with id, name, arguments, result, already redacted by
      the caller). The chat app does not report per-call timings, so calls get consecutive equal slices of
      the turn, flagged with ``ai.tool.timing_estimated``; a call dict carrying ``started_at``/``ended_at``
      datetimes uses those instead (clamped into the turn).

    None values are omitted (OTel rejects them). Never raises: tracing must not break turn completion.
    """
    try:
        tracer = trace.get_tracer(TRACER_NAME)  # fetched per call so a provider installed later is honoured
        start_ns = _to_ns(started_at)
        end_ns = max(_to_ns(ended_at), start_ns)
        finish = str(finish_reason) if finish_reason is not None else None
        stream = tracer.start_span(
            f"ai:Stream:{model or 'unknown'}",
            start_time=start_ns,
            attributes=_attrs(
                {
                    "ace.turn.id": turn_id,
                    "ace.session.id": session_id,
                    "ace.conversation.id": conversation_id,
                    "gen_ai.request.model": model or "unknown",
                    "gen_ai.usage.input_tokens": _to_int(input_tokens),
                    "gen_ai.usage.output_tokens": _to_int(output_tokens),
                    "gen_ai.response.finish_reasons": [finish] if finish else None,
                }
            ),
        )
        try:
            if finish == "error":
                stream.set_status(Status(StatusCode.ERROR, str(error) if error else None))
            parent = trace.set_span_in_context(stream)
            if tool_schema is not None:
                schema_span = tracer.start_span(
                    "ai:ToolSchema",
                    context=parent,
                    start_time=start_ns,
                    attributes={"ai.tool_schema": _json(tool_schema)},
                )
                schema_span.end(end_time=start_ns)
            calls = [call for call in (tool_calls or []) if isinstance(call, Mapping)]
            for index, call in enumerate(calls):
                _record_tool_call(tracer, parent, call, index, len(calls), start_ns, end_ns)
        finally:
            stream.end(end_time=end_ns)
    except Exception:
        logger.exception("Could not record tracing spans for turn %s", turn_id)


def _record_tool_call(
    tracer: trace.Tracer,
    parent: object,
    call: Mapping,
    index: int,
    count: int,
    turn_start: int,
    turn_end: int,
) -> None:
    """One ``ai:ToolCall:{name}`` span, kept inside the turn's time range."""
    call_start, call_end = call.get("started_at"), call.get("ended_at")
    estimated = not (isinstance(call_start, datetime) and isinstance(call_end, datetime))
    if estimated:
        slot = (turn_end - turn_start) // count
        start = turn_start + index * slot
        end = turn_end if index == count - 1 else start + slot
    else:
        start = min(max(_to_ns(call_start), turn_start), turn_end)
        end = min(max(_to_ns(call_end), start), turn_end)
    name = str(call.get("name") or "unknown")
    arguments, result = call.get("arguments"), call.get("result")
    span: Span = tracer.start_span(
        f"ai:ToolCall:{name}",
        context=parent,  # type: ignore[arg-type]
        start_time=start,
        attributes=_attrs(
            {
                "ai.tool.call_id": call.get("id"),
                "ai.tool.name": name,
                # A str is passed through: LLM tool arguments usually arrive already as a JSON string.
                "ai.tool.arguments": None if arguments is None else _json_or_str(arguments),
                "ai.tool.result": None if result is None else _json_or_str(result),
                "ai.tool.timing_estimated": True if estimated else None,
            }
        ),
    )
    span.end(end_time=end)


def _to_ns(value: object) -> int:
    """Nanoseconds since the epoch, in exact integer arithmetic (floats lose the microseconds).

    Naive datetimes are taken as UTC; anything that is not a datetime falls back to now.
    """
    if not isinstance(value, datetime):
        return time.time_ns()
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _to_int(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _json(value: object) -> str:
    """JSON text for an attribute; non-serialisable parts become str(), and anything worse becomes str(value)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _json_or_str(value: object) -> str:
    return value if isinstance(value, str) else _json(value)


def _attrs(values: Mapping[str, object]) -> dict[str, AttrValue]:
    """Drop None values and coerce anything OTel would reject (UUIDs, model pks...) to str."""
    out: dict[str, AttrValue] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, str | bool | int | float):
            out[key] = value
        elif isinstance(value, list):
            out[key] = [str(item) for item in value]
        else:
            out[key] = str(value)
    return out
