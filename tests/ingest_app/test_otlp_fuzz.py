"""The OTLP receiver never answers 5xx and never half-writes: random bodies (JSON documents shaped like OTLP,
random protobuf records, random bytes) get a 200 or a 4xx, and a refused body stores nothing."""

import json

import pytest
from django.test import Client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

from ingest_app.models import TelemetryRecord
from sessions_app.models import Message
from tests.ingest_app.otlp_payloads import post
from tests.support.api import make_client

pytestmark = pytest.mark.django_db

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(), st.text(max_size=20)
)
any_values = st.one_of(
    st.builds(lambda v: {"stringValue": v}, st.text(max_size=30)),
    st.builds(lambda v: {"intValue": v}, st.one_of(st.integers(), st.text(max_size=8))),
    st.builds(lambda v: {"doubleValue": v}, st.one_of(st.floats(), st.text(max_size=8))),
    st.builds(lambda v: {"boolValue": v}, scalars),
    st.builds(
        lambda v: {"arrayValue": {"values": v}},
        st.lists(st.builds(lambda s: {"stringValue": s}, st.text(max_size=5)), max_size=3),
    ),
    scalars,
)
keys = st.sampled_from(
    ["session.id", "event.name", "model", "input_tokens", "output_tokens", "cache_read_tokens", "prompt.id",
     "cost_usd", "duration_ms", "prompt", "user.email", "event.timestamp", "request_id", "x"]
)  # fmt: skip
attributes = st.lists(st.fixed_dictionaries({"key": keys, "value": any_values}), max_size=8)
log_records = st.fixed_dictionaries(
    {},
    optional={
        "timeUnixNano": st.one_of(st.integers(min_value=-5, max_value=2**64 + 5), st.text(max_size=12)),
        "body": st.one_of(
            st.sampled_from([{"stringValue": "claude_code.api_request"}, {"stringValue": "claude_code.user_prompt"}]),
            any_values,
        ),
        "attributes": attributes,
        "traceId": st.one_of(st.just("5b8efff798038103d269b633813fc60c"), st.text(max_size=6)),
        "severityNumber": st.one_of(st.integers(min_value=-3, max_value=30), st.text(max_size=4)),
    },
)
claude_code_resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "claude-code"}}]}
scope_logs = st.fixed_dictionaries({"logRecords": st.lists(log_records, max_size=4)})
resource_logs = st.fixed_dictionaries(
    {"resource": st.just(claude_code_resource), "scopeLogs": st.lists(scope_logs, max_size=2)}
)
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)
documents = st.one_of(st.fixed_dictionaries({"resourceLogs": st.lists(resource_logs, max_size=2)}), anything)


def protobuf_body(values: list[tuple[str, str, int]]) -> bytes:
    request = logs_service_pb2.ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add().log_records
    for key, text, number in values:
        record = records.add(time_unix_nano=abs(number) % 2**64)
        record.body.string_value = "claude_code.api_request"
        record.attributes.append(common_pb2.KeyValue(key="session.id", value=common_pb2.AnyValue(string_value=key)))
        record.attributes.append(common_pb2.KeyValue(key="input_tokens", value=common_pb2.AnyValue(string_value=text)))
        record.attributes.append(common_pb2.KeyValue(key="output_tokens", value=common_pb2.AnyValue(int_value=number)))
    return request.SerializeToString()


def check(response) -> None:
    assert response.status_code < 500, response.content[:300]
    if response.status_code != 200:
        assert response.status_code in (400, 413, 415)


def test_random_json_bodies_never_fail_the_server(db):
    key = make_client("acme").key

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(documents)
    def run(document):
        before = Message.objects.count(), TelemetryRecord.objects.count()
        response = post(Client(), "/v1/logs", json.dumps(document).encode(), key=key)
        check(response)
        if response.status_code != 200:
            assert (Message.objects.count(), TelemetryRecord.objects.count()) == before
        metrics = post(Client(), "/v1/metrics", json.dumps(document).encode(), key=key)
        check(metrics)

    run()


def test_random_protobuf_bodies_never_fail_the_server(db):
    key = make_client("acme").key
    values = st.lists(
        st.tuples(
            st.text(alphabet=st.sampled_from("ab\x00\ud7ff-é"), max_size=300),
            st.text(max_size=12),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
        ),
        max_size=4,
    )

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.one_of(values.map(protobuf_body), st.binary(max_size=200)))
    def run(body):
        check(post(Client(), "/v1/logs", body, encoding="protobuf", key=key))
        check(post(Client(), "/v1/metrics", body, encoding="protobuf", key=key))

    run()


def test_nul_characters_are_stored_as_replacement_characters(db):
    from tests.ingest_app.otlp_payloads import logs_payload, metrics_payload, records, set_attribute

    acme = make_client("acme")
    payload = logs_payload()
    set_attribute(records(payload)[2], "tool_name", {"stringValue": "Ed\x00it"})
    set_attribute(records(payload)[0], "prompt", {"stringValue": "a\x00b"})
    assert post(Client(), "/v1/logs", payload, encoding="protobuf", key=acme.key).status_code == 200
    assert TelemetryRecord.objects.get(name="claude_code.tool_decision").attributes["tool_name"] == "Ed\ufffdit"
    assert Message.objects.get(role="user", content__startswith="a").content == "a\ufffdb"
    metrics = metrics_payload()
    metrics["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["name"] = "claude_code.session\x00count"
    assert post(Client(), "/v1/metrics", metrics, key=acme.key).status_code == 200
    assert TelemetryRecord.objects.filter(name="claude_code.session\ufffdcount").count() == 1


def test_random_metric_values_store_only_finite_numbers_and_refuse_the_rest(db):
    """Doubles of every kind (NaN, ±Infinity, subnormals, ±0) as gauge points over protobuf: each finite one is
    stored as sent, each other one is refused and counted in partialSuccess; never a 5xx, never a NaN row."""
    import math

    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

    key = make_client("acme").key

    def body(values: list[float]) -> bytes:
        request = metrics_service_pb2.ExportMetricsServiceRequest()
        metric = request.resource_metrics.add().scope_metrics.add().metrics.add(name="fuzzed.gauge")
        for index, value in enumerate(values):
            metric.gauge.data_points.add(time_unix_nano=1_772_000_000_000_000_000 + index * 1000, as_double=value)
        return request.SerializeToString()

    doubles = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 5e-324]), st.floats())

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(doubles, min_size=1, max_size=6))
    @example([math.nan, 1.0])
    def run(values):
        TelemetryRecord.objects.filter(name="fuzzed.gauge").delete()
        response = post(Client(), "/v1/metrics", body(values), encoding="protobuf", key=key)
        assert response.status_code == 200, response.content[:300]
        answer = metrics_service_pb2.ExportMetricsServiceResponse.FromString(response.content)
        not_finite = [value for value in values if not math.isfinite(value)]
        assert answer.partial_success.rejected_data_points == len(not_finite)
        if not_finite:
            assert "not a finite number" in answer.partial_success.error_message
        stored = sorted(TelemetryRecord.objects.filter(name="fuzzed.gauge").values_list("sent_value", flat=True))
        assert stored == sorted(value for value in values if math.isfinite(value))

    run()
