"""OTLP/HTTP request bodies (protobuf or JSON, gzip or not) → plain records, and the responses back.

Both encodings are read with opentelemetry-proto's message classes, so they give the same records. OTLP's
JSON differs from protobuf's canonical JSON mapping in one way that matters here: trace and span ids are hex,
not base64 (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding); enums as integers, 64-bit
integers as strings and lowerCamelCase keys are what `json_format` reads already. Unknown fields are
ignored, as the specification asks of receivers.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = (PROTOBUF, JSON)
_HEX_ID_KEYS = {"traceId", "spanId", "trace_id", "span_id", "parentSpanId", "parent_span_id"}
_NANOS = 1_000_000_000


class BodyError(ValueError):
    """A body that cannot be read: the receiver answers 400 with this text."""


class TooLarge(ValueError):
    """A body (or what it inflates to) beyond the request limit: 413."""


@dataclass
class LogRecord:
    name: str  # event.name / the record's event_name / its body, as sent
    time: datetime | None
    attributes: dict
    resource: dict
    body: object = None
    scope: str = ""
    severity: str = ""
    trace_id: str = ""
    span_id: str = ""


@dataclass
class MetricPoint:
    name: str
    unit: str
    time: datetime | None
    start_time: datetime | None
    value: float | None  # a sum's or a gauge's value (as sent: NaN too); None for the kinds not read as a number
    cumulative: bool  # a sum with cumulative temporality (turned into deltas per series when stored)
    attributes: dict
    resource: dict
    kind: str = "sum"
    data: dict = field(default_factory=dict)  # what a histogram or summary point says, as sent


def inflate(body: bytes, *, encoding: str, limit: int) -> bytes:
    """The body as sent, un-gzipped when `Content-Encoding: gzip` (never inflated beyond `limit` bytes)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise BodyError(f"Content-Encoding {encoding!r} is not supported: send gzip or none.")
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise BodyError(f"The body is not valid {encoding}: {error}.") from None
    if len(data) > limit:
        raise TooLarge(f"The body inflates to more than {limit} bytes.")
    if not inflater.eof:
        raise BodyError(f"The {encoding} body is truncated.")
    return data


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _parse(body: bytes, media: str, message: Message) -> Message:
    if media == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RecursionError, ValueError) as error:
            raise BodyError(f"The body is not a valid {type(message).__name__} protobuf: {error}.") from None
        return message
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise BodyError(f"The body is not valid JSON: {error}.") from None
    if not isinstance(document, dict):
        raise BodyError(f"The body must be a JSON object (an OTLP {type(message).__name__}).")
    try:
        json_format.ParseDict(_hex_ids_to_base64(document), message, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError, AttributeError) as error:
        raise BodyError(f"The body is not a valid OTLP/JSON {type(message).__name__}: {error}.") from None
    return message


def _hex_ids_to_base64(value):
    if isinstance(value, dict):
        converted = {}
        for key, item in value.items():
            if key in _HEX_ID_KEYS and isinstance(item, str):
                try:
                    item = base64.b64encode(bytes.fromhex(item)).decode()
                except ValueError:
                    raise BodyError(f"{key} must be hex (OTLP/JSON): {item[:40]!r}.") from None
            else:
                item = _hex_ids_to_base64(item)
            converted[key] = item
        return converted
    if isinstance(value, list):
        return [_hex_ids_to_base64(item) for item in value]
    return value


# -- values -------------------------------------------------------------------------------------------------
def any_value(value):
    """An OTLP AnyValue as a plain JSON value (bytes as hex)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_dict(value.kvlist_value.values)
    if kind == "bytes_value":
        return binascii.hexlify(value.bytes_value).decode()
    if kind == "string_value":
        return clean(value.string_value)
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else str(number)  # JSON has no NaN
    return getattr(value, kind)


def attributes_dict(pairs) -> dict:
    return {clean(pair.key): any_value(pair.value) for pair in pairs}


def clean(text: str) -> str:
    """PostgreSQL holds no NUL in text or jsonb: it becomes U+FFFD, as in every other write path."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def nanos_to_datetime(nanos: int) -> datetime | None:
    if not nanos:
        return None
    try:
        return datetime.fromtimestamp(nanos // _NANOS, tz=UTC).replace(microsecond=(nanos % _NANOS) // 1000)
    except (OverflowError, OSError, ValueError):
        return None


def _clean_json(value):
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(key): _clean_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean_json(item) for item in value]
    return value


# -- requests -----------------------------------------------------------------------------------------------
def decode_logs(body: bytes, media: str) -> list[LogRecord]:
    request = _parse(body, media, logs_service_pb2.ExportLogsServiceRequest())
    records = []
    for resource_logs in request.resource_logs:
        resource = attributes_dict(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                attributes = attributes_dict(record.attributes)
                body_value = any_value(record.body) if record.HasField("body") else None
                name = attributes.get("event.name") or clean(record.event_name) or body_value
                records.append(
                    LogRecord(
                        name=name if isinstance(name, str) else "",
                        time=nanos_to_datetime(record.time_unix_nano or record.observed_time_unix_nano),
                        attributes=attributes,
                        resource=resource,
                        body=body_value,
                        scope=clean(scope_logs.scope.name),
                        severity=clean(record.severity_text),
                        trace_id=record.trace_id.hex(),
                        span_id=record.span_id.hex(),
                    )
                )
    return records


def decode_metrics(body: bytes, media: str) -> list[MetricPoint]:
    request = _parse(body, media, metrics_service_pb2.ExportMetricsServiceRequest())
    points = []
    for resource_metrics in request.resource_metrics:
        resource = attributes_dict(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind in ("sum", "gauge"):
                    data = getattr(metric, kind)
                    cumulative = kind == "sum" and data.aggregation_temporality == 2  # CUMULATIVE
                    for point in data.data_points:
                        number = point.WhichOneof("value")
                        value = None if number is None else float(getattr(point, number))  # NaN refused later
                        points.append(
                            MetricPoint(
                                name=clean(metric.name),
                                unit=clean(metric.unit),
                                kind=kind,
                                cumulative=cumulative,
                                time=nanos_to_datetime(point.time_unix_nano),
                                start_time=nanos_to_datetime(point.start_time_unix_nano),
                                value=value,
                                attributes=attributes_dict(point.attributes),
                                resource=resource,
                            )  # fmt: skip
                        )
                elif kind is not None:  # histograms and summaries: kept as sent, not read as one number
                    for point in getattr(metric, kind).data_points:
                        data = _clean_json(json_format.MessageToDict(point, preserving_proto_field_name=True))
                        data.pop("attributes", None)
                        points.append(
                            MetricPoint(
                                name=clean(metric.name),
                                unit=clean(metric.unit),
                                kind=kind,
                                cumulative=False,
                                time=nanos_to_datetime(point.time_unix_nano),
                                start_time=nanos_to_datetime(point.start_time_unix_nano),
                                value=None,
                                attributes=attributes_dict(point.attributes),
                                resource=resource,
                                data=data,
                            )  # fmt: skip
                        )
    return points


# -- responses ----------------------------------------------------------------------------------------------
def _encode(message: Message, media: str) -> bytes:
    if media == PROTOBUF:
        return message.SerializeToString()
    return json.dumps(json_format.MessageToDict(message)).encode()


def logs_response(*, rejected: int, error_message: str, media: str) -> bytes:
    response = logs_service_pb2.ExportLogsServiceResponse()
    if rejected or error_message:
        response.partial_success.rejected_log_records = rejected
        response.partial_success.error_message = error_message
    return _encode(response, media)


def metrics_response(*, rejected: int, error_message: str, media: str) -> bytes:
    response = metrics_service_pb2.ExportMetricsServiceResponse()
    if rejected or error_message:
        response.partial_success.rejected_data_points = rejected
        response.partial_success.error_message = error_message
    return _encode(response, media)


def status_body(*, code: int, message: str, media: str) -> bytes:
    """An error's body: a google.rpc.Status, as the OTLP/HTTP specification asks, in the request's encoding
    (JSON also carries the API's {"detail", "errors"} shape)."""
    if media == PROTOBUF:
        return status_pb2.Status(code=code, message=message).SerializeToString()
    return json.dumps({"code": code, "message": message, "detail": message, "errors": {}}).encode()
