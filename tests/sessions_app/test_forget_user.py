"""Forgetting a user: every row of theirs goes, in every table, with an audit that does not name them; other users
and other tenants keep theirs; a dry run only counts."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from ingest_app.models import ImportedFile, TelemetryRecord
from memory_app.embeddings import messages_embed
from memory_app.models import MessageEmbedding, Record, RecordRevision
from sessions_app.models import (
    Conversation,
    ForgetAudit,
    LlmRequest,
    Message,
    Session,
    SessionModelUsage,
    StateVersion,
    Turn,
    UsageDaily,
    UsageHourly,
)
from sessions_app.services.forget import user_hash
from strategies_app.models import Strategy, StrategyRun

pytestmark = pytest.mark.django_db


def fill(client, user_id: str) -> str:
    """A user with a row in every table that holds a user's data."""
    session = client.post(
        "/api/v1/sessions/", {"name": f"{user_id}'s trip", "user_id": user_id, "tool": "chat"}, format="json"
    ).json()["id"]
    stored = client.post(
        f"/api/v1/sessions/{session}/messages/",
        [
            {"role": "user", "content": f"{user_id} likes museums"},
            {"role": "assistant", "content": "Noted", "request_id": "r1", "model": "m", "input_tokens": 10},
        ],
        format="json",
    ).json()
    messages_embed(message_ids=[m["id"] for m in stored])
    client.put(f"/api/v1/sessions/{session}/state/", {"stage": "plan"}, format="json")
    client.post(f"/api/v1/sessions/{session}/turns/", {"content": "And parks?"}, format="json")
    record = client.post(
        "/api/v1/records/",
        {"user_id": user_id, "type": "profile", "content": "Likes museums", "source_message_ids": [stored[0]["id"]]},
        format="json",
    ).json()
    client.patch(f"/api/v1/records/{record['id']}/", {"confidence": 0.5}, format="json")
    strategy = Strategy.objects.filter(tenant=client.tenant).first()
    assert client.post(f"/api/v1/strategies/{strategy.pk}/run/", {"session": session}, format="json").status_code == 202
    TelemetryRecord.objects.create(
        tenant=client.tenant, session_id=session, kind="event", name="tool_result", time=timezone.now(), key=session
    )
    ImportedFile.objects.create(tenant=client.tenant, session_id=session, path=f"/logs/{user_id}.jsonl")
    return session


def rows_of(tenant, user_id: str) -> dict[str, int]:
    sessions = Session.objects.filter(tenant=tenant, user_id=user_id)
    of_sessions = {"session__in": sessions}
    return {
        "sessions": sessions.count(),
        "conversations": Conversation.objects.filter(**of_sessions).count(),
        "messages": Message.objects.filter(**of_sessions).count(),
        "requests": LlmRequest.objects.filter(**of_sessions).count(),
        "state": StateVersion.objects.filter(**of_sessions).count(),
        "turns": Turn.objects.filter(**of_sessions).count(),
        "model usage": SessionModelUsage.objects.filter(**of_sessions).count(),
        "telemetry": TelemetryRecord.objects.filter(tenant=tenant, session__in=sessions).count(),
        "imported files": ImportedFile.objects.filter(tenant=tenant, session__in=sessions).count(),
        "hourly": UsageHourly.objects.filter(tenant=tenant, user_id=user_id).count(),
        "daily": UsageDaily.objects.filter(tenant=tenant, user_id=user_id).count(),
        "records": Record.objects.filter(tenant=tenant, user_id=user_id).count(),
        "revisions": RecordRevision.objects.filter(record__tenant=tenant, record__user_id=user_id).count(),
        "message vectors": MessageEmbedding.objects.filter(tenant=tenant, user_id=user_id).count(),
        "runs": StrategyRun.objects.filter(tenant=tenant, session__in=sessions).count(),
    }


def forget(client, user_id, **body):
    return client.post(f"/api/v1/users/{user_id}/forget/", {"confirm": user_id, **body}, format="json")


def test_forgetting_deletes_every_row_of_the_user_and_only_theirs(api, other_api):
    fill(api, "xiaoming")
    fill(api, "xiaohong")
    fill(other_api, "xiaoming")  # the same id in another tenant
    before = rows_of(api.tenant, "xiaoming")
    assert all(before.values()), before  # a row in every table to begin with
    others = rows_of(api.tenant, "xiaohong"), rows_of(other_api.tenant, "xiaoming")
    tokens = UsageHourly.objects.filter(tenant=api.tenant).aggregate(Sum("input_tokens"))["input_tokens__sum"]

    response = forget(api, "xiaoming")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dry_run"] is False
    assert body["deleted"]["sessions_app.Session"] == 1
    assert body["deleted"]["sessions_app.Message"] == before["messages"]
    assert body["deleted"]["memory_app.MessageEmbedding"] == before["message vectors"]
    assert body["deleted"]["memory_app.RecordRevision"] == before["revisions"]
    assert body["total"] == sum(body["deleted"].values())
    assert not any(rows_of(api.tenant, "xiaoming").values())
    assert (rows_of(api.tenant, "xiaohong"), rows_of(other_api.tenant, "xiaoming")) == others
    # Nothing of the user is found any more: no search hit, no vector, no record, and the totals dropped.
    assert not api.get("/api/v1/messages/?q=museums&user_id=xiaoming").json()["results"]
    assert api.get("/api/v1/messages/?q=xiaohong").json()["results"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_app_record WHERE user_id = 'xiaoming' AND tenant_id = %s", [api.tenant.pk]
        )
        assert cursor.fetchone()[0] == 0
    after = UsageHourly.objects.filter(tenant=api.tenant).aggregate(Sum("input_tokens"))["input_tokens__sum"]
    assert after == tokens - 10
    assert api.get("/api/v1/stats/?group_by=user_id").json()["totals"]["input_tokens"] == after


def test_the_audit_says_what_went_and_when_without_the_user_id(api):
    fill(api, "xiaoming")
    body = forget(api, "xiaoming").json()
    audit = ForgetAudit.objects.get(pk=body["audit"])
    assert audit.tenant == api.tenant
    assert audit.deleted == body["deleted"] and audit.total == body["total"] > 0
    assert audit.actor == "api"
    assert (timezone.now() - audit.forgotten_at).total_seconds() < 60
    assert audit.user_hash == user_hash(tenant_id=api.tenant.pk, user_id="xiaoming")
    stored = " ".join(str(value) for value in ForgetAudit.objects.filter(pk=audit.pk).values().get().values())
    assert "xiaoming" not in stored


def test_a_dry_run_counts_and_writes_nothing(api):
    fill(api, "xiaoming")
    before = rows_of(api.tenant, "xiaoming")
    response = forget(api, "xiaoming", dry_run=True)
    assert response.status_code == 200
    body = response.json()
    assert (body["dry_run"], body["audit"]) == (True, None)
    assert body["deleted"]["sessions_app.Message"] == before["messages"]
    assert body["total"] > 0
    assert rows_of(api.tenant, "xiaoming") == before
    assert not ForgetAudit.objects.exists()
    # The real run deletes exactly what the dry run counted.
    assert forget(api, "xiaoming").json()["deleted"] == body["deleted"]


def test_bad_input_is_refused_and_deletes_nothing(api):
    fill(api, "xiaoming")
    before = rows_of(api.tenant, "xiaoming")
    for payload in ({}, {"confirm": "xiaohong"}, {"confirm": 42}, {"confirm": "xiaoming", "dry_run": "maybe"}):
        response = api.post("/api/v1/users/xiaoming/forget/", payload, format="json")
        assert response.status_code == 400, payload
        assert response.json()["errors"], payload
    assert api.post("/api/v1/users/xiaoming/forget/", "{", content_type="application/json").status_code == 400
    assert rows_of(api.tenant, "xiaoming") == before
    assert not ForgetAudit.objects.exists()


def test_a_user_with_nothing_is_forgotten_with_zero_counts(api):
    body = forget(api, "nobody").json()
    assert (body["total"], body["deleted"]) == (0, {})
    assert ForgetAudit.objects.get(pk=body["audit"]).total == 0


def test_the_command_dry_runs_then_forgets(api, capsys):
    fill(api, "xiaoming")
    call_command("ace_forget_user", "--tenant", "acme", "--user-id", "xiaoming", "--dry-run")
    assert "Would delete" in capsys.readouterr().out
    assert rows_of(api.tenant, "xiaoming")["messages"] == 4  # two posted, a turn's two
    call_command("ace_forget_user", "--tenant", "acme", "--user-id", "xiaoming")
    out = capsys.readouterr().out
    assert "Deleted" in out and "sessions_app.Message" in out
    assert not any(rows_of(api.tenant, "xiaoming").values())
    assert ForgetAudit.objects.get().actor == "command"


def test_the_admin_counts_first_then_forgets_and_lists_the_audit(api, client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("dpo", "dpo@example.com", "not-used"))
    fill(api, "xiaoming")
    page = "/admin/sessions_app/forgetaudit/forget/"
    assert client.get(page).status_code == 200
    counted = client.post(page, {"tenant": api.tenant.pk, "user_id": "xiaoming", "count": "1"})
    assert counted.status_code == 200
    assert b"sessions_app.Message" in counted.content and b"Would delete" in counted.content
    assert rows_of(api.tenant, "xiaoming")["sessions"] == 1
    mistyped = client.post(page, {"tenant": api.tenant.pk, "user_id": "xiaoming", "confirm": "xiaomin", "forget": "1"})
    assert b"Type the user id exactly" in mistyped.content
    assert rows_of(api.tenant, "xiaoming")["sessions"] == 1
    done = client.post(page, {"tenant": api.tenant.pk, "user_id": "xiaoming", "confirm": "xiaoming", "forget": "1"})
    assert done.status_code == 302
    assert not any(rows_of(api.tenant, "xiaoming").values())
    audit = ForgetAudit.objects.get()
    assert audit.actor == "admin:dpo"
    listing = client.get("/admin/sessions_app/forgetaudit/?q=xiaoming")
    assert audit.user_hash[:16].encode() in listing.content
    assert b"xiaoming" not in client.get(f"/admin/sessions_app/forgetaudit/{audit.pk}/change/").content


def test_the_retention_trail_of_the_users_purged_records_goes_too(api, other_api):
    from retention_app.models import RetentionEvent

    purged = RetentionEvent.Action.RECORD_PURGED
    for client, user_id in ((api, "xiaoming"), (api, "xiaohong"), (other_api, "xiaoming")):
        RetentionEvent.objects.create(
            tenant=client.tenant, action=purged, actor="schedule", subject_id="r", before={"user_id": user_id}
        )
    RetentionEvent.objects.create(tenant=api.tenant, action=RetentionEvent.Action.POLICY_SET, actor="api", after={})

    response = forget(api, "xiaoming")

    assert response.json()["deleted"]["retention_app.RetentionEvent"] == 1
    left = RetentionEvent.objects.filter(tenant=api.tenant)
    assert sorted((e.action, (e.before or {}).get("user_id")) for e in left) == [
        ("policy_set", None),
        ("record_purged", "xiaohong"),
    ]
    assert RetentionEvent.objects.filter(tenant=other_api.tenant, before__user_id="xiaoming").exists()
