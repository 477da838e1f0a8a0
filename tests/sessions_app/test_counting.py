"""Counting exactly as ../shared/seeds/000 defines it."""

import pytest

from sessions_app.models import Conversation, LlmRequest, Message

WEATHER = [
    {"role": "user", "content": "查看天气"},
    {"role": "assistant", "content": "让我查一下...", "auth_type": "oauth", "input_tokens": 100, "output_tokens": 10},
    {"role": "toolResult", "content": "{天气数据}", "auth_type": "oauth"},
    {"role": "assistant", "content": "今天是晴天...", "auth_type": "oauth", "input_tokens": 120, "output_tokens": 12},
    {"role": "user", "content": "明天呢？"},
    {"role": "assistant", "content": "明天...", "auth_type": "oauth", "input_tokens": 140, "output_tokens": 14},
]


def post(api, session, body):
    return api.post(f"/api/v1/sessions/{session.pk}/messages/", body, format="json")


def stats(api, session):
    response = api.get(f"/api/v1/sessions/{session.pk}/stats/")
    assert response.status_code == 200
    return response.json()


def test_the_seeds_weather_example_counts_4_requests_6_messages_2_conversations(api, session):
    assert post(api, session, WEATHER).status_code == 201

    counts = stats(api, session)
    assert counts["requests"] == 4
    assert counts["messages"] == 6
    assert (counts["message_user"], counts["message_assistant"], counts["message_toolresult"]) == (2, 3, 1)
    assert counts["message_error"] == 0
    assert counts["conversations"] == 2
    assert (counts["input_tokens"], counts["output_tokens"], counts["total_tokens"]) == (360, 36, 396)

    first, second = api.get(f"/api/v1/sessions/{session.pk}/conversations/").json()["results"]
    assert (first["ordinal"], first["message_count"], first["requests"]) == (1, 4, 3)
    assert (first["message_user"], first["message_assistant"], first["message_toolresult"]) == (1, 2, 1)
    assert (second["ordinal"], second["message_count"], second["requests"]) == (2, 2, 1)
    assert first["input_tokens"] + second["input_tokens"] == 360


def test_the_same_example_posted_one_message_at_a_time_counts_the_same(api, session):
    for message in WEATHER:
        assert post(api, session, message).status_code == 201
    counts = stats(api, session)
    assert (counts["requests"], counts["messages"], counts["conversations"]) == (4, 6, 2)
    seqs = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == [1, 2, 3, 4, 5, 6]


def test_a_tool_result_never_starts_a_conversation(api, session):
    post(api, session, [{"role": "toolResult", "content": "orphan result"}, {"role": "error", "content": "boom"}])
    assert stats(api, session)["conversations"] == 0
    assert Message.objects.filter(session=session, conversation__isnull=True).count() == 2

    post(api, session, [{"role": "user", "content": "hi"}, {"role": "toolResult", "content": "{}"}])
    counts = stats(api, session)
    assert counts["conversations"] == 1
    tool_result = Message.objects.get(session=session, seq=4)
    assert tool_result.conversation.ordinal == 1


def test_messages_sharing_a_request_id_count_once_with_the_most_complete_usage(api, session):
    """A streamed response written as several lines: usage repeats and grows; never summed."""
    lines = [
        {"role": "user", "content": "refactor"},
        {
            "role": "assistant",
            "content": "part 1",
            "request_id": "req_1",
            "input_tokens": 5,
            "output_tokens": 1,
            "cache_read_tokens": 1000,
        },
        {
            "role": "assistant",
            "content": "part 2",
            "request_id": "req_1",
            "input_tokens": 5,
            "output_tokens": 80,
            "cache_read_tokens": 1000,
        },
    ]
    post(api, session, lines)
    # The last line of the same response arrives in a later batch.
    post(
        api,
        session,
        {
            "role": "assistant",
            "content": "part 3",
            "request_id": "req_1",
            "input_tokens": 5,
            "output_tokens": 120,
            "cache_read_tokens": 1000,
            "cache_creation_tokens": 50,
        },
    )
    counts = stats(api, session)
    assert counts["requests"] == 1
    assert counts["message_assistant"] == 3
    assert (counts["input_tokens"], counts["output_tokens"]) == (5, 120)
    assert (counts["cache_read_tokens"], counts["cache_creation_tokens"]) == (1000, 50)
    request = LlmRequest.objects.get(session=session, request_id="req_1")
    assert request.output_tokens == 120
    assert Message.objects.filter(llm_request=request).count() == 3


def test_auth_type_without_request_id_counts_each_message(api, session):
    post(
        api,
        session,
        [
            {"role": "assistant", "content": "a", "auth_type": "api-key"},
            {"role": "assistant", "content": "b", "auth_type": "api-key"},
            {"role": "assistant", "content": "c"},
        ],
    )
    assert stats(api, session)["requests"] == 2


def test_request_ids_are_scoped_to_the_session(api, session):
    from tests.support.factories import SessionFactory

    other = SessionFactory(tenant=api.tenant)
    post(api, session, {"role": "assistant", "content": "x", "request_id": "req_same"})
    post(api, other, {"role": "assistant", "content": "y", "request_id": "req_same"})
    assert stats(api, session)["requests"] == 1
    assert stats(api, other)["requests"] == 1


def test_named_conversations_group_messages(api, session):
    response = post(
        api,
        session,
        [
            {"role": "user", "content": "q1", "conversation": "chat-A", "feishu_conversation_id": "oc_1"},
            {"role": "user", "content": "q2", "conversation": "chat-A"},
            {"role": "assistant", "content": "a2"},
        ],
    )
    body = response.json()
    assert body[0]["conversation"] == body[1]["conversation"] == body[2]["conversation"]
    conversation = Conversation.objects.get(pk=body[0]["conversation"])
    assert (conversation.conversation_id, conversation.feishu_conversation_id) == ("chat-A", "oc_1")
    assert conversation.messages == 3
    assert stats(api, session)["conversations"] == 1

    # Naming the conversation by our own id appends to it as well.
    post(api, session, {"role": "user", "content": "q3", "conversation": str(conversation.pk)})
    conversation.refresh_from_db()
    assert conversation.messages == 4
    assert stats(api, session)["conversations"] == 1


@pytest.mark.parametrize("role,counter", [("error", "message_error"), ("system", "message_system")])
def test_every_role_has_its_counter(api, session, role, counter):
    post(api, session, {"role": role, "content": "x"})
    counts = stats(api, session)
    assert counts[counter] == 1
    assert counts["messages"] == 1
