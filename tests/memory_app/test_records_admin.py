import pytest

from memory_app.models import Record
from memory_app.services import record_create
from sessions_app.services.messages import messages_append
from tests.support.factories import SessionFactory


@pytest.fixture
def record(api):
    session = SessionFactory(tenant=api.tenant, name="杭州行", user_id="xiaoming")
    message = messages_append(
        tenant=api.tenant, session_id=session.pk, items=[{"role": "user", "content": "我喜欢博物馆"}]
    ).messages[0]
    return record_create(
        tenant=api.tenant,
        user_id="xiaoming",
        type="profile",
        content="Prefers museums",
        source_message_ids=[message.pk],
        strategy="user-profile",
        strategy_version=2,
    ).record


def test_records_list_search_and_page_show_provenance_and_history(staff, record):
    listing = staff.get("/admin/memory_app/record/")
    assert listing.status_code == 200
    assert "Prefers museums" in listing.content.decode()
    assert "Prefers museums" in staff.get("/admin/memory_app/record/?q=museum").content.decode()
    assert "Prefers museums" not in staff.get("/admin/memory_app/record/?q=opera").content.decode()
    page = staff.get(f"/admin/memory_app/record/{record.pk}/change/").content.decode()
    assert "我喜欢博物馆" in page  # the source message, linked into its session's timeline
    assert "timeline" in page
    assert "user-profile v2" in page or "user-profile" in page
    assert "create" in page  # the revision history


def test_the_invalidate_action_keeps_the_record_for_audit(staff, record):
    response = staff.post(
        "/admin/memory_app/record/", {"action": "invalidate_records", "_selected_action": [str(record.pk)]}
    )
    assert response.status_code == 302
    record.refresh_from_db()
    assert (record.valid, record.invalidated_reason, record.revision) == (False, "invalidated", 2)
    assert Record.objects.filter(pk=record.pk).exists()


def test_records_cannot_be_edited_or_deleted_in_the_admin(staff, record):
    assert staff.post(f"/admin/memory_app/record/{record.pk}/delete/", {"post": "yes"}).status_code == 403
    assert staff.get("/admin/memory_app/record/add/").status_code == 403


def test_find_similar_lists_the_nearest_records(staff, api, record):
    near = record_create(tenant=api.tenant, user_id="xiaoming", type="profile", content="Prefers art museums").record
    far = record_create(tenant=api.tenant, user_id="xiaoming", type="task", content="Book the train to Nanjing").record
    page = staff.get(f"/admin/memory_app/record/{record.pk}/similar/")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.index(near.content) < html.index(far.content)  # nearest first
    assert "find similar" in staff.get(f"/admin/memory_app/record/{record.pk}/change/").content.decode()


def test_the_reembed_action_queues_fresh_vectors(staff, record):
    response = staff.post(
        "/admin/memory_app/record/", {"action": "reembed_records", "_selected_action": [str(record.pk)]}
    )
    assert response.status_code == 302
    record.refresh_from_db()
    assert record.embedding_key == ""  # cleared now; the worker writes the new vector
