"""Forgetting a user (sessions_app.services.forget) also deletes the webhook deliveries about them: their records
must not live on in the delivery log. Deliveries about other users, and other tenants', stay."""

from tests.support.api import make_client
from tests.webhooks_app.test_deliveries import subscribe
from webhooks_app.models import WebhookAttempt, WebhookDelivery
from webhooks_app.services.deliveries import events_publish


def _record_event(tenant, user_id: str) -> None:
    events_publish(
        tenant_id=tenant.pk,
        event="record.created",
        data={"record": {"user_id": user_id, "content": f"{user_id} likes museums"}, "actor": "api", "reason": ""},
    )


def test_forgetting_a_user_deletes_the_deliveries_about_them(db):
    acme, globex = make_client("acme"), make_client("globex")
    for client in (acme, globex):
        subscribe(client, "https://hooks.example.com/ace", events=["record.created", "budget.crossed"])
        _record_event(client.tenant, "xiaoming")
        _record_event(client.tenant, "xiaohong")
    events_publish(
        tenant_id=acme.tenant.pk,
        event="budget.crossed",
        data={"budget": {"scope": "user_id", "scope_value": "xiaoming"}, "used": 90, "limit": 100},
    )
    about = WebhookDelivery.objects.filter(tenant=acme.tenant, payload__data__record__user_id="xiaoming")
    assert about.count() == 1
    delivery = about.get()
    WebhookAttempt.objects.create(
        delivery=delivery, tenant_id=delivery.tenant_id, number=1, response_status=500, outcome="retry"
    )

    response = acme.post("/api/v1/users/xiaoming/forget/", {"confirm": "xiaoming"}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["deleted"]["webhooks_app.WebhookDelivery"] == 2  # the record event and the budget's
    assert not about.exists() and not WebhookAttempt.objects.exists()
    left = WebhookDelivery.objects.filter(tenant=acme.tenant)
    assert [d.payload["data"]["record"]["user_id"] for d in left] == ["xiaohong"]
    assert WebhookDelivery.objects.filter(tenant=globex.tenant).count() == 2  # another tenant's xiaoming stays
