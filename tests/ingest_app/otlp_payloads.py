"""The recorded OTLP payloads of tests/data/otlp (Claude Code 2.1's exporter: attribute names and value types
as it sends them) and helpers to post them as OTLP/HTTP in either encoding."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

DATA = Path(__file__).resolve().parents[1] / "data" / "otlp"
SESSION_ID = "7c4e1f2a-9b3d-4e5f-8a6b-1c2d3e4f5a6b"
LOG_DIR = DATA / "claude" / ".claude" / "projects" / "-home-dev-cli-tool"
LOG_FILE = LOG_DIR / f"{SESSION_ID}.jsonl"
MODEL = "claude-sonnet-4-5-20250929"
# The three calls of the recording (the log's responses and the api_request events agree)
TOKENS = {"input_tokens": 30, "output_tokens": 485, "cache_read_tokens": 49550, "cache_creation_tokens": 2970}


def logs_payload() -> dict:
    return json.loads((DATA / "claude_code_logs.json").read_text())


def metrics_payload() -> dict:
    return json.loads((DATA / "claude_code_metrics.json").read_text())


def records(payload: dict) -> list[dict]:
    return payload["resourceLogs"][0]["scopeLogs"][0]["logRecords"]


def only(payload: dict, *names: str) -> dict:
    """The payload with only the records of these event names (`api_request`, …), in their order."""
    payload = copy.deepcopy(payload)
    kept = [r for r in records(payload) if r["body"]["stringValue"].removeprefix("claude_code.") in names]
    payload["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = kept
    return payload


def attribute(record: dict, key: str):
    for pair in record["attributes"]:
        if pair["key"] == key:
            return next(iter(pair["value"].values()))
    return None


def set_attribute(record: dict, key: str, value: dict) -> None:
    for pair in record["attributes"]:
        if pair["key"] == key:
            pair["value"] = value
            return
    record["attributes"].append({"key": key, "value": value})


def as_protobuf(payload: dict, kind: str = "logs") -> bytes:
    """The JSON payload as the exporter's http/protobuf would send it (OTLP/JSON's hex ids converted)."""
    message = (
        logs_service_pb2.ExportLogsServiceRequest()
        if kind == "logs"
        else metrics_service_pb2.ExportMetricsServiceRequest()
    )
    json_format.ParseDict(payload, message)
    return message.SerializeToString()


def post(client, path: str, payload, *, encoding: str = "json", gzipped: bool = False, key: str | None = None):
    """POST an OTLP body the way an exporter does (`encoding`: json or protobuf)."""
    if encoding == "protobuf":
        body = payload if isinstance(payload, bytes) else as_protobuf(payload, "logs" if "logs" in path else "metrics")
        content_type = "application/x-protobuf"
    else:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        content_type = "application/json"
    headers = {}
    if gzipped:
        body = gzip.compress(body)
        headers["HTTP_CONTENT_ENCODING"] = "gzip"
    if key is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return client.generic("POST", path, body, content_type=content_type, **headers)
