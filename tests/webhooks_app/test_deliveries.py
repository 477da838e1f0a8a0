"""Deliveries end to end: the delivery tasks, run as a worker runs them (tests/support/burst.py), post to a real HTTP
receiver on loopback; the receiver checks the signature as docs/webhooks.md tells it to; failures are retried with
backoff or given up, and can be redelivered from the API and the admin."""

import hashlib
import hmac
import json
import time

import pytest

from sessions_app.signals import budget_crossed
from tests.support.api import make_client
from tests.webhooks_app.receiver import receiving
from webhooks_app.models import DeliveryStatus, WebhookDelivery
from webhooks_app.services.signing import signature_verify


@pytest.fixture
def fast_retries(settings):
    settings.ACE_WEBHOOKS_RETRY_BASE_SECONDS = 0.2
    settings.ACE_WEBHOOKS_TIMEOUT_SECONDS = 5


def subscribe(client, url, events=("record.created",)):
    answer = client.post("/api/v1/webhooks/", {"url": url, "events": list(events)}, format="json")
    assert answer.status_code == 201, answer.json()
    return answer.json()


def settled(delivery_id) -> bool:
    return WebhookDelivery.objects.get(pk=delivery_id).status != DeliveryStatus.PENDING


def test_a_record_created_through_the_api_arrives_signed_once_and_only_at_its_tenant(burst, fast_retries):
    api, other = make_client("acme"), make_client("globex")
    with receiving() as ours, receiving() as theirs:
        webhook = subscribe(api, ours.url)
        subscribe(other, theirs.url)
        created = api.post(
            "/api/v1/records/", {"user_id": "xiaoming", "type": "profile", "content": "Prefers museums"}, format="json"
        ).json()
        burst()
        assert burst.queued() == []  # nothing else will arrive: one delivery, none to the other tenant
        (request,) = ours.received
        assert theirs.received == []

    headers = request.headers
    assert request.path == "/hooks/ace" and headers["Content-Type"] == "application/json"
    assert headers["X-ACE-Event"] == "record.created"
    # the receiver's side: recompute the signature from the secret, the timestamp and the raw body
    expected = hmac.new(
        webhook["secret"].encode(), f"{headers['X-ACE-Timestamp']}.".encode() + request.body, hashlib.sha256
    ).hexdigest()
    assert headers["X-ACE-Signature"] == f"v1={expected}"
    assert signature_verify(
        secret=webhook["secret"],
        body=request.body,
        timestamp=headers["X-ACE-Timestamp"],
        header=headers["X-ACE-Signature"],
    )
    assert abs(int(headers["X-ACE-Timestamp"]) - time.time()) < 60
    assert not signature_verify(
        secret="whsec_wrong", body=request.body, timestamp=headers["X-ACE-Timestamp"], header=headers["X-ACE-Signature"]
    )
    assert not signature_verify(
        secret=webhook["secret"],
        body=request.body + b" ",
        timestamp=headers["X-ACE-Timestamp"],
        header=headers["X-ACE-Signature"],
    )
    old = str(int(headers["X-ACE-Timestamp"]) - 301)
    assert not signature_verify(
        secret=webhook["secret"], body=request.body, timestamp=old, header=headers["X-ACE-Signature"]
    )

    event = json.loads(request.body)
    assert event["type"] == "record.created" and event["id"] == headers["X-ACE-Event-Id"]
    assert event["tenant"] == str(api.tenant.pk)
    record = event["data"]["record"]
    assert record["id"] == created["id"] and record["content"] == "Prefers museums" and record["revision"] == 1
    assert record["created_at"] == created["created_at"]

    assert WebhookDelivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 1
    (delivery,) = api.get(f"/api/v1/webhooks/{webhook['id']}/deliveries/").json()["results"]
    assert delivery["id"] == headers["X-ACE-Delivery"] and delivery["status"] == "succeeded"
    assert delivery["attempts"] == 1 and delivery["response_status"] == 200 and delivery["delivered_at"]
    assert delivery["response_body"] == '{"status": 200}'


def test_a_failing_receiver_is_retried_with_backoff_until_it_answers(burst, fast_retries):
    api = make_client("acme")
    with receiving([500, 503, 200]) as receiver:
        webhook = subscribe(api, receiver.url, events=["record.created", "record.updated", "record.invalidated"])
        created = api.post(
            "/api/v1/records/", {"user_id": "u1", "type": "fact", "content": "Lives in Hangzhou"}, format="json"
        ).json()
        burst()
        requests = receiver.received
        delivery = WebhookDelivery.objects.get(webhook_id=webhook["id"])
        assert settled(delivery.pk)
    assert len(requests) == 3
    assert {r.headers["X-ACE-Delivery"] for r in requests} == {str(delivery.pk)}
    assert [r.headers["X-ACE-Attempt"] for r in requests] == ["1", "2", "3"]
    assert len({r.headers["X-ACE-Event-Id"] for r in requests}) == 1
    detail = api.get(f"/api/v1/webhook-deliveries/{delivery.pk}/").json()
    assert detail["status"] == "succeeded" and detail["attempts"] == 3 and detail["error"] == ""
    assert [(a["number"], a["response_status"], a["outcome"]) for a in detail["attempt_log"]] == [
        (1, 500, "retry"),
        (2, 503, "retry"),
        (3, 200, "succeeded"),
    ]
    assert detail["payload"]["data"]["record"]["id"] == created["id"]

    # an update and a delete are events too
    with receiving() as receiver:
        api.patch(f"/api/v1/webhooks/{webhook['id']}/", {"url": receiver.url}, format="json")
        api.patch(f"/api/v1/records/{created['id']}/", {"content": "Lives in Shanghai"}, format="json")
        api.delete(f"/api/v1/records/{created['id']}/")
        burst()
        requests = receiver.received
    assert sorted(r.headers["X-ACE-Event"] for r in requests) == ["record.invalidated", "record.updated"]
    invalidated = WebhookDelivery.objects.get(event="record.invalidated").payload["data"]
    assert invalidated["record"]["valid"] is False and invalidated["reason"] == "deleted"
    assert invalidated["record"]["revision"] == 3


@pytest.mark.parametrize("status", [410, 400])
def test_an_answer_not_worth_retrying_fails_at_once(burst, fast_retries, status):
    api = make_client("acme")
    with receiving([status]) as receiver:
        webhook = subscribe(api, receiver.url)
        api.post("/api/v1/records/", {"user_id": "u", "type": "fact", "content": "Gone"}, format="json")
        burst()
        delivery = WebhookDelivery.objects.get(webhook_id=webhook["id"])
        assert settled(delivery.pk)
        assert burst.queued() == []  # no second attempt will come
        assert len(receiver.received) == 1
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 1
    assert delivery.response_status == status and delivery.error == f"HTTP {status}"


def test_attempts_stop_at_the_maximum(burst, fast_retries, settings):
    settings.ACE_WEBHOOKS_MAX_ATTEMPTS = 2
    api = make_client("acme")
    with receiving([502]) as receiver:
        webhook = subscribe(api, receiver.url)
        api.post("/api/v1/records/", {"user_id": "u", "type": "fact", "content": "Never"}, format="json")
        burst()
        delivery = WebhookDelivery.objects.get(webhook_id=webhook["id"])
        assert settled(delivery.pk)
        assert burst.queued() == []  # no third attempt will come
        assert len(receiver.received) == 2
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 2
    assert delivery.error == "HTTP 502; gave up after 2 attempts"


def test_redeliver_from_the_api_and_the_admin(burst, fast_retries, client, django_user_model):
    api = make_client("acme")
    with receiving([410, 200]) as receiver:
        webhook = subscribe(api, receiver.url)
        api.post("/api/v1/records/", {"user_id": "u", "type": "fact", "content": "Again"}, format="json")
        original = WebhookDelivery.objects.get(webhook_id=webhook["id"])
        burst()
        assert settled(original.pk)
        answer = api.post(f"/api/v1/webhook-deliveries/{original.pk}/redeliver/")
        assert answer.status_code == 202, answer.json()
        again = answer.json()
        assert again["redelivery_of"] == str(original.pk) and again["event_id"] == str(original.event_id)
        burst()
        assert settled(again["id"])
        assert WebhookDelivery.objects.get(pk=again["id"]).status == DeliveryStatus.SUCCEEDED

        staff = django_user_model.objects.create_superuser(username="ops", password="x", email="")
        client.force_login(staff)
        page = client.get("/admin/webhooks_app/webhookdelivery/")
        assert page.status_code == 200 and "record.created" in page.content.decode()
        detail = client.get(f"/admin/webhooks_app/webhookdelivery/{original.pk}/change/").content.decode()
        assert "410" in detail and str(original.event_id) in detail
        client.post(
            "/admin/webhooks_app/webhookdelivery/", {"action": "redeliver", "_selected_action": [str(original.pk)]}
        )
        burst()
        assert len(receiver.received) == 3
        third = WebhookDelivery.objects.filter(redelivery_of=original, requested_by="admin:ops").get()
        assert settled(third.pk)
    assert len({r.headers["X-ACE-Event-Id"] for r in receiver.received}) == 1
    assert len({r.headers["X-ACE-Delivery"] for r in receiver.received}) == 3
    actions = api.get(f"/api/v1/webhooks/{webhook['id']}/changes/").json()["results"]
    assert [(c["action"], c["actor"].split(":")[0]) for c in actions] == [
        ("redeliver", "admin"),
        ("redeliver", "api"),
        ("create", "api"),
    ]


def test_ping_budget_and_import_events_and_no_delivery_to_an_inactive_webhook(burst, fast_retries, tmp_path):
    api = make_client("acme")
    with receiving() as receiver:
        webhook = subscribe(api, receiver.url, events=["budget.crossed", "import.finished"])
        muted = subscribe(api, receiver.url, events=["budget.crossed"])
        api.patch(f"/api/v1/webhooks/{muted['id']}/", {"active": False}, format="json")
        assert api.post(f"/api/v1/webhooks/{webhook['id']}/test/").status_code == 202
        # what the budgets send (sessions_app.signals): after their commit, a JSON-ready payload
        budget_crossed.send(
            sender=None, tenant_id=api.tenant.pk, budget_id="b-1", threshold=80, payload={"limit": 100, "used": 81}
        )
        from ingest_app.pipeline import import_path

        log = tmp_path / "empty"
        log.mkdir()
        import_path(tenant=api.tenant, path=log)
        burst()
        assert burst.queued() == []
        received = receiver.received
    by_event = {r.headers["X-ACE-Event"]: json.loads(r.body) for r in received}
    assert sorted(by_event) == ["budget.crossed", "import.finished", "ping"] and len(receiver.received) == 3
    assert by_event["ping"]["data"]["webhook"] == webhook["id"]
    assert by_event["budget.crossed"]["data"] == {"limit": 100, "used": 81, "budget_id": "b-1", "threshold": 80}
    summary = by_event["import.finished"]["data"]
    assert summary["origin"] == "path" and summary["summary"]["files_seen"] == 0
    assert "files" not in summary["summary"]
    assert not WebhookDelivery.objects.filter(webhook_id=muted["id"]).exists()


def test_a_strategy_run_that_fails_for_good_is_announced(burst, fast_retries):
    from django.db import transaction

    from strategies_app.models import Strategy, Trigger
    from strategies_app.services.runs import run_request
    from tests.support.factories import SessionFactory

    api = make_client("acme")
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    with receiving() as receiver:
        subscribe(api, receiver.url, events=["strategy_run.failed"])
        with transaction.atomic():  # disabled before the worker starts it: the run fails
            run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
            Strategy.objects.filter(pk=strategy.pk).update(enabled=False)
        burst()
        (request,) = receiver.received
    data = json.loads(request.body)["data"]["run"]
    assert request.headers["X-ACE-Event"] == "strategy_run.failed"
    assert data["id"] == str(run.pk) and data["strategy"] == "user-profile" and data["session"] == str(session.pk)
    assert "disabled" in data["error"]
