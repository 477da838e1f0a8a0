"""Retention in the admin (policies saved and audited like the API, the preview and apply actions, purged
messages shown as such) and the daily task run by a real Celery worker."""

from datetime import UTC, datetime, timedelta

import pytest

from memory_app.models import RecordTtl
from retention_app.models import RetentionEvent, RetentionPolicy, RetentionRun
from sessions_app.models import Message
from sessions_app.services.messages import messages_append
from tests.support.factories import SessionFactory

OLD = datetime.now(UTC) - timedelta(days=400)


def old_messages(tenant, n=3):
    session = SessionFactory(tenant=tenant, user_id="xiaoming")
    items = [{"role": "user", "content": f"secret plan {i}", "created_at": OLD} for i in range(n)]
    return session, messages_append(tenant=tenant, session_id=session.pk, items=items).messages


@pytest.mark.django_db
def test_the_admin_sets_previews_and_applies_a_policy_and_shows_purged_messages(staff, api):
    session, stored = old_messages(api.tenant)
    refused = staff.post(
        "/admin/retention_app/retentionpolicy/add/", {"tenant": api.tenant.pk, "message_content_days": 0}
    )
    assert refused.status_code == 200 and not RetentionPolicy.objects.exists()  # the form shows what to fix
    created = staff.post(
        "/admin/retention_app/retentionpolicy/add/", {"tenant": api.tenant.pk, "message_content_days": 365}
    )
    assert created.status_code == 302, created.content
    policy = RetentionPolicy.objects.get(tenant=api.tenant)
    assert policy.message_content_days == 365
    assert RetentionEvent.objects.get(tenant=api.tenant).actor == "admin:auditor"

    changelist = "/admin/retention_app/retentionpolicy/"
    preview = staff.post(changelist, {"action": "preview_retention", "_selected_action": [policy.pk]}, follow=True)
    assert "the content of 3 messages" in preview.content.decode()
    assert Message.objects.filter(session=session, content_purged_at__isnull=True).count() == 3

    applied = staff.post(changelist, {"action": "apply_retention_now", "_selected_action": [policy.pk]}, follow=True)
    assert "purged the content of 3 messages" in applied.content.decode()
    assert RetentionRun.objects.get(tenant=api.tenant).trigger == "admin"
    page = staff.get(f"/admin/sessions_app/message/{stored[0].pk}/change/").content.decode()
    assert "[content purged on" in page and "secret plan" not in page
    assert "[content purged on" in staff.get("/admin/sessions_app/message/").content.decode()
    assert staff.get("/admin/retention_app/retentionrun/").status_code == 200
    assert staff.get("/admin/retention_app/retentionevent/").status_code == 200


@pytest.mark.django_db
def test_record_ttls_are_saved_through_the_service_in_the_admin(staff, api):
    response = staff.post(
        "/admin/memory_app/recordttl/add/",
        {"tenant": api.tenant.pk, "record_type": "task", "strategy": "", "ttl_days": 30, "on_expiry": "purge"},
    )
    assert response.status_code == 302, response.content
    ttl = RecordTtl.objects.get(tenant=api.tenant)
    assert (ttl.ttl_days, ttl.on_expiry) == (30, "purge")
    assert RetentionEvent.objects.get(tenant=api.tenant, action="ttl_created").actor == "admin:auditor"


def test_the_daily_task_is_scheduled_by_the_migrations(db):
    # A database test, not a transactional one: a transactional test's flush empties the beat tables.
    from django_celery_beat.models import PeriodicTask

    scheduled = PeriodicTask.objects.get(task="memory_app.tasks.apply_retention")
    assert scheduled.enabled and scheduled.crontab is not None  # editable in the admin: Periodic tasks


def test_the_daily_task_runs_as_a_worker_runs_it(burst, api):
    from retention_app.tasks import apply_retention

    _, stored = old_messages(api.tenant)
    RetentionPolicy.objects.create(tenant=api.tenant, message_content_days=30)
    apply_retention.delay()
    burst()
    assert RetentionRun.objects.filter(tenant=api.tenant, finished_at__isnull=False).exists()
    assert RetentionRun.objects.get(tenant=api.tenant).messages_purged == 3
    assert not Message.objects.filter(pk__in=[m.pk for m in stored], content_purged_at__isnull=True).exists()
    assert set(Message.objects.filter(pk__in=[m.pk for m in stored]).values_list("content", flat=True)) == {""}
    assert RetentionRun.objects.get(tenant=api.tenant).trigger == "schedule"
