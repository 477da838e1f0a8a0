"""The OpenTelemetry SDK's own OTLP/HTTP exporters against a live server: the protobuf wire format, gzip and
deflate, the Bearer header as OTEL_EXPORTER_OTLP_HEADERS gives it, delta and cumulative metrics — what an
exporter really sends, rather than a body written by hand (test_otlp.py has those)."""

import uuid

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import Counter, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from ingest_app.selectors.telemetry import session_metered
from sessions_app.models import Session
from tests.support.api import make_client

pytestmark = pytest.mark.django_db(transaction=True)

RESOURCE = Resource.create({"service.name": "claude-code", "service.version": "2.1.3", "os.type": "linux"})
CALLS = [  # model, input, output, cache read, cache creation, cost in USD
    ("claude-sonnet-4-5-20250929", 12, 410, 18230, 1024, 0.0123),
    ("claude-sonnet-4-5-20250929", 3, 96, 19254, 530, 0.0081),
    ("claude-haiku-4-5-20251001", 410, 22, 0, 0, 0.0005),
]


def _common(session_id: str) -> dict:
    return {"session.id": session_id, "user.id": "a" * 64, "user.email": "dev@example.com", "terminal.type": "vscode"}


def _export_events(url: str, key: str, session_id: str, compression: Compression) -> bool:
    exporter = OTLPLogExporter(
        endpoint=f"{url}/v1/logs", headers={"Authorization": f"Bearer {key}"}, compression=compression, timeout=30
    )
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    logger = provider.get_logger("com.anthropic.claude_code.events", "2.1.3")
    prompt_id = str(uuid.uuid5(uuid.NAMESPACE_URL, session_id))  # the one prompt of the session
    start = 1_796_205_600_000_000_000  # 2026-12-02T10:00:00Z: Claude Code's exporter stamps each event as it emits it
    logger.emit(
        timestamp=start,
        body="claude_code.user_prompt",
        attributes={
            **_common(session_id),
            "event.name": "user_prompt",
            "event.timestamp": "2026-12-02T10:00:00.000Z",
            "event.sequence": 0,
            "prompt.id": prompt_id,
            "prompt_length": 24,
            "prompt": "Rename the parser module",
        },
    )
    for n, (model, inputs, outputs, read, created, cost) in enumerate(CALLS, start=1):
        logger.emit(
            timestamp=start + n * 1_000_000_000,
            body="claude_code.api_request",
            attributes={
                **_common(session_id),
                "event.name": "api_request",
                "event.timestamp": f"2026-12-02T10:00:0{n}.000Z",
                "event.sequence": n,
                "prompt.id": prompt_id,
                "model": model,
                "input_tokens": inputs,
                "output_tokens": outputs,
                "cache_read_tokens": read,
                "cache_creation_tokens": created,
                "cost_usd": cost,
                "duration_ms": 1800 + n,
            },
        )
    flushed = provider.force_flush(30_000)
    provider.shutdown()
    return flushed


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip, Compression.Deflate])
def test_the_sdk_log_exporter_gives_a_session_with_its_requests_and_tokens(live_server, compression):
    acme, globex = make_client("acme"), make_client("globex")
    session_id = str(uuid.uuid4())
    assert _export_events(live_server.url, acme.key, session_id, compression)

    session = Session.objects.get(tenant=acme.tenant, tool="claude-code", agent_session_id=session_id)
    assert session.user_id == "dev@example.com"
    stats = acme.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    counts = (stats["requests"], stats["conversations"], stats["message_user"], stats["message_assistant"])
    assert counts == (3, 1, 1, 3)
    assert stats["input_tokens"] == sum(call[1] for call in CALLS)
    assert stats["output_tokens"] == sum(call[2] for call in CALLS)
    assert stats["cache_read_tokens"] == sum(call[3] for call in CALLS)
    assert stats["cache_creation_tokens"] == sum(call[4] for call in CALLS)
    usage = acme.get("/api/v1/stats/", {"group_by": "model"}).json()
    by_model = {row["key"]: row["requests"] for row in usage["results"] if row["key"]}  # None: the prompt
    assert by_model == {"claude-sonnet-4-5-20250929": 2, "claude-haiku-4-5-20251001": 1}
    messages = acme.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert messages[0]["content"] == "Rename the parser module"
    assert globex.get(f"/api/v1/sessions/{session.pk}/stats/").status_code == 404

    # An exporter retries what it could not deliver: the same events sent again change nothing.
    assert _export_events(live_server.url, acme.key, session_id, compression)
    assert acme.get(f"/api/v1/sessions/{session.pk}/stats/").json() == stats


def test_the_sdk_log_exporter_with_a_wrong_key_delivers_nothing(live_server):
    make_client("acme")
    session_id = str(uuid.uuid4())
    _export_events(live_server.url, "ace_not-a-key", session_id, Compression.Gzip)  # refused with a 401
    assert not Session.objects.filter(agent_session_id=session_id).exists()


@pytest.mark.parametrize("temporality", [AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE])
def test_the_sdk_metric_exporter_gives_metered_usage_in_either_temporality(live_server, temporality):
    acme = make_client("acme")
    session_id = str(uuid.uuid4())
    exporter = OTLPMetricExporter(
        endpoint=f"{live_server.url}/v1/metrics",
        headers={"Authorization": f"Bearer {acme.key}"},
        compression=Compression.Gzip,
        preferred_temporality={Counter: temporality},
        timeout=30,
    )
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    provider = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    meter = provider.get_meter("com.anthropic.claude_code", "2.1.3")
    tokens = meter.create_counter("claude_code.token.usage", unit="tokens")
    cost = meter.create_counter("claude_code.cost.usage", unit="USD")
    sessions = meter.create_counter("claude_code.session.count")
    sessions.add(1, _common(session_id))
    model = CALLS[0][0]
    # Two export intervals: a cumulative exporter sends the running totals twice, a delta one what is new.
    for _ in range(2):
        tokens.add(100, {**_common(session_id), "type": "input", "model": model})
        tokens.add(40, {**_common(session_id), "type": "output", "model": model})
        tokens.add(5000, {**_common(session_id), "type": "cacheRead", "model": model})
        cost.add(0.25, {**_common(session_id), "model": model})
        assert provider.force_flush(30_000)
    provider.shutdown()

    session = Session.objects.get(tenant=acme.tenant, tool="claude-code", agent_session_id=session_id)
    metered = session_metered(session=session)
    assert metered["tokens"] == {"cacheRead": 10_000, "input": 200, "output": 80}
    assert metered["cost_usd"] == pytest.approx(0.5)
    stats = acme.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert (stats["requests"], stats["input_tokens"]) == (0, 0)  # metrics are shown, never counted
