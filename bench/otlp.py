"""Claude Code `api_request` events per second through `POST /v1/logs` (OTLP/HTTP protobuf, in-process through
Django's test client: URL routing, middleware, auth, decoding, mapping, the message service, the response),
against a raw COPY floor of the same message rows measured in the same run.

    .venv/bin/python bench/otlp.py --quick     # 5,000 events per side
    .venv/bin/python bench/otlp.py             # 20,000 events per side

Options: `--events N` (per side), `--batch 500` (events per request, Claude Code's default maximum batch is
512), `--sessions 10` (sessions the events are spread over, round-robin per request).
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

import benchlib


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="5,000 events per side")
    return parser.parse_args()


def make_batches(args, run: str) -> list[bytes]:
    """Protobuf ExportLogsServiceRequests of `api_request` events shaped like Claude Code 2.1's."""
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
    from opentelemetry.proto.common.v1 import common_pb2

    rng = random.Random(7)
    start = datetime(2026, 3, 2, 9, tzinfo=UTC)
    batches = []
    for number in range(args.events // args.batch):
        session_id = f"{run}-{number % args.sessions:04d}"
        request = logs_service_pb2.ExportLogsServiceRequest()
        resource_logs = request.resource_logs.add()
        for key, value in (("service.name", "claude-code"), ("service.version", "2.1.62"), ("os.type", "linux")):
            resource_logs.resource.attributes.append(
                common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))
            )
        scope = resource_logs.scope_logs.add()
        scope.scope.name, scope.scope.version = "com.anthropic.claude_code.events", "2.1.62"
        for index in range(args.batch):
            moment = start + timedelta(seconds=number * args.batch + index)
            record = scope.log_records.add(time_unix_nano=int(moment.timestamp() * 1e9))
            record.body.string_value = "claude_code.api_request"
            attributes = {
                "session.id": session_id, "user.email": "dev@example.com", "event.name": "api_request",
                "event.timestamp": moment.isoformat().replace("+00:00", "Z"), "event.sequence": str(index),
                "prompt.id": f"{session_id}-p{index // 20}", "model": rng.choice(benchlib.MODELS),
                "input_tokens": str(rng.randint(1, 50)), "output_tokens": str(rng.randint(20, 2000)),
                "cache_read_tokens": str(rng.randint(0, 90_000)), "cache_creation_tokens": str(rng.randint(0, 4000)),
                "cost_usd": f"{rng.random() / 10:.5f}", "duration_ms": str(rng.randint(800, 30_000)),
                "speed": "normal", "query_source": "repl_main_thread",
            }  # fmt: skip
            for key, value in attributes.items():
                record.attributes.append(common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value)))
        batches.append(request.SerializeToString())
    return batches


def otlp_side(batches: list[bytes], key: str) -> float:
    from django.test import Client

    client = Client()
    started = time.perf_counter()
    for body in batches:
        response = client.post(
            "/v1/logs", body, content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="127.0.0.1",
        )  # fmt: skip
        assert response.status_code == 200, response.content[:300]
    return time.perf_counter() - started


def copy_side(batches: list[bytes], tenant, args) -> float:
    """The same rows the receiver stores (one assistant message per event), with COPY into a fresh session."""
    from ingest_app.otlp import claude_code, decode
    from sessions_app.models import Session

    session = Session.objects.create(tenant=tenant, tool="claude-code", agent_session_id=f"copy-{uuid.uuid4()}")
    received_at = datetime.now(UTC).isoformat()
    payloads, seq = [], 1
    for body in batches:
        items = [claude_code.read_event(record).item for record in decode.decode_logs(body, decode.PROTOBUF)]
        for item in items:
            item["created_at"] = item["created_at"].isoformat()
            item.pop("conversation", None)
        payloads.append(
            benchlib.copy_rows(
                items, tenant_id=tenant.pk, session_id=session.pk, first_seq=seq, received_at=received_at
            )
        )
        seq += len(items)
    connection = benchlib.psycopg_connect()
    started = time.perf_counter()
    for payload in payloads:
        with connection.transaction(), connection.cursor() as cursor, cursor.copy(benchlib.COPY_MESSAGES_SQL) as copy:
            copy.write(payload)
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed


def cleanup(tenant) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sessions_app_session SET current_conversation_id = NULL WHERE tenant_id = %s", [tenant.pk]
        )
        for table in (
            "ingest_app_telemetryrecord", "sessions_app_message", "sessions_app_llmrequest",
            "sessions_app_conversation", "sessions_app_sessionmodelusage",
        ):  # fmt: skip
            cursor.execute(
                f"DELETE FROM {table} WHERE session_id IN (SELECT id FROM sessions_app_session WHERE tenant_id = %s)",
                [tenant.pk],
            )  # noqa: E501
        cursor.execute("DELETE FROM sessions_app_session WHERE tenant_id = %s", [tenant.pk])


def main() -> None:
    args = parse_args()
    if args.quick:
        args.events = 5_000
    benchlib.setup_django()
    from sessions_app.models import Message, Session
    from sessions_app.services.apikeys import apikey_create

    created = apikey_create(tenant_name="bench-otlp")
    tenant, key = created.api_key.tenant, created.plain_key
    run = uuid.uuid4().hex[:8]
    batches = make_batches(args, run)
    events = len(batches) * args.batch
    warm = make_batches(argparse.Namespace(events=args.batch, batch=args.batch, sessions=1), f"warm-{run}")
    otlp_side(warm, key)  # imports, first connections, the sessions' first rows
    copy_seconds = copy_side(batches, tenant, args)
    otlp_seconds = otlp_side(batches, key)
    stored = Message.objects.filter(session__agent_session_id__startswith=run, session__tenant=tenant).count()
    requests = sum(
        Session.objects.filter(tenant=tenant, agent_session_id__startswith=run).values_list("requests", flat=True)
    )
    assert stored == events and requests == events, (stored, requests, events)
    rows = [
        ["POST /v1/logs (protobuf, in-process)", f"{events:,}", f"{otlp_seconds:.2f}", f"{events / otlp_seconds:,.0f}"],
        ["COPY floor (message rows only)", f"{events:,}", f"{copy_seconds:.2f}", f"{events / copy_seconds:,.0f}"],
    ]
    benchlib.print_table(["side", "events", "seconds", "events/s"], rows, title=benchlib.database_description())
    print(f"\nreceiver / COPY: {copy_seconds / otlp_seconds:.0%} (batches of {args.batch}, {args.sessions} sessions)")
    path = benchlib.write_results(
        "otlp",
        {
            "events": events, "batch": args.batch, "sessions": args.sessions,
            "otlp_events_per_second": events / otlp_seconds, "copy_events_per_second": events / copy_seconds,
            "machine": benchlib.machine(), "code": benchlib.code_version(),
        },
    )  # fmt: skip
    print(f"results: {path}")
    cleanup(tenant)


if __name__ == "__main__":
    main()
