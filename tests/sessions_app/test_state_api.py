from django.db import connection
from django.test.utils import CaptureQueriesContext


def state_url(session, suffix=""):
    return f"/api/v1/sessions/{session.pk}/state/{suffix}"


def test_empty_state_is_version_0(api, session):
    response = api.get(state_url(session))
    assert response.status_code == 200
    assert response.json() == {"version": 0, "data": {}, "updated_at": None}
    assert response["ETag"] == '"0"'


def test_put_patch_and_history(api, session):
    put = api.put(state_url(session), {"budget": 5000, "preference": "人文历史"}, format="json", HTTP_IF_MATCH='"0"')
    assert put.status_code == 200
    assert put["ETag"] == '"1"'

    patch = api.generic(
        "PATCH",
        state_url(session),
        '{"preference": "博物馆", "draft": {"day1": ["西湖"]}, "budget": null}',
        content_type="application/merge-patch+json",
        HTTP_IF_MATCH='"1"',
    )
    assert patch.status_code == 200, patch.content
    assert patch.json()["data"] == {"preference": "博物馆", "draft": {"day1": ["西湖"]}}
    assert patch.json()["version"] == 2

    nested = api.patch(state_url(session), {"draft": {"day2": ["灵隐寺"]}}, format="json")
    assert nested.json()["data"]["draft"] == {"day1": ["西湖"], "day2": ["灵隐寺"]}

    history = api.get(state_url(session, "history/")).json()["results"]
    assert [h["version"] for h in history] == [3, 2, 1]
    assert history[-1]["data"] == {"budget": 5000, "preference": "人文历史"}
    assert [h["change"] for h in history] == ["patch", "patch", "put"]


def test_weak_and_bare_if_match_forms(api, session):
    api.put(state_url(session), {"a": 1}, format="json")
    assert api.patch(state_url(session), {"b": 2}, format="json", HTTP_IF_MATCH='W/"1"').status_code == 200
    assert api.patch(state_url(session), {"c": 3}, format="json", HTTP_IF_MATCH="2").status_code == 200
    assert api.patch(state_url(session), {"d": 4}, format="json", HTTP_IF_MATCH="*").status_code == 200


def test_a_malformed_if_match_is_told_the_current_version(api, session):
    for version in range(1, 8):
        api.patch(state_url(session), {"n": version}, format="json")
    response = api.patch(state_url(session), {"n": 0}, format="json", HTTP_IF_MATCH="version seven")
    assert response.status_code == 400
    assert '"7" for the state as it is now' in str(response.json())


def test_a_write_that_changes_nothing_makes_no_new_version(api, session):
    api.put(state_url(session), {"a": 1}, format="json")
    again = api.put(state_url(session), {"a": 1}, format="json")
    assert again.json()["version"] == 1
    assert len(api.get(state_url(session, "history/")).json()["results"]) == 1


def app_statements(call):
    """The response of `call()` and the statements it sent, less the API key's lookup and the test's savepoints."""
    with CaptureQueriesContext(connection) as captured:
        response = call()
    sql = [q["sql"] for q in captured.captured_queries]
    return response, [s for s in sql if "sessions_app_apikey" not in s and not s.startswith(("SAVEPOINT", "RELEASE"))]


def test_state_calls_read_the_session_and_its_state_in_one_statement(api, other_api, session):
    response, sql = app_statements(lambda: api.put(state_url(session), {"city": "杭州"}, format="json"))
    # The session locked with its current state beside it, the new version, the session's version number.
    assert response.status_code == 200 and len(sql) == 3, sql
    response, sql = app_statements(lambda: api.patch(state_url(session), {"step": 2}, format="json"))
    assert response.json()["data"] == {"city": "杭州", "step": 2} and len(sql) == 3, sql
    response, sql = app_statements(lambda: api.get(state_url(session)))
    assert (response.json()["version"], response.json()["data"], len(sql)) == (2, {"city": "杭州", "step": 2}, 1)
    assert response.json()["updated_at"] and response["ETag"] == '"2"'

    for client, path in ((other_api, state_url(session)), (api, "/api/v1/sessions/not-a-session/state/")):
        assert client.get(path).status_code == 404
        assert client.put(path, {"a": 1}, format="json").status_code == 404
        assert client.patch(path, {"a": 1}, format="json").status_code == 404
    assert api.get(state_url(session)).json()["version"] == 2
