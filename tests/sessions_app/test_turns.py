"""The streamed chat turn flow of ../shared/seeds/003, through the API."""

import threading

import pytest
from django.db import connection

from sessions_app.models import Conversation, Message, Turn
from sessions_app.selectors.recount import session_count_drift
from tests.support.api import make_client
from tests.support.factories import SessionFactory

COMPLETION = {
    "content": "明天多云转小雨，记得带伞。",
    "thinking": "The user asks about tomorrow; call the weather tool.",
    "tool_calls": [
        {
            "id": "call_1",
            "name": "get_weather",
            "arguments": {"city": "杭州", "day": "tomorrow"},
            "result": {"weather": "小雨", "temp_c": 17},
        }
    ],
    "tool_names": ["get_weather"],
    "model": "qwen-max",
    "max_tokens": 2048,
    "temperature": 0.7,
    "finish_reason": "stop",
    "input_tokens": 1200,
    "output_tokens": 80,
    "elapsed_ms": 3400,
    "skill_names": ["weather"],
    "available_tool_names": ["get_weather", "search"],
    "requests": 2,
}


def start(api, session, **body):
    response = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "明天呢？", **body}, format="json")
    assert response.status_code in (200, 201), response.content
    return response


def stats(api, session):
    return api.get(f"/api/v1/sessions/{session.pk}/stats/").json()


def test_start_writes_the_user_message_and_a_placeholder_at_once(api, session):
    body = start(api, session, attachments=["file_1"], thinking_mode="deep").json()
    assert body["status"] == "streaming"
    user, assistant = body["user_message"], body["assistant_message"]
    assert (user["role"], user["content"], user["attachments"], user["thinking_mode"]) == (
        "user",
        "明天呢？",
        ["file_1"],
        "deep",
    )
    assert (assistant["role"], assistant["content"], assistant["seq"]) == ("assistant", "", user["seq"] + 1)
    assert user["conversation"] == assistant["conversation"] == body["conversation"]
    # Both are in the session's messages straight away.
    listed = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert [m["id"] for m in listed] == [user["id"], assistant["id"]]


def test_a_turn_in_a_named_conversation_and_an_idempotent_start(api, session):
    first = start(api, session, conversation="chat-42", external_id="turn-1")
    again = start(api, session, conversation="chat-42", external_id="turn-1")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["turn"] == first.json()["turn"]
    second = start(api, session, conversation="chat-42", external_id="turn-2").json()
    assert second["conversation"] == first.json()["conversation"]
    assert Turn.objects.filter(session=session).count() == 2


def test_the_full_flow_keeps_every_field_where_the_seed_says(api, session):
    turn = start(api, session).json()["turn"]
    ready = api.post(
        f"/api/v1/turns/{turn}/system-ready/", {"system_prompt": "You are helpful.\n[memory] 偏好博物馆"}, format="json"
    )
    assert ready.status_code == 200
    assert ready.json()["status"] == "streaming" and ready.json()["system_ready_at"]
    snapshot = api.get(f"/api/v1/turns/{turn}/").json()["user_message"]["thinking"]
    assert snapshot == "You are helpful.\n[memory] 偏好博物馆"

    for partial in ("明天", "明天多云", "明天多云转小雨"):
        assert (
            api.patch(f"/api/v1/turns/{turn}/", {"content": partial, "thinking": "…"}, format="json").status_code == 200
        )
    # A crash of the chat app now leaves the partial answer in the database.
    assistant = Turn.objects.get(pk=turn).assistant_message
    assert assistant.content == "明天多云转小雨"

    done = api.post(f"/api/v1/turns/{turn}/complete/", COMPLETION, format="json")
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["status"] == "completed"
    answer, question = body["assistant_message"], body["user_message"]
    for field in (
        "content",
        "thinking",
        "tool_calls",
        "tool_names",
        "model",
        "max_tokens",
        "temperature",
        "finish_reason",
        "input_tokens",
        "output_tokens",
        "elapsed_ms",
    ):
        assert answer[field] == COMPLETION[field], field
    assert answer["total_tokens"] == 1280
    assert answer["api_calls"] == 2
    assert question["skill_names"] == ["weather"]
    assert question["tool_names"] == ["get_weather", "search"]  # on a user message: the tools offered
    assert question["thinking"].startswith("You are helpful.")  # the system prompt snapshot is kept

    counts = stats(api, session)
    assert (counts["messages"], counts["message_user"], counts["message_assistant"]) == (2, 1, 1)
    assert (counts["requests"], counts["input_tokens"], counts["output_tokens"]) == (2, 1200, 80)
    conversation = api.get(f"/api/v1/conversations/{body['conversation']}/").json()
    assert (conversation["message_count"], conversation["total_tokens"], conversation["requests"]) == (2, 1280, 2)
    assert conversation["last_message_at"] >= answer["created_at"]
    session.refresh_from_db()
    assert session_count_drift(session=session) == {}
    by_model = {r["key"]: r for r in api.get("/api/v1/stats/?group_by=model").json()["results"]}
    assert by_model["qwen-max"]["message_assistant"] == 1  # moved out of the placeholder's model-less bucket
    assert by_model[None]["message_assistant"] == 0


def test_completing_again_is_a_no_op_and_different_data_is_a_conflict(api, session):
    turn = start(api, session).json()["turn"]
    assert api.post(f"/api/v1/turns/{turn}/complete/", COMPLETION, format="json").status_code == 200
    before = stats(api, session)
    again = api.post(f"/api/v1/turns/{turn}/complete/", COMPLETION, format="json")
    assert again.status_code == 200
    conflict = api.post(f"/api/v1/turns/{turn}/complete/", {**COMPLETION, "content": "changed"}, format="json")
    assert conflict.status_code == 409
    assert "completed" in conflict.json()["detail"]
    assert stats(api, session) == before
    assert Turn.objects.get(pk=turn).assistant_message.content == COMPLETION["content"]
    # A completed turn takes no more checkpoints either.
    assert api.patch(f"/api/v1/turns/{turn}/", {"content": "late"}, format="json").status_code == 409
    assert api.post(f"/api/v1/turns/{turn}/system-ready/", {"system_prompt": "x"}, format="json").status_code == 409


def test_a_turn_that_ends_in_error_counts_as_an_error_message(api, session):
    turn = start(api, session).json()["turn"]
    api.patch(f"/api/v1/turns/{turn}/", {"content": "partial answ"}, format="json")
    failed = {
        **COMPLETION,
        "content": "partial answ",
        "finish_reason": "error",
        "error": "upstream 529 overloaded",
        "output_tokens": 3,
        "tool_calls": [],
    }
    body = api.post(f"/api/v1/turns/{turn}/complete/", failed, format="json").json()
    assert body["status"] == "failed"
    assert body["assistant_message"]["finish_reason"] == "error"
    assert body["assistant_message"]["role"] == "error"
    assert body["assistant_message"]["metadata"]["error"] == "upstream 529 overloaded"
    counts = stats(api, session)
    assert (counts["message_assistant"], counts["message_error"], counts["messages"]) == (0, 1, 2)
    session.refresh_from_db()
    assert session_count_drift(session=session) == {}


@pytest.mark.django_db(transaction=True)
def test_concurrent_completions_in_one_conversation_stay_exact():
    api = make_client("turns-concurrency")
    session = SessionFactory(tenant=api.tenant)
    turns = [start(api, session, conversation="shared").json()["turn"] for _ in range(12)]
    errors, barrier = [], threading.Barrier(len(turns))

    def complete(turn):
        client = make_client("turns-concurrency")
        try:
            barrier.wait()
            response = client.post(f"/api/v1/turns/{turn}/complete/", COMPLETION, format="json")
            if response.status_code != 200:
                errors.append(response.content)
        finally:
            connection.close()

    threads = [threading.Thread(target=complete, args=(turn,)) for turn in turns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    conversation = Conversation.objects.get(session=session)
    assert conversation.messages == 24
    assert (conversation.requests, conversation.input_tokens) == (24, 12 * 1200)
    session.refresh_from_db()
    assert (session.requests, session.total_tokens, session.message_assistant) == (24, 12 * 1280, 12)
    assert session_count_drift(session=session) == {}


def test_secrets_are_redacted_and_the_tool_schema_is_never_stored(api, session):
    turn = start(api, session).json()["turn"]
    secret_call = {
        "id": "call_9",
        "name": "http_get",
        "arguments": {
            "url": "https://api.example.com/v1/items",
            "headers": {"Authorization": "Bearer sk-live-123"},
            "api_key": "sk-live-456",
            "max_tokens": 50,
        },
        "result": '{"items": [], "session": {"access_token": "tok-789", "user": "xiaoming"}}',
    }
    schema = [{"type": "function", "function": {"name": "http_get", "description": "SCHEMA-MARKER-7f3a"}}]
    body = {**COMPLETION, "tool_calls": [secret_call], "tool_schema": schema}
    stored = api.post(f"/api/v1/turns/{turn}/complete/", body, format="json").json()["assistant_message"]
    arguments = stored["tool_calls"][0]["arguments"]
    assert arguments["headers"]["Authorization"] == "[REDACTED]"
    assert arguments["api_key"] == "[REDACTED]"
    assert arguments["max_tokens"] == 50  # a token *count* is not a secret
    assert "tok-789" not in stored["tool_calls"][0]["result"]
    assert '"user": "xiaoming"' in stored["tool_calls"][0]["result"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sessions_app_message WHERE tool_calls::text LIKE '%%sk-live%%' "
            "OR content LIKE '%%SCHEMA-MARKER%%' OR metadata::text LIKE '%%SCHEMA-MARKER%%' "
            "OR tool_calls::text LIKE '%%SCHEMA-MARKER%%' OR tool_names::text LIKE '%%SCHEMA-MARKER%%'"
        )
        assert cursor.fetchone()[0] == 0


@pytest.mark.parametrize(
    "change,field",
    [
        ({"input_tokens": -1}, "input_tokens"),
        ({"output_tokens": "80"}, "output_tokens"),
        ({"finish_reason": "done"}, "finish_reason"),
        ({"temperature": "hot"}, "temperature"),
        ({"tool_calls": [{"arguments": {}}]}, "tool_calls.0.name"),
        ({"model": None}, "model"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_completions_are_refused_and_change_nothing(api, session, change, field):
    turn = start(api, session).json()["turn"]
    before = stats(api, session)
    response = api.post(f"/api/v1/turns/{turn}/complete/", {**COMPLETION, **change}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert Turn.objects.get(pk=turn).status == "streaming"
    assert stats(api, session) == before


def test_unknown_and_other_tenants_turns_are_404(api, other_api, session):
    turn = start(api, session).json()["turn"]
    for call in (
        lambda c: c.get(f"/api/v1/turns/{turn}/"),
        lambda c: c.patch(f"/api/v1/turns/{turn}/", {"content": "x"}, format="json"),
        lambda c: c.post(f"/api/v1/turns/{turn}/system-ready/", {"system_prompt": "x"}, format="json"),
        lambda c: c.post(f"/api/v1/turns/{turn}/complete/", COMPLETION, format="json"),
    ):
        assert call(other_api).status_code == 404
    assert (
        api.post("/api/v1/turns/00000000-0000-0000-0000-000000000000/complete/", COMPLETION, format="json").status_code
        == 404
    )
    assert Turn.objects.get(pk=turn).status == "streaming"
    assert Message.objects.get(pk=Turn.objects.get(pk=turn).assistant_message_id).content == ""


def test_an_oversized_completion_is_refused(api, session, settings):
    turn = start(api, session).json()["turn"]
    settings.ACE_MAX_REQUEST_BYTES = 5000
    response = api.post(f"/api/v1/turns/{turn}/complete/", {**COMPLETION, "content": "x" * 6000}, format="json")
    assert response.status_code == 413
    assert Turn.objects.get(pk=turn).status == "streaming"


def test_completing_a_turn_emits_the_seeds_spans(api, session, spans, django_capture_on_commit_callbacks):
    turn = start(api, session).json()["turn"]
    body = {
        **COMPLETION,
        "tool_calls": [{**COMPLETION["tool_calls"][0], "arguments": {"city": "杭州", "token": "t0p"}}],
        "tool_schema": [{"type": "function", "function": {"name": "get_weather"}}],
    }
    with django_capture_on_commit_callbacks(execute=True):
        api.post(f"/api/v1/turns/{turn}/complete/", body, format="json")
    emitted = spans()
    stream, schema, call = emitted["ai:Stream:qwen-max"], emitted["ai:ToolSchema"], emitted["ai:ToolCall:get_weather"]
    assert schema.parent.span_id == call.parent.span_id == stream.context.span_id
    assert stream.attributes["ace.turn.id"] == turn
    assert stream.attributes["gen_ai.usage.input_tokens"] == 1200
    assert '"杭州"' in call.attributes["ai.tool.arguments"] or "杭州" in call.attributes["ai.tool.arguments"]
    assert "t0p" not in call.attributes["ai.tool.arguments"]  # redacted before tracing too
    assert "get_weather" in schema.attributes["ai.tool_schema"]


def test_openai_shaped_tool_calls_are_accepted_and_unknown_keys_refused(api, session):
    turn = start(api, session).json()["turn"]
    openai_call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "南京"}'}}
    bad = api.post(
        f"/api/v1/turns/{turn}/complete/", {**COMPLETION, "tool_calls": [{**openai_call, "extra": 1}]}, format="json"
    )
    assert bad.status_code == 400
    assert "tool_calls.0.extra" in bad.json()["errors"]
    done = api.post(f"/api/v1/turns/{turn}/complete/", {**COMPLETION, "tool_calls": [openai_call]}, format="json")
    assert done.status_code == 200
    call = done.json()["assistant_message"]["tool_calls"][0]
    assert (call["name"], call["arguments"], call["type"]) == ("search", '{"q": "南京"}', "function")


def test_listing_a_sessions_turns(api, session):
    first = start(api, session).json()["turn"]
    second = start(api, session).json()["turn"]
    api.post(f"/api/v1/turns/{first}/complete/", COMPLETION, format="json")
    listed = api.get(f"/api/v1/sessions/{session.pk}/turns/").json()["results"]
    assert [t["turn"] for t in listed] == [second, first]
    assert [t["turn"] for t in api.get(f"/api/v1/sessions/{session.pk}/turns/?status=streaming").json()["results"]] == [
        second
    ]
    assert api.get(f"/api/v1/sessions/{session.pk}/turns/?status=nope").status_code == 400


def test_each_call_of_a_turn_is_a_handful_of_statements_and_reads_nothing_back(api, session):
    """The calls a chat app makes four or five times per answer: start and complete in 4 statements
    (BEGIN, the lock, one write, COMMIT), system-ready and checkpoints in one; the API key is not read again."""
    from django.test.utils import CaptureQueriesContext

    def statements(method, url, body):
        with CaptureQueriesContext(connection) as queries:
            response = getattr(api, method)(url, body, format="json")
        assert response.status_code in (200, 201), response.content
        return response.json(), [query["sql"] for query in queries.captured_queries]

    start(api, session)  # the key's check is now kept by this process
    turn, sql = statements("post", f"/api/v1/sessions/{session.pk}/turns/", {"content": "还有呢？", "external_id": "t"})
    assert len(sql) == 4 and "FOR UPDATE" in sql[1] and sql[2].startswith("WITH"), sql  # between BEGIN and COMMIT
    assert turn["user_message"]["content"] == "还有呢？" and turn["assistant_message"]["role"] == "assistant"
    url = f"/api/v1/turns/{turn['turn']}/"
    progress, sql = statements("post", url + "system-ready/", {"system_prompt": "You are helpful."})
    assert len(sql) == 1 and progress["system_ready_at"] is not None
    progress, sql = statements("patch", url, {"content": "明天多云", "thinking": "weather"})
    assert len(sql) == 1 and progress["status"] == "streaming"
    completed, sql = statements("post", url + "complete/", COMPLETION)
    assert len(sql) == 4, sql
    # What the answer shows is what was stored.
    stored = api.get(url).json()
    assert completed == stored
    assert stored["assistant_message"]["content"] == COMPLETION["content"]
    assert stored["user_message"]["thinking"] == "You are helpful."
    assert stored["user_message"]["skill_names"] == ["weather"]
    session.refresh_from_db()
    assert session_count_drift(session=session) == {}


@pytest.mark.django_db(transaction=True)
def test_twin_starts_racing_on_one_external_id_make_one_turn():
    """A client retrying a start while the first is still being written: both get the same turn."""
    api = make_client("turns-twins")
    session = SessionFactory(tenant=api.tenant)
    answers, barrier = [], threading.Barrier(6)

    def twin():
        client = make_client("turns-twins")
        try:
            barrier.wait()
            response = client.post(
                f"/api/v1/sessions/{session.pk}/turns/",
                {"content": "同一个问题", "external_id": "retry-1"},
                format="json",
            )
            answers.append((response.status_code, response.json().get("turn")))
        finally:
            connection.close()

    threads = [threading.Thread(target=twin) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(code for code, _ in answers) == [200] * 5 + [201], answers
    assert len({turn for _, turn in answers}) == 1
    assert Turn.objects.filter(session=session).count() == 1
    assert Message.objects.filter(session=session).count() == 2
    session.refresh_from_db()
    assert session.messages == 2 and session_count_drift(session=session) == {}


def _race(turn, calls) -> dict:
    """Send `calls` ({path under the turn: body}; "" is a checkpoint) at once, each from its own connection."""
    codes, barrier = {}, threading.Barrier(len(calls))

    def call(path, body):
        client = make_client("turns-race")
        try:
            barrier.wait()
            method = client.post if path else client.patch
            codes[path] = method(f"/api/v1/turns/{turn}/{path}", body, format="json").status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=call, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes


@pytest.mark.django_db(transaction=True)
def test_a_checkpoint_racing_the_completion_never_lands_after_it():
    api = make_client("turns-race")
    session = SessionFactory(tenant=api.tenant)
    for round_ in range(5):
        turn = start(api, session).json()["turn"]
        codes = _race(turn, {"complete/": COMPLETION, "": {"content": f"partial {round_}"}})
        assert codes["complete/"] == 200 and codes[""] in (200, 409), codes
        stored = Turn.objects.select_related("assistant_message").get(pk=turn)
        assert stored.assistant_message.content == COMPLETION["content"]  # the checkpoint came first, or not at all
