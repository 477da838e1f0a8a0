"""Grouped usage statistics from the hourly roll-ups."""

import pytest

from tests.support.api import post_messages
from tests.support.factories import SessionFactory


@pytest.fixture
def usage(api):
    chat = SessionFactory(tenant=api.tenant, tool="chat", user_id="xiaoming")
    code = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice")

    post_messages(
        api,
        chat,
        [
            {"role": "user", "content": "q", "created_at": "2026-03-01T09:15:00Z"},
            {
                "role": "assistant",
                "content": "a",
                "auth_type": "k",
                "model": "qwen-max",
                "input_tokens": 100,
                "output_tokens": 10,
                "created_at": "2026-03-01T09:15:02Z",
            },
            {"role": "user", "content": "q2", "created_at": "2026-03-02T11:00:00Z"},
            {
                "role": "assistant",
                "content": "a2",
                "auth_type": "k",
                "model": "qwen-max",
                "input_tokens": 200,
                "output_tokens": 20,
                "created_at": "2026-03-02T11:00:03Z",
            },
        ],
    )
    post_messages(
        api,
        code,
        [
            {"role": "user", "content": "fix it", "created_at": "2026-03-02T12:00:00Z"},
            {
                "role": "assistant",
                "content": "done",
                "request_id": "r1",
                "model": "claude-sonnet-4-5",
                "input_tokens": 5,
                "output_tokens": 500,
                "cache_read_tokens": 9000,
                "created_at": "2026-03-02T12:00:09Z",
            },
            {
                "role": "error",
                "content": "overloaded",
                "request_id": "r2",
                "model": "claude-sonnet-4-5",
                "created_at": "2026-03-02T12:01:00Z",
            },
        ],
    )
    return chat, code


def grouped(api, query):
    response = api.get("/api/v1/stats/" + query)
    assert response.status_code == 200, response.content
    body = response.json()
    return {row["key"]: row for row in body["results"]}, body["totals"]


def test_group_by_day(api, usage):
    rows, totals = grouped(api, "?group_by=day")
    assert set(rows) == {"2026-03-01", "2026-03-02"}
    assert (rows["2026-03-01"]["messages"], rows["2026-03-01"]["conversations"]) == (2, 1)
    assert (rows["2026-03-02"]["messages"], rows["2026-03-02"]["conversations"]) == (5, 2)
    assert rows["2026-03-02"]["requests"] == 3
    assert rows["2026-03-02"]["message_error"] == 1
    assert totals["messages"] == 7
    assert totals["requests"] == 4
    assert totals["input_tokens"] == 305
    assert totals["cache_read_tokens"] == 9000


def test_group_by_tool_user_and_model(api, usage):
    rows, _ = grouped(api, "?group_by=tool")
    assert rows["chat"]["input_tokens"] == 300
    assert rows["claude-code"]["output_tokens"] == 500
    rows, _ = grouped(api, "?group_by=user_id")
    assert (rows["xiaoming"]["messages"], rows["alice"]["messages"]) == (4, 3)
    rows, _ = grouped(api, "?group_by=model")
    assert rows["qwen-max"]["requests"] == 2
    assert rows["claude-sonnet-4-5"]["requests"] == 2
    assert rows[None]["message_user"] == 3  # user messages carry no model


def test_group_by_session(api, usage):
    chat, code = usage
    body = api.get("/api/v1/stats/?group_by=session").json()
    assert [row["key"] for row in body["results"]] == [str(code.pk), str(chat.pk)]  # most tokens first
    assert body["results"][0]["message_error"] == 1
    assert body["results"][0]["tool"] == "claude-code"
    assert body["totals"]["messages"] == 7


def test_filters_and_window(api, usage):
    rows, totals = grouped(api, "?group_by=day&tool=chat")
    assert totals["messages"] == 4
    rows, totals = grouped(api, "?group_by=day&user_id=alice")
    assert totals["messages"] == 3
    body = api.get("/api/v1/stats/?group_by=day&since=2026-03-02T11:30:00Z&until=2026-03-02T12:00:30Z").json()
    # Rounded out to whole hours: 11:00 to 13:00 on March 2nd.
    assert body["since"] == "2026-03-02T11:00:00.000000Z"
    assert body["until"] == "2026-03-02T13:00:00.000000Z"
    assert body["totals"]["messages"] == 5


def test_stats_are_per_tenant(api, other_api, usage):
    assert grouped(other_api, "?group_by=day") == ({}, grouped(other_api, "?group_by=tool")[1])
    assert grouped(other_api, "?group_by=day")[1]["messages"] == 0
