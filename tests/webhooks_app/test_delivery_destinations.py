"""Where a delivery may go, checked again when it is sent (after DNS, on the address connected to), and what the
delivery log tells a tenant about a receiver that did not answer: nothing that makes this server a port scanner."""

import socket
import threading
import time

import pytest
from django.db import connection as db
from django.db.migrations.executor import MigrationExecutor

from tests.support.api import make_client
from tests.webhooks_app.receiver import receiving
from webhooks_app.models import WebhookAttempt, WebhookDelivery
from webhooks_app.services import transport
from webhooks_app.services.deliveries import delivery_attempt


def subscribe(api, url) -> str:
    created = api.post("/api/v1/webhooks/", {"url": url, "events": ["record.created"]}, format="json")
    assert created.status_code == 201, created.json()
    return created.json()["id"]


def ping(api, webhook_id) -> WebhookDelivery:
    """The webhook's ping, sent now in this process (the attempt a worker would make)."""
    answer = api.post(f"/api/v1/webhooks/{webhook_id}/test/")
    assert answer.status_code == 202
    delivery_attempt(answer.json()["id"])
    return WebhookDelivery.objects.get(pk=answer.json()["id"])


def test_a_name_that_resolves_to_loopback_is_refused_when_sending(api, settings, resolver):
    settings.ACE_OUTBOUND_ALLOW = ""
    with receiving() as receiver:
        port = receiver.server.server_address[1]
        resolver["hooks.example.com"] = ["127.0.0.1"]  # public-looking, internal in fact (or rebound since saving)
        delivery = ping(api, subscribe(api, f"http://hooks.example.com:{port}/hooks/ace"))
        assert receiver.received == []
    assert delivery.response_status is None and delivery.response_body == ""
    assert "hooks.example.com has no address this server may call" in delivery.error
    assert "127.0.0.1" not in delivery.error  # what the name resolves to is not told to the tenant


def test_a_name_that_resolves_to_an_allowed_address_is_delivered_to(api, settings, resolver):
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    with receiving() as receiver:
        port = receiver.server.server_address[1]
        resolver["hooks.example.com"] = ["10.255.255.1", "127.0.0.1"]  # the refused address is never tried
        delivery = ping(api, subscribe(api, f"http://hooks.example.com:{port}/hooks/ace"))
        (request,) = receiver.wait_for(1)
    assert delivery.status == "succeeded" and delivery.response_status == 200
    assert request.headers["Host"] == f"hooks.example.com:{port}"
    assert resolver.lookups == ["hooks.example.com"]  # one lookup: the connection went to the address checked


def test_a_url_saved_before_the_policy_is_refused_when_sending_and_not_retried(api, settings):
    with receiving() as receiver:
        webhook = subscribe(api, receiver.url.replace("127.0.0.1", "127.1"))  # allowed when saved ...
        assert ping(api, webhook).status == "succeeded"
        settings.ACE_OUTBOUND_ALLOW = ""  # ... then the operator tightens the policy
        delivery = ping(api, webhook)
        assert len(receiver.received) == 1
    assert delivery.status == "failed" and delivery.attempts == 1
    assert delivery.error.startswith("Refused: 127.1 is 127.0.0.1 written another way: 127.0.0.1 is a loopback")


def _listening(handle) -> tuple[int, threading.Thread, socket.socket]:
    """A TCP server on 127.0.0.1 treating each connection with `handle(connection)`."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            handle(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], thread, server


def test_no_answer_reads_the_same_whether_the_port_is_closed_silent_or_resetting(settings):
    """An open port that never answers, one that resets, and a closed port: one error text, so the log is no
    port scanner (the detail is in the server's log)."""
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    held = []

    def reset(connection):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        connection.close()

    silent_port, _, silent = _listening(held.append)
    reset_port, _, resetting = _listening(reset)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # bound, never listening: connections are refused
        errors = {}
        for name, port in (("silent", silent_port), ("reset", reset_port), ("closed", closed_port)):
            started = time.monotonic()
            answer = transport.post(f"http://127.0.0.1:{port}/x", body=b"{}", headers={}, timeout=0.5)
            assert time.monotonic() - started < 5
            assert answer.status is None and answer.body == ""
            errors[name] = answer.error
    silent.close()
    resetting.close()
    for connection in held:
        connection.close()
    assert len(set(errors.values())) == 1, errors
    assert errors["closed"].startswith("Could not deliver: no HTTP answer within 0.5 s")


def test_the_answer_kept_is_an_excerpt(settings):
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    page = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 8000\r\nConnection: close\r\n\r\n" + b"x" * 8000

    def answer(connection):
        connection.recv(65536)
        connection.sendall(page)
        connection.close()

    port, _, server = _listening(answer)
    try:
        answered = transport.post(f"http://127.0.0.1:{port}/x", body=b"{}", headers={}, timeout=5)
    finally:
        server.close()
    assert answered.status == 500 and answered.body == "x" * transport.MAX_BODY_KEPT
    assert transport.MAX_BODY_KEPT <= 1024


@pytest.mark.django_db(transaction=True)
def test_delivery_logs_written_before_the_policy_lose_their_port_oracle_and_long_bodies():
    """Migrated back to before 0005, a delivery log is written as the old code wrote it (the raw reason a
    connection failed, 4,096 characters of a body); migrating forward leaves one text for every failure before an
    answer and 1,024 characters of a body, and keeps a policy refusal and an HTTP status as they were."""
    api = make_client("acme")
    webhook = subscribe(api, "https://hooks.example.com/ace")
    delivery = WebhookDelivery.objects.get(pk=api.post(f"/api/v1/webhooks/{webhook}/test/").json()["id"])
    executor = MigrationExecutor(db)
    executor.migrate([("webhooks_app", "0004_fair_turns_and_circuit_breaker")])
    try:
        old = [
            (None, "", "ConnectionRefusedError: [Errno 111] Connection refused"),
            (None, "", "Timed out after 10 s; gave up after 8 attempts"),
            (None, "", "Refused: 10.0.0.5 is a private address"),
            (502, "x" * 4096, "HTTP 502"),
        ]
        with db.cursor() as cursor:
            for number, (status, body, error) in enumerate(old, start=1):
                cursor.execute(
                    "INSERT INTO webhooks_app_webhookattempt (delivery_id, number, started_at, response_status, "
                    "response_headers, response_body, error, outcome) "
                    "VALUES (%s, %s, now(), %s, '{}', %s, %s, 'retry')",
                    [delivery.pk, number, status, body, error],
                )
    finally:
        executor = MigrationExecutor(db)
        executor.migrate(executor.loader.graph.leaf_nodes())
    attempts = WebhookAttempt.objects.filter(delivery=delivery).order_by("number")
    errors = list(attempts.values_list("error", flat=True))
    assert errors[0].startswith("Could not deliver: no HTTP answer") and "111" not in errors[0]
    assert errors[1].startswith("Could not deliver: no HTTP answer")
    assert errors[1].endswith("; gave up after 8 attempts")
    assert errors[2:] == ["Refused: 10.0.0.5 is a private address", "HTTP 502"]
    assert [len(body) for body in attempts.values_list("response_body", flat=True)] == [0, 0, 0, 1024]
