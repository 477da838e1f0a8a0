"""Webhooks through the API: the secret shown once, every change logged, bad input refused with what to fix and
nothing written, another tenant's webhooks and deliveries not found."""

import pytest

from webhooks_app.models import Webhook, WebhookChange, WebhookDelivery

URL = "https://hooks.example.com/ace"


def create(api, **body):
    return api.post("/api/v1/webhooks/", {"url": URL, "events": ["record.created"], **body}, format="json")


def test_create_shows_the_secret_once_and_every_change_is_logged(api):
    created = create(api, description="CRM sync", events=["record.created", "record.created", "import.finished"])
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 30
    assert body["events"] == ["record.created", "import.finished"]  # deduplicated, in order
    assert body["active"] is True and body["url"] == URL
    one = api.get(f"/api/v1/webhooks/{body['id']}/").json()
    assert "secret" not in one and one["description"] == "CRM sync"
    assert [w["id"] for w in api.get("/api/v1/webhooks/").json()["results"]] == [body["id"]]

    patched = api.patch(f"/api/v1/webhooks/{body['id']}/", {"active": False, "secret": "s" * 30}, format="json")
    assert patched.status_code == 200 and patched.json()["active"] is False and "secret" not in patched.json()
    assert Webhook.objects.get(pk=body["id"]).secret == "s" * 30
    assert api.patch(f"/api/v1/webhooks/{body['id']}/", {"active": False}, format="json").status_code == 200

    assert api.delete(f"/api/v1/webhooks/{body['id']}/").status_code == 204
    assert api.get(f"/api/v1/webhooks/{body['id']}/").status_code == 404
    assert api.get("/api/v1/webhooks/").json()["results"] == []
    # kept for audit: created, one real update (the repeat changed nothing), deleted; the secret never written down
    log = list(WebhookChange.objects.filter(webhook_id=body["id"]).order_by("id"))
    assert [c.action for c in log] == ["create", "update", "delete"]
    assert log[1].changes == {"active": [True, False], "secret": ["(set)", "(set)"]}
    assert all(c.actor.startswith("api:") for c in log)
    assert body["secret"] not in str([c.changes for c in log]) and "s" * 30 not in str([c.changes for c in log])


def test_the_changes_endpoint_lists_the_audit_log_newest_first(api):
    webhook = create(api).json()
    api.patch(f"/api/v1/webhooks/{webhook['id']}/", {"url": "https://other.example.com/x"}, format="json")
    changes = api.get(f"/api/v1/webhooks/{webhook['id']}/changes/").json()["results"]
    assert [c["action"] for c in changes] == ["update", "create"]
    assert changes[0]["changes"] == {"url": [URL, "https://other.example.com/x"]}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"url": "ftp://files.example.com/in"}, "url", "http:// or https://"),
        ({"url": "https://user:pw@hooks.example.com/x"}, "url", "user name and password"),
        ({"url": "hooks.example.com/x"}, "url", "http:// or https://"),
        ({"url": "https:///nohost"}, "url", "no host"),
        ({"url": "https://x.example.com/" + "a" * 2000}, "url", "2000"),
        ({"events": ["record.deleted"]}, "events", "record.created"),
        ({"events": []}, "events", "at least 1"),
        ({"events": "record.created"}, "events", "list"),
        ({"description": "d" * 1001}, "description", "1000"),
        ({"secret": "short"}, "secret", "24"),
        ({"secret": 12345678901234567890123456}, "secret", "string"),
        ({"colour": "blue"}, "colour", "Unknown field"),
        ({"active": "maybe"}, "active", ""),
    ],
)
def test_bad_input_is_refused_with_what_to_fix_and_nothing_is_written(api, body, field, words):
    answer = create(api, **body)
    assert answer.status_code == 400, answer.json()
    error = answer.json()
    assert field in error["errors"] and words in " ".join(error["errors"][field])
    assert error["detail"].startswith("Invalid input.")
    assert not Webhook.objects.exists() and not WebhookChange.objects.exists()


def test_bad_patch_changes_nothing(api):
    webhook = create(api).json()
    answer = api.patch(f"/api/v1/webhooks/{webhook['id']}/", {"url": "ftp://x", "active": False}, format="json")
    assert answer.status_code == 400 and "url" in answer.json()["errors"]
    assert Webhook.objects.get(pk=webhook["id"]).active is True
    assert WebhookChange.objects.filter(webhook_id=webhook["id"]).count() == 1


def test_private_loopback_metadata_and_disguised_addresses_are_refused_by_default(api, settings):
    settings.ACE_OUTBOUND_ALLOW = ""  # the default: the suite's own allows its loopback fakes
    for url, why in [
        ("http://127.0.0.1:8080/x", "127.0.0.1 is a loopback address"),
        ("http://10.1.2.3/x", "10.1.2.3 is a private address"),
        ("http://[::1]/x", "::1 is the loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://[64:ff9b::a9fe:a9fe]/latest", "NAT64 address carrying 169.254.169.254"),
        ("http://[::ffff:a9fe:a9fe]/", "169.254.169.254 written as IPv6 (IPv4-mapped)"),
        ("http://[::a9fe:a9fe]/", "IPv4-compatible address carrying 169.254.169.254"),
        ("http://2130706433/", "2130706433 is 127.0.0.1 written another way"),
        ("http://0x7f.1/", "0x7f.1 is 127.0.0.1 written another way"),
        ("http://0177.0.0.1/", "is 127.0.0.1 written another way"),
        ("http://127.1:8000/", "127.1 is 127.0.0.1 written another way"),
        ("http://localhost:8000/", "localhost is a loopback name"),
        ("http://api.localhost/", "api.localhost is a loopback name"),
        ("http://localhost./", "is a loopback name"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
    ]:
        answer = create(api, url=url)
        assert answer.status_code == 400, (url, answer.json())
        (message,) = answer.json()["errors"]["url"]
        assert why in message and "ACE_OUTBOUND_ALLOW" in message, (url, message)
        answer = api.patch(f"/api/v1/webhooks/{create(api).json()['id']}/", {"url": url}, format="json")
        assert answer.status_code == 400 and "url" in answer.json()["errors"]
    assert create(api, url="https://93.184.216.34/x").status_code == 201
    assert create(api, url="https://hooks.example.com/x").status_code == 201  # names: checked when connecting
    assert not Webhook.objects.filter(url__contains="169.254").exists()


def test_the_operator_allows_their_own_networks(api, settings):
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1,10.0.0.0/8"
    for url in ("http://127.0.0.1:8080/x", "http://10.1.2.3/x", "http://localhost:8080/x"):
        assert create(api, url=url).status_code == 201, url
    assert create(api, url="http://192.168.1.1/x").status_code == 400
    assert create(api, url="http://169.254.169.254/x").status_code == 400


def test_another_tenants_webhooks_and_deliveries_are_not_found(api, other_api):
    theirs = create(other_api).json()
    ping = other_api.post(f"/api/v1/webhooks/{theirs['id']}/test/")
    assert ping.status_code == 202
    delivery = ping.json()["id"]
    for method, path in [
        ("get", f"/api/v1/webhooks/{theirs['id']}/"),
        ("patch", f"/api/v1/webhooks/{theirs['id']}/"),
        ("delete", f"/api/v1/webhooks/{theirs['id']}/"),
        ("get", f"/api/v1/webhooks/{theirs['id']}/deliveries/"),
        ("get", f"/api/v1/webhooks/{theirs['id']}/changes/"),
        ("post", f"/api/v1/webhooks/{theirs['id']}/test/"),
        ("get", f"/api/v1/webhook-deliveries/{delivery}/"),
        ("post", f"/api/v1/webhook-deliveries/{delivery}/redeliver/"),
    ]:
        answer = getattr(api, method)(path, {"active": False} if method == "patch" else None, format="json")
        assert answer.status_code == 404, (method, path, answer.status_code)
        assert answer.json()["detail"]
    assert api.get("/api/v1/webhooks/").json()["results"] == []
    assert api.get("/api/v1/webhook-deliveries/").json()["results"] == []
    assert Webhook.objects.get(pk=theirs["id"]).active is True
    assert WebhookDelivery.objects.filter(pk=delivery).count() == 1


def test_delivery_filters_are_checked(api):
    webhook = create(api).json()
    assert api.post(f"/api/v1/webhooks/{webhook['id']}/test/").status_code == 202
    listing = api.get(f"/api/v1/webhooks/{webhook['id']}/deliveries/?event=ping").json()["results"]
    assert len(listing) == 1 and listing[0]["event"] == "ping" and listing[0]["payload"]["type"] == "ping"
    assert api.get(f"/api/v1/webhooks/{webhook['id']}/deliveries/?event=record.created").json()["results"] == []
    assert api.get(f"/api/v1/webhooks/{webhook['id']}/deliveries/?status=lost").status_code == 400
    assert api.get("/api/v1/webhook-deliveries/?status=lost").status_code == 400
    assert api.get(f"/api/v1/webhook-deliveries/?webhook={webhook['id']}&status=pending").json()["results"]
    assert api.get("/api/v1/webhook-deliveries/?webhook=not-a-uuid").status_code == 400
