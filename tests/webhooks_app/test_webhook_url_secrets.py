"""A webhook URL's own secrets (a token or key in its query) are stored and called as given, and never shown:
not in API answers, the audit log, a ping's payload, the admin's lists and forms. The URL sent back as shown
keeps the stored secret; one holding the [REDACTED] mark elsewhere is refused."""

from webhooks_app.models import Webhook, WebhookChange, WebhookDelivery

TOKEN = "tok-9f8e7d6c5b4a"
URL = f"https://hooks.example.com/ace?token={TOKEN}&team=ops"
SHOWN = "https://hooks.example.com/ace?token=[REDACTED]&team=ops"


def test_the_token_in_a_webhook_url_is_stored_but_never_shown(api, client, django_user_model):
    created = api.post("/api/v1/webhooks/", {"url": URL, "events": ["record.created"]}, format="json")
    assert created.status_code == 201, created.json()
    webhook_id = created.json()["id"]
    assert created.json()["url"] == SHOWN
    assert Webhook.objects.get(pk=webhook_id).url == URL  # what deliveries are sent to
    assert api.get(f"/api/v1/webhooks/{webhook_id}/").json()["url"] == SHOWN
    assert [w["url"] for w in api.get("/api/v1/webhooks/").json()["results"]] == [SHOWN]

    # sent back as shown: unchanged, the token kept, nothing logged as a change
    patched = api.patch(f"/api/v1/webhooks/{webhook_id}/", {"url": SHOWN, "description": "ops"}, format="json")
    assert patched.status_code == 200 and patched.json()["url"] == SHOWN
    assert Webhook.objects.get(pk=webhook_id).url == URL
    # the mark anywhere else would be called as such: refused, naming the field
    moved = api.patch(
        f"/api/v1/webhooks/{webhook_id}/", {"url": "https://hooks.example.com/v2?token=[REDACTED]"}, format="json"
    )
    assert moved.status_code == 400 and "url" in moved.json()["errors"]
    assert Webhook.objects.get(pk=webhook_id).url == URL
    renewed = api.patch(f"/api/v1/webhooks/{webhook_id}/", {"url": URL.replace(TOKEN, "tok-new-123456")}, format="json")
    assert renewed.status_code == 200 and renewed.json()["url"] == SHOWN

    assert api.post(f"/api/v1/webhooks/{webhook_id}/test/").status_code == 202
    ping = WebhookDelivery.objects.get(webhook_id=webhook_id)
    changes = api.get(f"/api/v1/webhooks/{webhook_id}/changes/").json()["results"]
    stored = str(list(WebhookChange.objects.filter(webhook_id=webhook_id).values_list("changes", flat=True)))
    for shown in (str(ping.payload), str(changes), stored):
        assert TOKEN not in shown and "tok-new-123456" not in shown, shown
    assert ping.payload["data"]["url"] == SHOWN

    client.force_login(django_user_model.objects.create_superuser("ops", "ops@example.com", "x"))
    Webhook.objects.filter(pk=webhook_id).update(description="")  # the list names it by its URL then
    for page in ("/admin/webhooks_app/webhook/", f"/admin/webhooks_app/webhook/{webhook_id}/change/"):
        html = client.get(page).content.decode()
        assert "hooks.example.com/ace?token=[REDACTED]" in html and "tok-new-123456" not in html, page
