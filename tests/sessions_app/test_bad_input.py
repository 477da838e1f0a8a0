"""Bad input is a clear 4xx that says what to fix, and nothing is written."""

import json

import pytest
from django.test import override_settings
from django.urls import reverse

from sessions_app.models import Conversation, Message, Session, StateVersion


def url(session):
    return f"/api/v1/sessions/{session.pk}/messages/"


def nothing_written(session):
    session.refresh_from_db()
    return (
        not Message.objects.filter(session=session).exists()
        and not Conversation.objects.filter(session=session).exists()
        and session.messages == 0
        and session.last_seq == 0
    )


def assert_error(response, status, *fields):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["detail"]
    for field in fields:
        assert field in body["errors"], body
    return body


def test_malformed_json(api, session):
    response = api.generic("POST", url(session), '[{"role": "user", "content": "x"', content_type="application/json")
    body = assert_error(response, 400)
    assert "JSON" in body["detail"]
    assert nothing_written(session)


def test_unknown_role_names_the_item_and_the_choices(api, session):
    batch = [{"role": "user", "content": "ok"}, {"role": "bot", "content": "no"}]
    body = assert_error(api.post(url(session), batch, format="json"), 400, "1.role")
    assert "toolResult" in body["errors"]["1.role"][0]
    assert nothing_written(session)


@pytest.mark.parametrize(
    "message,field",
    [
        ({"role": "user", "content": 42}, "content"),
        ({"role": "user", "content": "x", "input_tokens": "12"}, "input_tokens"),
        ({"role": "user", "content": "x", "input_tokens": -1}, "input_tokens"),
        ({"role": "user", "content": "x", "output_tokens": 1.5}, "output_tokens"),
        ({"role": "user", "content": "x", "total_tokens": True}, "total_tokens"),
        ({"role": "user", "content": "x", "metadata": ["not", "an", "object"]}, "metadata"),
        ({"role": "user", "content": "x", "tool_calls": "Read"}, "tool_calls"),
        ({"role": "user", "content": "x", "created_at": "yesterday"}, "created_at"),
        ({"role": "user", "content": "x", "contnet": "typo"}, "contnet"),
        ({"content": "x"}, "role"),
    ],
)
def test_wrong_types_are_refused(api, session, message, field):
    # The bad item is the last of a batch: the good first item must not be written either.
    body = assert_error(api.post(url(session), [{"role": "user", "content": "fine"}, message], format="json"), 400)
    assert f"1.{field}" in body["errors"], body
    assert nothing_written(session)


@pytest.mark.parametrize(
    "message,field",
    [
        ({"role": "user", "content": "a\u0000b"}, "content"),
        ({"role": "user", "content": "x", "metadata": {"k": "x\u0000y"}}, "metadata"),
        ({"role": "user", "content": "x", "metadata": {"k\u0000": 1}}, "metadata"),
        ({"role": "assistant", "content": "x", "tool_calls": [{"name": "Bash", "arguments": "\u0000"}]}, "tool_calls"),
    ],
)
def test_null_characters_postgres_cannot_store_are_refused(api, session, message, field):
    body = assert_error(api.post(url(session), [{"role": "user", "content": "fine"}, message], format="json"), 400)
    assert "Null characters" in body["errors"][f"1.{field}"][0]
    assert nothing_written(session)
    # A literal backslash-u0000 is text like any other.
    ok = api.post(url(session), {"role": "user", "content": "x", "metadata": {"k": "\\u0000"}}, format="json")
    assert ok.status_code == 201 and Message.objects.get(session=session).metadata == {"k": "\\u0000"}
    # The state is JSON too.
    state = api.put(f"/api/v1/sessions/{session.pk}/state/", {"k": "\u0000"}, format="json")
    assert_error(state, 400, "data")
    assert not StateVersion.objects.filter(session=session).exists()


def test_batch_over_the_limit(api, session):
    batch = [{"role": "user", "content": "x"}] * 1001
    body = assert_error(api.post(url(session), batch, format="json"), 400)
    assert "1000" in body["detail"]
    assert nothing_written(session)


def test_empty_batch_and_non_object_body(api, session):
    assert_error(api.post(url(session), [], format="json"), 400)
    assert_error(api.post(url(session), "just a string", format="json"), 400)
    assert_error(api.post(url(session), [1, 2], format="json"), 400)
    assert nothing_written(session)


@override_settings(ACE_MAX_REQUEST_BYTES=10_000)
def test_body_over_the_size_limit(api, session):
    big = [{"role": "user", "content": "x" * 20_000}]
    response = api.post(url(session), big, format="json")
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]
    assert nothing_written(session)


def test_bad_uuids(api, session):
    assert api.get("/api/v1/sessions/not-a-uuid/").status_code == 404
    assert api.get("/api/v1/sessions/not-a-uuid/").json()["detail"]
    assert_error(api.get(f"{url(session)}?conversation=nope"), 400, "conversation")
    assert_error(api.get("/api/v1/messages/?session=nope"), 400, "session")


def test_bad_cursor_and_page_size(api, session):
    assert_error(api.get(f"{url(session)}?cursor=garbage"), 400, "cursor")
    assert_error(api.get("/api/v1/sessions/?cursor=%25%25"), 400, "cursor")
    assert_error(api.get(f"{url(session)}?cursor=bm90LWEtY3Vyc29y"), 400, "cursor")  # base64 of "not-a-cursor"
    assert_error(api.get(f"{url(session)}?page_size=1001"), 400, "page_size")
    assert_error(api.get(f"{url(session)}?page_size=abc"), 400, "page_size")


def test_bad_filters(api, session):
    assert_error(api.get(f"{url(session)}?role=bot"), 400, "role")
    assert_error(api.get(f"{url(session)}?since=notadate"), 400, "since")
    assert_error(api.get("/api/v1/stats/?group_by=week"), 400, "group_by")
    assert_error(api.get("/api/v1/stats/?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z"), 400, "until")


def test_stale_if_match_changes_nothing(api, session):
    state = f"/api/v1/sessions/{session.pk}/state/"
    api.put(state, {"budget": 5000}, format="json")
    response = api.patch(state, {"budget": 1}, format="json", HTTP_IF_MATCH='"0"')
    assert response.status_code == 412
    assert "version 1" in response.json()["detail"]
    assert api.get(state).json()["data"] == {"budget": 5000}
    assert StateVersion.objects.filter(session=session).count() == 1
    assert_error(api.put(state, {"a": 1}, format="json", HTTP_IF_MATCH="banana"), 400, "If-Match")
    assert_error(api.put(state, ["not", "an", "object"], format="json"), 400)


def test_other_tenants_ids_are_404_and_never_leak(api, other_api, session):
    api.post(url(session), {"role": "user", "content": "private"}, format="json")
    message_id = Message.objects.get(session=session).pk
    conversation_id = Conversation.objects.get(session=session).pk
    for path in (
        f"/api/v1/sessions/{session.pk}/",
        f"/api/v1/sessions/{session.pk}/messages/",
        f"/api/v1/sessions/{session.pk}/stats/",
        f"/api/v1/sessions/{session.pk}/state/",
        f"/api/v1/sessions/{session.pk}/state/history/",
        f"/api/v1/sessions/{session.pk}/conversations/",
        f"/api/v1/messages/{message_id}/",
        f"/api/v1/conversations/{conversation_id}/",
    ):
        response = other_api.get(path)
        assert response.status_code == 404, path
        assert "private" not in response.content.decode()
    assert other_api.post(url(session), {"role": "user", "content": "x"}, format="json").status_code == 404
    assert other_api.patch(f"/api/v1/sessions/{session.pk}/", {"name": "x"}, format="json").status_code == 404
    assert other_api.delete(f"/api/v1/sessions/{session.pk}/").status_code == 404
    assert other_api.post(f"/api/v1/sessions/{session.pk}/end/").status_code == 404
    assert other_api.put(f"/api/v1/sessions/{session.pk}/state/", {"a": 1}, format="json").status_code == 404
    assert other_api.get("/api/v1/messages/").json()["results"] == []
    assert other_api.get("/api/v1/sessions/").json()["results"] == []
    assert other_api.get("/api/v1/stats/?group_by=day").json()["totals"]["messages"] == 0
    session.refresh_from_db()
    assert (session.name, session.ended_at, session.deleted_at, session.messages) == ("杭州三日游计划", None, None, 1)


def test_missing_or_wrong_key_is_401(api, session):
    from rest_framework.test import APIClient

    anonymous = APIClient()
    assert anonymous.get("/api/v1/sessions/").status_code == 401
    anonymous.credentials(HTTP_AUTHORIZATION="Bearer ace_nope_nope")
    assert anonymous.get("/api/v1/sessions/").status_code == 401
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {api.key}")
    assert anonymous.get("/api/v1/sessions/").status_code == 401
    assert anonymous.post(url(session), {"role": "user", "content": "x"}, format="json").status_code == 401
    assert nothing_written(session)


def test_session_create_validation(api):
    assert_error(api.post("/api/v1/sessions/", {"name": "no user"}, format="json"), 400, "user_id")
    assert_error(api.post("/api/v1/sessions/", {"user_id": 7}, format="json"), 400, "user_id")
    assert_error(api.post("/api/v1/sessions/", {"user_id": "u", "metadata": "x"}, format="json"), 400, "metadata")
    assert not Session.objects.filter(tenant=api.tenant).exists()


def test_json_content_type_is_required(api, session):
    response = api.generic("POST", url(session), json.dumps({"role": "user"}), content_type="text/plain")
    assert response.status_code == 415
    assert nothing_written(session)


# -- bounds and JSON no column can hold (issue 16, points 1 and 2) -----------------------------------------


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens", "cache_read_tokens", "total_tokens"])
def test_a_token_count_beyond_the_bound_is_refused_and_the_statistics_stay_whole(api, session, field):
    """One accepted `9223372036854775807` used to break every statistic of its user and model (the sums
    overflowed): now the count is refused with the bound, and later writes and stats work."""
    message = {"role": "assistant", "content": "x", "request_id": "r1", "model": "qwen-max", field: 2**63 - 1}
    body = assert_error(api.post(url(session), message, format="json"), 400, field)
    assert "1000000000" in body["errors"][field][0]
    assert nothing_written(session)
    at_bound = {**message, field: 10**9}
    assert api.post(url(session), at_bound, format="json").status_code == 201
    again = {"role": "assistant", "content": "y", "request_id": "r2", "model": "qwen-max", "input_tokens": 10**9}
    assert api.post(url(session), again, format="json").status_code == 201
    for group_by in ("day", "tool", "project", "model", "user_id"):
        assert api.get("/api/v1/stats/", {"group_by": group_by}).status_code == 200


def test_json_nested_too_deeply_is_refused_not_a_server_error(api, session):
    deep = "[" * 1000 + "]" * 1000  # Python's parser would die of recursion
    response = api.generic("POST", url(session), deep, content_type="application/json")
    assert "nested too deeply" in assert_error(response, 400)["detail"]
    metadata = {}
    for _ in range(300):  # parses, but deeper than the encoder of the JSON columns takes
        metadata = {"a": metadata}
    message = {"role": "user", "content": "x", "metadata": metadata}
    body = assert_error(api.post(url(session), message, format="json"), 400, "metadata")
    assert "Nested more than 250 levels" in body["errors"]["metadata"][0]
    assert nothing_written(session)
    state = api.put(f"/api/v1/sessions/{session.pk}/state/", metadata, format="json")
    assert "Nested more than 250 levels" in json.dumps(assert_error(state, 400).get("errors"))


@pytest.mark.parametrize(
    "raw",
    [
        '{"role": "user", "content": "x", "metadata": {"k": "\\ud800"}}',
        '{"role": "user", "content": "x", "metadata": {"\\udfff": 1}}',
        '{"role": "assistant", "content": "x", "tool_calls": [{"name": "a\\ud83d"}]}',
        '{"role": "user", "content": "half an emoji \\ud83d"}',
    ],
)
def test_a_lone_surrogate_is_refused_not_a_server_error(api, session, raw):
    response = api.generic("POST", url(session), raw, content_type="application/json")
    assert "surrogate" in assert_error(response, 400)["detail"]
    assert nothing_written(session)
    paired = raw.replace("\\ud800", "\\ud83d\\ude00").replace("\\udfff", "\\ud83d\\ude00")
    paired = paired.replace("a\\ud83d", "a\\ud83d\\ude00").replace("emoji \\ud83d", "emoji \\ud83d\\ude00")
    assert api.generic("POST", url(session), paired, content_type="application/json").status_code == 201


def test_integer_fields_beyond_their_columns_are_refused(api, session):
    turn = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "hi"}, format="json").json()["turn"]
    completion = {"content": "ok", "model": "qwen-max", "finish_reason": "stop", "input_tokens": 1, "output_tokens": 1}
    completion["elapsed_ms"] = 5
    for field, value in (("max_tokens", 2**31), ("requests", 2**31), ("input_tokens", 10**9 + 1)):
        response = api.post(f"/api/v1/turns/{turn}/complete/", {**completion, field: value}, format="json")
        assert_error(response, 400, field)
    assert api.post(f"/api/v1/turns/{turn}/complete/", completion, format="json").status_code == 200
    record = {"user_id": "xiaoming", "type": "profile", "content": "偏好博物馆", "strategy_version": 2**31}
    assert_error(api.post("/api/v1/records/", record, format="json"), 400, "strategy_version")


@pytest.mark.parametrize(
    "path,params",
    [
        ("/api/v1/sessions/", {"started_before": "2026-01-01T00:00:00-21:07"}),
        ("/api/v1/sessions/", {"started_after": "9999-12-31T23:30:00Z"}),
        ("SESSION_MESSAGES", {"since": "2026-01-01T00:00:00+23:59"}),
        ("/api/v1/stats/", {"until": "9999-12-31T23:30:00Z"}),
        ("/api/v1/stats/", {"since": "0999-12-31T00:00:00Z"}),
    ],
)
def test_times_the_database_cannot_take_are_normalised_or_refused_not_a_server_error(api, session, path, params):
    """PostgreSQL refuses offsets beyond ±15:59 that ISO 8601 allows: they are the same instant in UTC, so they
    are read as such; a time outside years 1000-9998 is a 400 that says the range."""
    path = url(session) if path == "SESSION_MESSAGES" else path
    response = api.get(path, params)
    value = next(iter(params.values()))
    if value.startswith(("9999", "0999")):
        body = assert_error(response, 400)
        assert "1000-01-01 to 9998-12-31" in json.dumps(body)
    else:
        assert response.status_code == 200, response.content


def test_a_message_time_with_an_unusual_offset_is_stored_in_utc(api, session):
    message = {"role": "user", "content": "x", "created_at": "2026-01-01T00:00:00-21:07"}
    created = api.post(url(session), message, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["created_at"].startswith("2026-01-01T21:07:00")
    late = {"role": "user", "content": "y", "created_at": "9999-12-31T23:30:00Z"}
    assert_error(api.post(url(session), late, format="json"), 400, "created_at")


def test_the_dashboard_refuses_a_day_its_window_cannot_hold(api, client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("auditor", "auditor@example.com", "x"))
    dashboard = reverse("admin:sessions_app_usage_dashboard")
    response = client.get(dashboard, {"tenant": api.tenant.pk, "since": "2026-01-01", "until": "9999-12-31"})
    assert response.status_code == 400
