"""The circuit breaker of a webhook: failures in a row open it, its deliveries are then held (not attempted, not
lost, their attempts not used up), a probe after the cool-down closes it and the held ones go; the API and the
admin show it and reset it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.api import make_client
from tests.support.waiting import wait_for
from tests.webhooks_app.receiver import receiving
from webhooks_app.models import DeliveryStatus, Webhook, WebhookDelivery


@pytest.fixture
def breaker_settings(settings):
    settings.ACE_WEBHOOKS_ALLOW_PRIVATE = True
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1,::1"  # the outbound policy's allow-list (harmless before it exists)
    settings.ACE_WEBHOOKS_TIMEOUT_SECONDS = 2
    settings.ACE_WEBHOOKS_RETRY_BASE_SECONDS = 0.1
    settings.ACE_WEBHOOKS_MAX_ATTEMPTS = 10
    settings.ACE_WEBHOOKS_BREAKER_FAILURES = 3
    settings.ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS = 1.0
    return settings


def subscribe(client, url) -> dict:
    answer = client.post("/api/v1/webhooks/", {"url": url, "events": ["record.created"]}, format="json")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["breaker"] == {
        "state": "closed",
        "since": None,
        "consecutive_failures": 0,
        "next_probe_at": None,
    }
    return answer.json()


def remember(client, count: int) -> None:
    for i in range(count):
        answer = client.post("/api/v1/records/", {"user_id": "u", "type": "fact", "content": f"n{i}"}, format="json")
        assert answer.status_code == 201, answer.json()


def breaker_when_open(client, webhook_id):
    def is_open():
        breaker = client.get(f"/api/v1/webhooks/{webhook_id}/").json()["breaker"]
        return breaker if breaker["state"] == "open" else None

    return wait_for(is_open)


def all_succeeded(webhook_id, count: int):
    deliveries = WebhookDelivery.objects.filter(webhook_id=webhook_id)
    return lambda: deliveries.filter(status=DeliveryStatus.SUCCEEDED).count() == count


def test_failures_in_a_row_open_the_breaker_and_a_probe_after_the_cool_down_sends_the_held_deliveries(
    celery_worker, breaker_settings
):
    """A real worker: the test looks at the open breaker while the worker waits out the cool-down."""
    api = make_client("acme")
    with receiving([503, 503, 503, 200]) as receiver:
        webhook = subscribe(api, receiver.url)
        remember(api, 5)
        breaker = breaker_when_open(api, webhook["id"])
        assert breaker, "the breaker did not open"
        assert breaker["consecutive_failures"] == 3 and breaker["since"] and breaker["next_probe_at"]
        held = WebhookDelivery.objects.filter(webhook_id=webhook["id"], status=DeliveryStatus.PENDING).count()
        assert held == 5  # held, none lost, none given up
        assert wait_for(all_succeeded(webhook["id"], 5))
    requests = receiver.received
    assert len(requests) == 3 + 5  # three failures, the probe, the four held ones: nothing tried while open
    assert requests[3].at - requests[2].at >= 0.9  # the probe came after the cool-down
    deliveries = WebhookDelivery.objects.filter(webhook_id=webhook["id"])
    assert sum(d.attempts for d in deliveries) == 8  # one per request: holding used no attempt up

    after = api.get(f"/api/v1/webhooks/{webhook['id']}/").json()["breaker"]
    assert after == {"state": "closed", "since": None, "consecutive_failures": 0, "next_probe_at": None}
    changes = api.get(f"/api/v1/webhooks/{webhook['id']}/changes/").json()["results"]
    assert [c["action"] for c in changes] == ["breaker_close", "breaker_open", "create"]
    opened = changes[1]
    assert opened["actor"] == "system:breaker" and opened["changes"]["state"] == ["closed", "open"]
    assert opened["changes"]["cool_down_seconds"] == [None, 1.0]


def test_a_probe_that_fails_opens_the_breaker_again_for_twice_as_long(burst, breaker_settings):
    api = make_client("acme")
    with receiving([503, 503, 503, 503, 200]) as receiver:
        webhook = subscribe(api, receiver.url)
        remember(api, 3)
        burst(within=10)  # the two cool-downs (1 s, then 2 s) included
        assert all_succeeded(webhook["id"], 3)()
    requests = receiver.received
    assert len(requests) == 3 + 1 + 3  # three failures, a failed probe, then a probe and the two held ones
    first_cool_down, second_cool_down = requests[3].at - requests[2].at, requests[4].at - requests[3].at
    assert 0.9 <= first_cool_down < 1.9 and second_cool_down >= 1.9, (first_cool_down, second_cool_down)
    changes = api.get(f"/api/v1/webhooks/{webhook['id']}/changes/").json()["results"]
    assert [c["action"] for c in changes] == ["breaker_close", "breaker_open", "breaker_open", "create"]
    assert changes[1]["changes"]["cool_down_seconds"] == [None, 2.0]


def test_a_reset_from_the_api_sends_the_held_deliveries_at_once(burst, breaker_settings):
    breaker_settings.ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS = 600
    api, other = make_client("acme"), make_client("globex")
    with receiving([503, 503, 503, 200]) as receiver:
        webhook = subscribe(api, receiver.url)
        remember(api, 4)
        burst()  # the probe, 600 s away, stays queued
        assert api.get(f"/api/v1/webhooks/{webhook['id']}/").json()["breaker"]["state"] == "open"
        assert other.post(f"/api/v1/webhooks/{webhook['id']}/reset-breaker/").status_code == 404  # not theirs
        answer = api.post(f"/api/v1/webhooks/{webhook['id']}/reset-breaker/")
        assert answer.status_code == 200, answer.json()
        assert answer.json()["breaker"]["state"] == "closed"
        burst()
        assert all_succeeded(webhook["id"], 4)(), "the held deliveries did not go after a reset"
    assert len(receiver.received) == 3 + 4
    changes = api.get(f"/api/v1/webhooks/{webhook['id']}/changes/").json()["results"]
    assert [(c["action"], c["actor"].split(":")[0]) for c in changes] == [
        ("breaker_reset", "api"),
        ("breaker_open", "system"),
        ("create", "api"),
    ]
    assert changes[0]["changes"]["consecutive_failures"] == [3, 0]


def test_the_admin_shows_the_breaker_and_resets_it(db, client, django_user_model, settings):
    settings.ACE_WEBHOOKS_ALLOW_PRIVATE = True
    api = make_client("acme")
    webhook = subscribe(api, "https://hooks.example.com/ace")
    Webhook.objects.filter(pk=webhook["id"]).update(
        consecutive_failures=7,
        breaker_opened_at=timezone.now(),
        breaker_probe_at=timezone.now() + timedelta(minutes=5),
        breaker_trips=2,
    )
    staff = django_user_model.objects.create_superuser(username="ops", password="x", email="")
    client.force_login(staff)
    listing = client.get("/admin/webhooks_app/webhook/?breaker=open").content.decode()
    assert "hooks.example.com" in listing and "ace-badge-red" in listing
    page = client.get(f"/admin/webhooks_app/webhook/{webhook['id']}/change/").content.decode()
    assert "breaker open since" in page.lower() and "7" in page
    answer = client.post(
        "/admin/webhooks_app/webhook/", {"action": "reset_breakers", "_selected_action": [webhook["id"]]}, follow=True
    )
    assert "Closed the circuit breaker of 1 webhook(s)" in answer.content.decode()
    reset = Webhook.objects.get(pk=webhook["id"])
    assert reset.breaker_state == "closed" and reset.consecutive_failures == 0 and reset.breaker_trips == 0
    assert api.get(f"/api/v1/webhooks/{webhook['id']}/changes/").json()["results"][0]["actor"] == "admin:ops"


def test_deleting_a_webhook_gives_up_its_held_deliveries_at_once(db, settings):
    """Held deliveries of a webhook deleted meanwhile are not held until a probe: they fail, without a request."""
    from webhooks_app.services.deliveries import delivery_attempt, events_publish

    settings.ACE_WEBHOOKS_ALLOW_PRIVATE = True
    api = make_client("acme")
    webhook = subscribe(api, "https://hooks.example.com/ace")
    for i in range(3):
        events_publish(tenant_id=api.tenant.pk, event="record.created", data={"i": i})
    Webhook.objects.filter(pk=webhook["id"]).update(
        consecutive_failures=5, breaker_opened_at=timezone.now(), breaker_probe_at=timezone.now() + timedelta(hours=1)
    )
    held = list(WebhookDelivery.objects.filter(webhook_id=webhook["id"]).values_list("pk", flat=True))
    assert [delivery_attempt(pk).outcome for pk in held] == ["skipped"] * 3  # held while the breaker is open
    assert api.delete(f"/api/v1/webhooks/{webhook['id']}/").status_code == 204
    assert [delivery_attempt(pk).outcome for pk in held] == ["failed"] * 3
    assert set(WebhookDelivery.objects.filter(pk__in=held).values_list("error", "attempts")) == {
        ("Not sent: the webhook was deleted.", 0)
    }
