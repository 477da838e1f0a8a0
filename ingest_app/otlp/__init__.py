"""The OTLP/HTTP receiver: `POST /v1/logs` and `POST /v1/metrics` (docs/otel.md).

`decode` reads the bodies (protobuf or JSON, gzip) into plain records and writes the responses; `claude_code`
maps Claude Code's events and metrics onto sessions, messages and raw telemetry through the message service
(a call whose log is imported too is counted once: `ingest_app.pipeline.pairing`, which the import uses as well);
`views` are the two endpoints.
"""
