"""Appending and reading messages: seq, batches, idempotency, filters, search, pagination."""

import uuid

from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Message


def url(session, suffix="messages/"):
    return f"/api/v1/sessions/{session.pk}/{suffix}"


def test_single_message_gets_seq_id_and_conversation(api, session):
    response = api.post(url(session), {"role": "user", "content": "帮我规划一下杭州三天的行程。"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["seq"] == 1
    assert body["session"] == str(session.pk)
    assert body["conversation"] is not None
    assert Message.objects.get(pk=body["id"]).content == "帮我规划一下杭州三天的行程。"


def test_bulk_keeps_order_and_assigns_consecutive_seq(api, session):
    body = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(1000)]
    response = api.post(url(session), body, format="json")
    assert response.status_code == 201
    stored = response.json()
    assert [m["seq"] for m in stored] == list(range(1, 1001))
    assert [m["content"] for m in stored] == [f"message {i}" for i in range(1000)]


def test_external_id_makes_a_post_idempotent(api, session):
    message = {"role": "user", "content": "remember this", "external_id": "evt-1"}
    first = api.post(url(session), message, format="json")
    again = api.post(url(session), message, format="json")
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Message.objects.filter(session=session).count() == 1
    assert api.get(url(session, "stats/")).json()["messages"] == 1

    # A retried batch that partly went through stores only the new rows, in order.
    batch = [message, {"role": "assistant", "content": "ok", "external_id": "evt-2"}]
    response = api.post(url(session), batch, format="json")
    assert response.status_code == 201
    assert [m["seq"] for m in response.json()] == [1, 2]
    assert api.get(url(session, "stats/")).json()["messages"] == 2


def test_duplicate_external_ids_within_one_batch_store_once(api, session):
    batch = [{"role": "user", "content": "a", "external_id": "x"}, {"role": "user", "content": "a", "external_id": "x"}]
    response = api.post(url(session), batch, format="json")
    assert [m["id"] for m in response.json()][0] == response.json()[1]["id"]
    assert Message.objects.filter(session=session).count() == 1


def test_all_fields_round_trip(api, session):
    message = {
        "role": "assistant",
        "content": "",
        "created_at": "2026-01-02T03:04:05Z",
        "external_id": "a-1",
        "auth_type": "oauth-personal",
        "request_id": "req_9",
        "model": "claude-sonnet-4-5",
        "thinking": "The user wants the file read first.",
        "tool_calls": [{"id": "toolu_1", "name": "Read", "arguments": {"file_path": "a.py"}}],
        "tool_name": "",
        "input_tokens": 4,
        "output_tokens": 96,
        "cache_read_tokens": 18000,
        "cache_creation_tokens": 2400,
        "total_tokens": 100,
        "elapsed_ms": 2300,
        "finish_reason": "tool_use",
        "feishu_conversation_id": "oc_1",
        "metadata": {"cwd": "/srv/app", "is_sidechain": False},
    }
    stored = api.post(url(session), message, format="json").json()
    for field, value in message.items():
        if field == "created_at":
            assert stored[field] == "2026-01-02T03:04:05.000000Z"
        else:
            assert stored[field] == value, field


def test_what_is_stored_reads_back_exactly(api, session):
    """Messages go to the database by binary COPY: what a client reads back later (not the answer built
    from the request) is byte for byte what it sent — text that COPY's text format would escape, JSON,
    offsets, big numbers."""
    tricky = "tab\there\nnew line\r\nCRLF \\N not null, a \\ backslash, \\. end marker, 表情 🙂, 'quotes' \"x\""
    message = {
        "role": "assistant",
        "content": tricky,
        "created_at": "2026-01-02T11:04:05.123456+08:00",
        "thinking": tricky[::-1],
        "tool_calls": [{"id": "t\t1", "name": "Bash", "arguments": {"cmd": "printf '%s\\n' \\N", "n": 2**53 - 1}}],
        "request_id": "req\\1",
        "model": "qwen3-coder-plus",
        "input_tokens": 10**9,  # the bound (schema.MAX_TOKENS), read back exactly
        "output_tokens": 0,
        "metadata": {"nested": {"list": [1, 2.5, None, True, "ü"]}, "empty": {}, "text": tricky},
    }
    api.post(url(session), message, format="json")
    stored = Message.objects.get(session=session)
    assert stored.content == tricky and stored.thinking == tricky[::-1]
    assert stored.tool_calls == message["tool_calls"] and stored.metadata == message["metadata"]
    assert stored.request_id == "req\\1" and stored.input_tokens == 10**9 and stored.output_tokens == 0
    assert stored.created_at.isoformat() == "2026-01-02T03:04:05.123456+00:00"
    listed = api.get(url(session)).json()["results"][0]
    for field in ("content", "thinking", "tool_calls", "metadata", "request_id", "input_tokens"):
        assert listed[field] == message[field], field


def test_list_in_seq_order_with_filters(api, session):
    api.post(
        url(session),
        [
            {"role": "user", "content": "查看天气", "created_at": "2026-03-01T10:00:00Z"},
            {"role": "assistant", "content": "Let me check the weather forecast", "created_at": "2026-03-01T10:00:01Z"},
            {"role": "toolResult", "content": '{"sunny": true}', "created_at": "2026-03-01T10:00:02Z"},
            {"role": "user", "content": "明天呢？", "created_at": "2026-03-02T10:00:00Z"},
        ],
        format="json",
    )

    def contents(query):
        response = api.get(url(session) + query)
        assert response.status_code == 200, response.content
        return [m["content"] for m in response.json()["results"]]

    assert contents("") == ["查看天气", "Let me check the weather forecast", '{"sunny": true}', "明天呢？"]
    assert contents("?role=user") == ["查看天气", "明天呢？"]
    assert contents("?role=user,toolResult") == ["查看天气", '{"sunny": true}', "明天呢？"]
    assert contents("?after_seq=2") == ['{"sunny": true}', "明天呢？"]
    assert contents("?since=2026-03-02T00:00:00Z") == ["明天呢？"]
    assert contents("?until=2026-03-01T10:00:01Z") == ["查看天气"]
    first_conversation = api.get(url(session, "conversations/")).json()["results"][0]["id"]
    assert contents(f"?conversation={first_conversation}") == contents("?until=2026-03-02T00:00:00Z")


def test_keyword_search_finds_chinese_and_english(api, session):
    api.post(
        url(session),
        [
            {"role": "user", "content": "帮我规划一下杭州三天的行程。"},
            {"role": "assistant", "content": "The museums in Hangzhou are quiet on weekdays."},
            {"role": "user", "content": "预算5000元，喜欢人文历史。"},
        ],
        format="json",
    )

    def found(q):
        return [m["seq"] for m in api.get(url(session), {"q": q}).json()["results"]]

    assert found("杭州") == [1]
    assert found("人文历史") == [3]
    assert found("历人") == []  # characters must be adjacent, in order
    assert found("museum") == [2]  # English stemming
    assert found("hangzhou museums") == [2]
    assert found("杭州 行程") == [1]
    assert found("museum -quiet") == []


def test_a_chinese_phrase_never_matches_across_punctuation(api, session):
    api.post(
        url(session),
        [{"role": "assistant", "content": "今天是晴天，气温 21°C。"}, {"role": "user", "content": "查看天气"}],
        format="json",
    )
    assert [m["seq"] for m in api.get(url(session), {"q": "天气"}).json()["results"]] == [2]
    assert [m["seq"] for m in api.get(url(session), {"q": "晴天"}).json()["results"]] == [1]


def test_cross_session_audit_search_is_scoped_and_filterable(api, other_api, session):
    from tests.support.factories import SessionFactory

    second = SessionFactory(tenant=api.tenant, user_id="alice", tool="claude-code")
    foreign = SessionFactory(tenant=other_api.tenant, user_id="xiaoming")
    api.post(url(session), {"role": "user", "content": "secret plan alpha"}, format="json")
    api.post(url(second), {"role": "assistant", "content": "secret plan beta"}, format="json")
    other_api.post(url(foreign), {"role": "user", "content": "secret plan gamma"}, format="json")

    def contents(query):
        return sorted(m["content"] for m in api.get("/api/v1/messages/" + query).json()["results"])

    assert contents("?q=secret") == ["secret plan alpha", "secret plan beta"]
    assert contents("?user_id=alice") == ["secret plan beta"]
    assert contents("?user_id=xiaoming") == ["secret plan alpha"]
    assert contents(f"?session={second.pk}") == ["secret plan beta"]
    assert contents("?role=user") == ["secret plan alpha"]
    assert contents("?tool=claude-code") == ["secret plan beta"]


def test_cursor_pagination_walks_every_message_once(api, session):
    api.post(url(session), [{"role": "user", "content": f"m{i}"} for i in range(25)], format="json")
    seen, link = [], url(session) + "?page_size=10"
    while link:
        page = api.get(link).json()
        seen += [m["seq"] for m in page["results"]]
        link = page["next"]
    assert seen == list(range(1, 26))


def test_conversation_detail(api, session):
    api.post(
        url(session),
        [
            {"role": "user", "content": "hi", "feishu_conversation_id": "oc_9"},
            {"role": "assistant", "content": "hello", "auth_type": "k", "input_tokens": 3},
        ],
        format="json",
    )
    conversation = api.get(url(session, "conversations/")).json()["results"][0]
    detail = api.get(f"/api/v1/conversations/{conversation['id']}/").json()
    assert detail["message_count"] == 2
    assert detail["feishu_conversation_id"] == "oc_9"
    assert detail["input_tokens"] == 3
    assert detail["last_message_at"] is not None


def test_search_gives_the_same_answer_for_rare_and_common_words(api, session, monkeypatch):
    """Rare words are looked up through the GIN index first, common ones by walking newest first."""
    from sessions_app import search

    api.post(
        url(session),
        [{"role": "user", "content": f"deploy log {i}" + (" rollback" if i % 4 == 0 else "")} for i in range(12)],
        format="json",
    )

    def found(q):
        return [m["content"] for m in api.get("/api/v1/messages/", {"q": q, "page_size": 5}).json()["results"]]

    rare_path = (found("deploy"), found("rollback"))
    monkeypatch.setattr(search, "RARE_HITS", 2)  # now "deploy" (12 hits) and "rollback" (3) are common
    assert (found("deploy"), found("rollback")) == rare_path
    monkeypatch.setattr(search, "RARE_ESTIMATE", 0)  # and the planner is taken to expect many hits
    assert (found("deploy"), found("rollback")) == rare_path
    assert rare_path[1] == ["deploy log 8 rollback", "deploy log 4 rollback", "deploy log 0 rollback"]
    assert len(rare_path[0]) == 5


def test_an_append_reads_the_session_row_once_and_unknown_sessions_are_404(api, other_api, session):
    with CaptureQueriesContext(connection) as captured:
        response = api.post(url(session), {"role": "user", "content": "去西湖"}, format="json")
    assert response.status_code == 201
    reads = [q["sql"] for q in captured.captured_queries if 'FROM "sessions_app_session"' in q["sql"]]
    assert len(reads) == 1 and reads[0].endswith("FOR UPDATE"), reads  # the service's lock, nothing before it

    message = {"role": "user", "content": "x"}
    assert other_api.post(url(session), message, format="json").status_code == 404
    assert api.post("/api/v1/sessions/not-a-session/messages/", message, format="json").status_code == 404
    assert api.post(f"/api/v1/sessions/{uuid.uuid4()}/messages/", [message], format="json").status_code == 404
    assert api.get(url(session)).json()["results"][0]["content"] == "去西湖"
    assert Message.objects.filter(session=session).count() == 1
