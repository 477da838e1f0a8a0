"""Record TTLs: an expired record is never recalled — at once, before any task runs — and the API says so; a
TTL that purges deletes it in the retention run, leaving an audit entry of what was deleted."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from memory_app.embeddings import records_embed
from memory_app.models import Record, RecordRevision, RecordTtl
from retention_app.models import RetentionRun

pytestmark = pytest.mark.django_db


def remember(api, content, type="fact", strategy="", user_id="xiaoming", message_ids=()):
    body = {"user_id": user_id, "type": type, "content": content, "strategy": strategy}
    body["source_message_ids"] = list(message_ids)
    response = api.post("/api/v1/records/", body, format="json")
    assert response.status_code == 201, response.content
    records_embed(record_ids=[response.json()["id"]])
    return response.json()["id"]


def age(record_id, days):
    """The record as if last changed `days` ago (the trigger recomputes its expiry from updated_at)."""
    Record.objects.filter(pk=record_id).update(updated_at=timezone.now() - timedelta(days=days))


def recalled(api, query):
    response = api.post("/api/v1/recall/", {"query": query, "user_id": "xiaoming"}, format="json")
    assert response.status_code == 200, response.content
    return {hit["id"] for hit in response.json()["results"]}


def ttl(api, **body):
    response = api.post("/api/v1/record-ttls/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_an_expired_record_is_not_recalled_at_once_and_the_api_shows_it(api, session):
    fact = remember(api, "Allergic to peanuts and shellfish")
    profile = remember(api, "Allergic to cats", type="profile")
    age(fact, 10)
    age(profile, 10)
    assert {fact, profile} <= recalled(api, "allergic")

    rule = ttl(api, record_type="fact", ttl_days=7)  # keep (the default): not recalled, kept for audit
    assert rule["on_expiry"] == "keep"
    assert recalled(api, "allergic peanuts") & {fact, profile} == {profile}  # no task has run
    shown = api.get(f"/api/v1/records/{fact}/").json()
    assert shown["expired"] is True and shown["valid"] is True and shown["expires_at"]
    assert api.get(f"/api/v1/records/{profile}/").json()["expires_at"] is None
    assert [r["id"] for r in api.get("/api/v1/records/?expired=true").json()["results"]] == [fact]
    assert fact not in {r["id"] for r in api.get("/api/v1/records/?expired=false").json()["results"]}
    context = api.get(f"/api/v1/sessions/{session.pk}/context/").json()  # no query: the most recent records
    assert fact not in context["prompt"] and profile in context["prompt"]

    # A longer TTL brings it back at once; the change is audited; deleting the TTL clears the expiry.
    assert api.patch(f"/api/v1/record-ttls/{rule['id']}/", {"ttl_days": 30}, format="json").status_code == 200
    assert fact in recalled(api, "allergic peanuts")
    assert api.delete(f"/api/v1/record-ttls/{rule['id']}/").status_code == 204
    assert Record.objects.get(pk=fact).expires_at is None
    events = api.get("/api/v1/retention/events/").json()["results"]
    assert [e["action"] for e in events] == ["ttl_deleted", "ttl_updated", "ttl_created"]
    assert events[1]["before"]["ttl_days"] == 7 and events[1]["after"]["ttl_days"] == 30

    # The run keeps an expired "keep" record (counted, never deleted).
    ttl(api, record_type="fact", ttl_days=7)
    call_command("ace_retention")
    run = RetentionRun.objects.get(tenant=api.tenant, dry_run=False)
    assert (run.records_expired, run.records_purged) == (1, 0) and Record.objects.filter(pk=fact).exists()


def test_a_purge_ttl_deletes_expired_records_in_the_run_with_an_audit_entry(api, session):
    message = api.post(
        f"/api/v1/sessions/{session.pk}/messages/", [{"role": "user", "content": "I moved to Shenzhen"}], format="json"
    ).json()[0]["id"]
    gone = remember(api, "Lives in Shenzhen", strategy="profile-extractor", message_ids=[message])
    fresh = remember(api, "Works in Nanshan", strategy="profile-extractor")
    other = remember(api, "Lives near the sea")  # same type, no strategy TTL: governed by nothing
    age(gone, 40)
    ttl(api, strategy="profile-extractor", ttl_days=30, on_expiry="purge")

    assert recalled(api, "Shenzhen Nanshan sea") & {gone, fresh, other} == {fresh, other}
    preview = api.get("/api/v1/retention/preview/").json()
    assert (preview["records_to_purge"], preview["records_expired"]) == (1, 0)

    call_command("ace_retention")
    assert api.get(f"/api/v1/records/{gone}/").status_code == 404
    assert not RecordRevision.objects.filter(record_id=gone).exists()
    assert Record.objects.filter(pk__in=[fresh, other]).count() == 2
    assert api.get(f"/api/v1/records/{fresh}/").status_code == 200
    (entry,) = [e for e in api.get("/api/v1/retention/events/").json()["results"] if e["action"] == "record_purged"]
    assert entry["subject_id"] == gone and entry["actor"] == "command"
    assert entry["before"]["source_message_ids"] == [message] and entry["before"]["strategy"] == "profile-extractor"
    assert "content" not in entry["before"]  # the audit says what was deleted, not what it said
    run = RetentionRun.objects.get(tenant=api.tenant, dry_run=False)
    assert run.records_purged == preview["records_to_purge"] == 1
    call_command("ace_retention")  # twice: nothing more
    assert RetentionRun.objects.filter(tenant=api.tenant).order_by("-started_at").first().records_purged == 0


def test_a_strategys_ttl_wins_over_its_types(api):
    by_strategy = remember(api, "Prefers window seats", strategy="travel")
    by_type = remember(api, "Prefers aisle seats")
    age(by_strategy, 20)
    age(by_type, 20)
    ttl(api, record_type="fact", ttl_days=10)
    ttl(api, strategy="travel", ttl_days=60)
    assert api.get(f"/api/v1/records/{by_strategy}/").json()["expired"] is False
    assert api.get(f"/api/v1/records/{by_type}/").json()["expired"] is True
    # A change to the record counts from its new updated_at.
    response = api.patch(f"/api/v1/records/{by_type}/", {"content": "Prefers aisle seats now"}, format="json")
    assert response.status_code == 200 and response.json()["expired"] is False


@pytest.mark.parametrize(
    "body, field",
    [
        ({"record_type": "fact", "ttl_days": 0}, "ttl_days"),
        ({"record_type": "fact", "ttl_days": 36_501}, "ttl_days"),
        ({"record_type": "fact", "ttl_days": "7"}, "ttl_days"),
        ({"record_type": "fact"}, "ttl_days"),
        ({"record_type": "memo", "ttl_days": 7}, "record_type"),
        ({"record_type": "fact", "strategy": "travel", "ttl_days": 7}, "record_type"),
        ({"ttl_days": 7}, "record_type"),
        ({"record_type": "fact", "ttl_days": 7, "on_expiry": "shred"}, "on_expiry"),
        ({"record_type": "fact", "ttl_days": 7, "days": 1}, "days"),
    ],
)
def test_bad_ttls_are_refused_with_what_to_fix(api, body, field):
    response = api.post("/api/v1/record-ttls/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"] and response.json()["detail"]
    assert api.get("/api/v1/record-ttls/").json()["results"] == []


def test_a_second_ttl_for_the_same_target_is_refused_and_tenants_are_apart(api, other_api):
    rule = ttl(api, record_type="task", ttl_days=3)
    response = api.post("/api/v1/record-ttls/", {"record_type": "task", "ttl_days": 5}, format="json")
    assert response.status_code == 400 and "already a TTL" in response.json()["errors"]["record_type"][0]
    assert other_api.get(f"/api/v1/record-ttls/{rule['id']}/").status_code == 404
    assert other_api.patch(f"/api/v1/record-ttls/{rule['id']}/", {"ttl_days": 9}, format="json").status_code == 404
    assert other_api.delete(f"/api/v1/record-ttls/{rule['id']}/").status_code == 404
    assert other_api.get("/api/v1/record-ttls/").json()["results"] == []
    # Their records of that type are not governed by our TTL.
    theirs = remember(other_api, "Finish the report", type="task")
    age(theirs, 10)
    assert other_api.get(f"/api/v1/records/{theirs}/").json()["expires_at"] is None


def test_a_ttl_naming_no_strategy_of_the_tenant_is_refused_with_the_ones_it_has(api, other_api):
    body = {"name": "their-secret", "type": "fact", "prompt": "Remember facts from {messages}"}
    created = other_api.post("/api/v1/strategies/", body, format="json")
    assert created.status_code == 201, created.content
    response = api.post("/api/v1/record-ttls/", {"strategy": "user-profil", "ttl_days": 7}, format="json")
    assert response.status_code == 400, response.content
    message = response.json()["errors"]["strategy"][0]
    assert '"user-profil" is not a strategy' in message
    assert "user-profile" in message and "task-progress" in message  # the built-in ones every tenant has
    assert "their-secret" not in message  # another tenant's
    assert api.get("/api/v1/record-ttls/").json()["results"] == []

    # Its own strategies and the names its records carry are accepted; a rename to an unknown one is not.
    assert ttl(api, strategy="user-profile", ttl_days=30)["strategy"] == "user-profile"
    remember(api, "Prefers trains", strategy="travel-notes")
    rule = ttl(api, strategy="travel-notes", ttl_days=30)
    assert (
        "travel-notes"
        in api.post("/api/v1/record-ttls/", {"strategy": "travel", "ttl_days": 7}, format="json").json()["errors"][
            "strategy"
        ][0]
    )
    response = api.patch(f"/api/v1/record-ttls/{rule['id']}/", {"strategy": "travel"}, format="json")
    assert response.status_code == 400 and "strategy" in response.json()["errors"]
    assert api.get(f"/api/v1/record-ttls/{rule['id']}/").json()["strategy"] == "travel-notes"
    assert api.patch(f"/api/v1/record-ttls/{rule['id']}/", {"ttl_days": 9}, format="json").status_code == 200


def test_the_admin_form_shows_an_unknown_strategy_as_an_error_on_its_field(api, client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser(username="ops", password="x", email=""))
    form = {"tenant": str(api.tenant.pk), "record_type": "", "ttl_days": "7", "on_expiry": "keep"}
    response = client.post("/admin/memory_app/recordttl/add/", {**form, "strategy": "no-such-strategy"})
    assert response.status_code == 200  # the form again, not a redirect
    errors = response.context["adminform"].form.errors
    assert '"no-such-strategy" is not a strategy' in errors["strategy"][0] and "user-profile" in errors["strategy"][0]
    assert RecordTtl.objects.count() == 0

    response = client.post("/admin/memory_app/recordttl/add/", {**form, "strategy": "user-profile"})
    assert response.status_code == 302
    saved = RecordTtl.objects.get()
    assert (saved.strategy, saved.ttl_days) == ("user-profile", 7)
    assert api.get("/api/v1/retention/events/").json()["results"][0]["action"] == "ttl_created"  # via the service
    change = f"/admin/memory_app/recordttl/{saved.pk}/change/"
    response = client.post(change, {"record_type": "", "strategy": "nope", "ttl_days": "7", "on_expiry": "keep"})
    assert response.status_code == 200 and "strategy" in response.context["adminform"].form.errors
    assert RecordTtl.objects.get().strategy == "user-profile"
