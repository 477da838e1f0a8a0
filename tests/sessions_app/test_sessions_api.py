from datetime import timedelta

from django.utils import timezone

from sessions_app.models import Message, Session
from tests.support.factories import SessionFactory


def test_create_returns_the_session_with_zero_counters(api):
    response = api.post(
        "/api/v1/sessions/",
        {
            "name": "杭州三日游计划",
            "tool": "chat",
            "user_id": "xiaoming",
            "app": "travel",
            "agent_session_id": "abc",
            "metadata": {"k": 1},
        },
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["active"] is True
    assert body["stats"]["messages"] == 0
    assert Session.objects.get(pk=body["id"]).tenant == api.tenant


def test_search_by_name_and_filters(api):
    now = timezone.now()
    SessionFactory(
        tenant=api.tenant, name="杭州三日游计划", user_id="xiaoming", tool="chat", started_at=now - timedelta(days=3)
    )
    SessionFactory(
        tenant=api.tenant, name="周末安排", user_id="xiaoming", tool="chat", started_at=now - timedelta(days=1)
    )
    ended = SessionFactory(
        tenant=api.tenant, name="Refactor auth", user_id="alice", tool="claude-code", started_at=now, ended_at=now
    )

    def names(query):
        response = api.get("/api/v1/sessions/" + query)
        assert response.status_code == 200, response.content
        return sorted(s["name"] for s in response.json()["results"])

    assert names("?search=杭州") == ["杭州三日游计划"]
    assert names("?search=refactor") == ["Refactor auth"]
    assert names("?user_id=xiaoming") == ["周末安排", "杭州三日游计划"]
    assert names("?tool=claude-code") == ["Refactor auth"]
    assert names("?active=false") == ["Refactor auth"]
    assert names("?active=true") == ["周末安排", "杭州三日游计划"]
    since = (now - timedelta(days=2)).isoformat().replace("+00:00", "Z")
    assert names(f"?started_after={since}") == ["Refactor auth", "周末安排"]
    assert names(f"?started_before={since}") == ["杭州三日游计划"]
    assert ended.pk


def test_newest_first_with_cursor_pages(api):
    for n in range(5):
        SessionFactory(tenant=api.tenant, name=f"s{n}", started_at=timezone.now() + timedelta(minutes=n))
    page = api.get("/api/v1/sessions/?page_size=2").json()
    assert [s["name"] for s in page["results"]] == ["s4", "s3"]
    assert [s["name"] for s in api.get(page["next"]).json()["results"]] == ["s2", "s1"]


def test_patch_and_end(api, session):
    response = api.patch(
        f"/api/v1/sessions/{session.pk}/", {"name": "南京文化之旅", "metadata": {"a": 1}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["name"] == "南京文化之旅"

    ended = api.post(f"/api/v1/sessions/{session.pk}/end/")
    assert ended.status_code == 200
    assert ended.json()["active"] is False
    first_end = ended.json()["ended_at"]
    assert api.post(f"/api/v1/sessions/{session.pk}/end/").json()["ended_at"] == first_end


def test_tool_and_user_are_fixed_once_messages_are_counted(api, session):
    assert api.patch(f"/api/v1/sessions/{session.pk}/", {"tool": "qwen-code"}, format="json").status_code == 200
    api.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "x"}, format="json")
    response = api.patch(f"/api/v1/sessions/{session.pk}/", {"user_id": "someone-else"}, format="json")
    assert response.status_code == 400
    assert "user_id" in response.json()["errors"]


def test_put_is_refused_in_favour_of_patch(api, session):
    response = api.put(f"/api/v1/sessions/{session.pk}/", {"user_id": "x"}, format="json")
    assert response.status_code == 405


def test_delete_hides_the_session_but_keeps_it_for_audit(api, session):
    api.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "keep me"}, format="json")
    assert api.delete(f"/api/v1/sessions/{session.pk}/").status_code == 204
    assert api.get(f"/api/v1/sessions/{session.pk}/").status_code == 404
    assert api.get("/api/v1/messages/?q=keep").json()["results"] == []
    assert Message.objects.filter(session=session).count() == 1
    assert Session.objects.get(pk=session.pk).deleted_at is not None
    # Usage that happened stays counted.
    assert api.get("/api/v1/stats/?group_by=day").json()["totals"]["messages"] == 1
