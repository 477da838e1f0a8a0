"""A tool call in the timeline and the chat points to the toolResult message that answers it."""

import pytest
from django.urls import reverse

from sessions_app.models import Conversation
from tests.support.api import post_messages


@pytest.mark.django_db
def test_each_call_links_to_its_result_by_id_or_else_in_order(api, session, staff):
    post_messages(
        api,
        session,
        [
            {"role": "user", "content": "杭州和上海明天天气？"},
            {
                "role": "assistant",
                "content": "查一下。",
                "tool_calls": [
                    {"id": "call_a", "name": "get_weather", "arguments": {"city": "杭州"}},
                    {"id": "call_b", "name": "get_weather", "arguments": {"city": "上海"}},
                    {"id": "call_c", "name": "get_time", "arguments": {}},
                ],
            },
            # Answered out of order: call_b names its call, the other two are matched in order by tool name.
            {
                "role": "toolResult",
                "content": "上海：雨",
                "tool_name": "get_weather",
                "metadata": {"tool_call_id": "call_b"},
            },
            {"role": "toolResult", "content": "09:00", "tool_name": "get_time"},
            {"role": "toolResult", "content": "杭州：晴", "tool_name": "get_weather"},
            {"role": "assistant", "content": "杭州晴，上海有雨。", "tool_calls": [{"id": "call_d", "name": "search"}]},
        ],
    )
    timeline = staff.get(reverse("admin:sessions_app_session_timeline", args=[session.pk])).content.decode()
    links = [
        (call, timeline.find(f"call_{call}"), timeline.find(f'href="#seq-{seq}">message #{seq}</a>'))
        for call, seq in (("a", 5), ("b", 3), ("c", 4))
    ]
    for call, call_at, link_at in links:
        assert call_at > 0 and link_at > call_at, call  # each call's block holds the link to its result
    order = sorted(links, key=lambda link: link[1])
    assert [link[2] for link in order] == sorted(link[2] for link in order)  # in the calls' order
    assert timeline.count("no result recorded") == 1  # call_d: its result never came

    conversation = Conversation.objects.get(session=session)
    chat = staff.get(reverse("admin:sessions_app_conversation_chat", args=[conversation.pk])).content.decode()
    assert 'href="#seq-3">message #3</a>' in chat and 'href="#seq-5">message #5</a>' in chat
