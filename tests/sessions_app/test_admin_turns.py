"""Streamed chat turns in the admin (../shared/seeds/003): the turn list with its status filters, and the
conversation read as a chat: the question with its system prompt snapshot folded, the answer with its
reasoning folded, each tool call with its arguments and result, and the model, tokens, latency and finish
reason; a bounded number of queries however many turns a page shows."""

import html
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from sessions_app.models import Message, Turn, TurnStatus
from sessions_app.services.turns import (
    turn_checkpoint,
    turn_complete,
    turn_start,
    turn_system_ready,
    turns_close_abandoned,
)
from tests.support.api import make_client
from tests.support.factories import SessionFactory

TURNS_URL = reverse("admin:sessions_app_turn_changelist")

COMPLETION = {
    "content": "明天多云转小雨，记得带伞。",
    "thinking": "The user asks about tomorrow; call the weather tool.",
    "tool_calls": [
        {
            "id": "call_1",
            "name": "get_weather",
            "arguments": {"city": "杭州", "day": "tomorrow"},
            "result": {"weather": "小雨", "temp_c": 17},
        },
        {
            "id": "call_2",
            "name": "search",
            "arguments": '{"query": "umbrella shops"}',  # a JSON string: shown parsed and pretty-printed
            "result": "3 shops nearby",
        },
    ],
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


@pytest.fixture
def tenant(db):
    return make_client("acme").tenant


@pytest.fixture
def chat(tenant):
    return SessionFactory(tenant=tenant, name="杭州三日游计划", tool="chat", user_id="xiaoming")


def start(session, content="明天呢？", **kwargs) -> Turn:
    kwargs.setdefault("conversation", "chat-1")
    return turn_start(tenant=session.tenant, session_id=session.pk, content=content, **kwargs).turn


def completed(session, content="明天呢？", data=None, **kwargs) -> Turn:
    turn = start(session, content, **kwargs)
    turn_system_ready(tenant=session.tenant, turn_id=turn.pk, system_prompt="You are helpful.\n[memory] 偏好博物馆")
    turn_checkpoint(tenant=session.tenant, turn_id=turn.pk, content="明天", thinking="The user asks")
    turn, _ = turn_complete(tenant=session.tenant, turn_id=turn.pk, data=data or COMPLETION)
    return turn


def failed(session, content="会下雪吗？") -> Turn:
    turn = start(session, content)
    data = {"content": "", "model": "qwen-max", "finish_reason": "error", "error": "upstream 502", "elapsed_ms": 90}
    turn, _ = turn_complete(tenant=session.tenant, turn_id=turn.pk, data=data)
    return turn


def abandoned(session, content="还在吗？") -> Turn:
    turn = start(session, content)
    turn_checkpoint(tenant=session.tenant, turn_id=turn.pk, content="半截回答")
    Turn.objects.filter(pk=turn.pk).update(last_activity_at=timezone.now() - timedelta(minutes=30))
    assert turns_close_abandoned(older_than=timedelta(minutes=10)) == 1
    turn.refresh_from_db()
    return turn


@pytest.fixture
def turns(chat):
    """One turn in each state, in one conversation."""
    result = {
        "completed": completed(chat),
        "failed": failed(chat),
        "abandoned": abandoned(chat),
        "streaming": start(chat, "后天呢？", external_id="turn-ext-9"),
    }
    assert {status: turn.status for status, turn in result.items()} == {
        "completed": TurnStatus.COMPLETED,
        "failed": TurnStatus.FAILED,
        "abandoned": TurnStatus.ABANDONED,
        "streaming": TurnStatus.STREAMING,
    }
    return result


def listed(response) -> set:
    assert response.status_code == 200
    return {turn.pk for turn in response.context["cl"].result_list}


def text(response) -> str:
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def pre_blocks(page: str, css_class: str) -> list:
    """The contents of every `<pre class="css_class">`, each parsed as JSON when it is JSON."""
    found = []
    for body in re.findall(rf'<pre class="{css_class}">(.*?)</pre>', page, flags=re.S):
        try:
            found.append(json.loads(body))
        except ValueError:
            found.append(body)
    return found


def chat_url(conversation_id) -> str:
    return reverse("admin:sessions_app_conversation_chat", args=[conversation_id])


# -- the turn list and page ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_turn_list_and_page_answer(staff, turns):
    page = text(staff.get(TURNS_URL))
    for turn in turns.values():
        assert str(turn.pk) in page or reverse("admin:sessions_app_turn_change", args=[turn.pk]) in page
    assert "streaming…" in page and "abandoned" in page and "failed" in page and "completed" in page
    assert "qwen-max" in page and "1,280" in page and "3,400 ms" in page  # model, tokens, latency
    assert "明天呢？" in page and "后天呢？" in page  # the question's preview
    assert '<span class="ace-badge ace-badge-amber">streaming…</span>' in page  # streaming is amber

    for turn in turns.values():
        response = staff.get(reverse("admin:sessions_app_turn_change", args=[turn.pk]))
        assert response.status_code == 200
        assert 'name="_save"' not in response.content.decode()
    done = text(staff.get(reverse("admin:sessions_app_turn_change", args=[turns["completed"].pk])))
    assert "明天多云转小雨" in done and "You are helpful." in done and '"city": "杭州"' in done
    assert chat_url(turns["completed"].conversation_id) in done


@pytest.mark.django_db
def test_turns_are_read_only(staff, turns):
    turn = turns["completed"]
    assert staff.get(reverse("admin:sessions_app_turn_add")).status_code == 403
    change_url = reverse("admin:sessions_app_turn_change", args=[turn.pk])
    assert staff.post(change_url, {"status": "failed"}).status_code == 403
    assert staff.get(reverse("admin:sessions_app_turn_delete", args=[turn.pk])).status_code == 403
    assert Turn.objects.get(pk=turn.pk).status == TurnStatus.COMPLETED


@pytest.mark.django_db
def test_status_filters_return_the_right_turns(staff, turns):
    assert listed(staff.get(TURNS_URL)) == {turn.pk for turn in turns.values()}
    assert listed(staff.get(TURNS_URL, {"status": "unfinished"})) == {turns["streaming"].pk}
    assert listed(staff.get(TURNS_URL, {"status": "failed"})) == {turns["failed"].pk}
    assert listed(staff.get(TURNS_URL, {"status": "abandoned"})) == {turns["abandoned"].pk}
    assert listed(staff.get(TURNS_URL, {"status": "completed"})) == {turns["completed"].pk}
    assert staff.get(TURNS_URL, {"status": "nonsense"}).status_code == 302  # the "?e=1" error page

    other = make_client("globex").tenant
    elsewhere = completed(SessionFactory(tenant=other))
    tenant_id = turns["completed"].tenant_id
    assert elsewhere.pk not in listed(staff.get(TURNS_URL, {"tenant__id__exact": tenant_id}))
    assert listed(staff.get(TURNS_URL, {"tenant__id__exact": other.pk})) == {elsewhere.pk}
    assert listed(staff.get(TURNS_URL, {"session": turns["completed"].session_id})) == {t.pk for t in turns.values()}
    conversation = turns["completed"].conversation_id
    assert listed(staff.get(TURNS_URL, {"conversation": conversation})) == {t.pk for t in turns.values()}


@pytest.mark.django_db
def test_search_by_turn_id_or_external_id(staff, turns):
    assert listed(staff.get(TURNS_URL, {"q": "turn-ext-9"})) == {turns["streaming"].pk}
    assert listed(staff.get(TURNS_URL, {"q": str(turns["failed"].pk)})) == {turns["failed"].pk}
    assert listed(staff.get(TURNS_URL, {"q": "nothing-like-this"})) == set()


@pytest.mark.django_db
def test_turn_list_never_reads_the_long_texts(staff, turns):
    with CaptureQueriesContext(connection) as queries:
        staff.get(TURNS_URL)
    sqls = [q["sql"] for q in queries.captured_queries if 'FROM "sessions_app_turn"' in q["sql"]]
    [rows] = [sql for sql in sqls if "SUBSTRING" in sql.upper()]  # the page: one query, all relations joined
    assert rows.count("JOIN") == 4 and '"sessions_app_message"."model"' in rows
    for column in ("thinking", "tool_calls", "search_vector", "attachments", "metadata"):
        assert f'."{column}"' not in rows, column  # of neither message, nor the session's metadata
    # Only the head of the question's content is read, and nothing of the answer's.
    assert re.findall(r'[\w"]+\."content"', rows) == ['"sessions_app_message"."content"']
    assert 'SUBSTRING("sessions_app_message"."content", 1, 141)' in rows


# -- the conversation as a chat --------------------------------------------------------------------------


@pytest.mark.django_db
def test_chat_shows_question_answer_reasoning_and_tool_calls(staff, turns):
    turn = turns["completed"]
    user = Message.objects.get(pk=turn.user_message_id)
    Message.objects.filter(pk=user.pk).update(attachments=["file_1"], thinking_mode="deep")
    response = staff.get(chat_url(turn.conversation_id))
    page = text(response)

    # The question: its content, the injected system prompt folded as a snapshot, skills and tools offered.
    assert "明天呢？" in page and "file_1" in page and "deep" in page
    assert "<summary>system prompt snapshot</summary><pre>You are helpful.\n[memory] 偏好博物馆</pre>" in page
    assert '<details class="ace-system-prompt">' in page
    assert "tools offered" in page and "<code>search</code>" in page and "<code>weather</code>" in page

    # The answer: its reasoning folded, each tool call with its arguments and result pretty-printed.
    assert "<summary>thinking</summary><pre>The user asks about tomorrow; call the weather tool.</pre>" in page
    assert "明天多云转小雨，记得带伞。" in page
    assert '<code class="ace-tool-name">get_weather</code>' in page and "call_1" in page
    assert pre_blocks(page, "ace-tool-arguments") == [{"city": "杭州", "day": "tomorrow"}, {"query": "umbrella shops"}]
    assert pre_blocks(page, "ace-tool-result") == [{"weather": "小雨", "temp_c": 17}, "3 shops nearby"]
    assert '{\n  "query": "umbrella shops"\n}' in page  # the JSON string, parsed and indented
    assert '<code class="ace-tool-name">search</code>' in page
    assert "tools called" in page

    # Model, parameters, tokens, latency, finish reason and API calls.
    for fact in ("qwen-max", "2,048", "0.7", "in 1,200", "out 80", "total 1,280", "3,400 ms", "API calls"):
        assert fact in page, fact
    assert '<span class="ace-badge ace-badge-grey">stop</span>' in page
    answer = next(m for m in response.context["chat"] if m.pk == turn.assistant_message_id)
    assert answer.turn.pk == turn.pk and answer.api_calls == 2


@pytest.mark.django_db
def test_chat_marks_unfinished_failed_and_abandoned_answers(staff, turns):
    page = text(staff.get(chat_url(turns["completed"].conversation_id)))
    assert "streaming…" in page and "no content saved yet" in page  # the open stream's placeholder
    assert "半截回答" in page and "abandoned" in page and "Abandoned: no completion within 600 s." in page
    assert "upstream 502" in page
    assert '<span class="ace-badge ace-badge-red">error</span>' in page  # finish_reason error: a red badge
    assert "ace-turn-streaming" in page and "ace-turn-abandoned" in page


@pytest.mark.django_db
def test_timeline_shows_the_turn_fields_too(staff, turns):
    session_id = turns["completed"].session_id
    page = text(staff.get(reverse("admin:sessions_app_session_timeline", args=[session_id])))
    assert "<summary>system prompt snapshot</summary>" in page and "<summary>thinking</summary>" in page
    assert {"weather": "小雨", "temp_c": 17} in pre_blocks(page, "ace-tool-result")
    assert "streaming…" in page and chat_url(turns["completed"].conversation_id) in page


@pytest.mark.django_db
def test_conversation_pages_link_to_the_chat(staff, turns):
    conversation_id = turns["completed"].conversation_id
    url = chat_url(conversation_id)
    assert url in text(staff.get(reverse("admin:sessions_app_conversation_changelist")))
    page = text(staff.get(reverse("admin:sessions_app_conversation_change", args=[conversation_id])))
    assert url in page and f"{TURNS_URL}?conversation={conversation_id}" in page
    missing = staff.get(chat_url("00000000-0000-0000-0000-000000000000"))
    assert missing.status_code == 302


@pytest.mark.django_db
def test_chat_pages_by_seq(staff, chat, monkeypatch):
    from sessions_app.admin.conversations import ConversationAdmin

    monkeypatch.setattr(ConversationAdmin, "chat_page_size", 4)
    made = [completed(chat, f"question {i}") for i in range(5)]  # 10 messages
    url = chat_url(made[0].conversation_id)
    first = staff.get(url)
    assert [m.seq for m in first.context["chat"]] == [1, 2, 3, 4]
    assert first.context["next_url"] == "?after_seq=4"
    second = staff.get(url + first.context["next_url"])
    assert [m.seq for m in second.context["chat"]] == [5, 6, 7, 8]
    last = staff.get(url + first.context["last_url"])
    assert [m.seq for m in last.context["chat"]] == [7, 8, 9, 10]
    assert "question 4" in text(last)


# -- bounded queries -------------------------------------------------------------------------------------


def query_count(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries.captured_queries)


@pytest.mark.django_db
def test_queries_do_not_grow_with_the_turns_on_a_page(staff, chat, django_assert_max_num_queries):
    first = completed(chat)
    failed(chat)
    start(chat, "后天呢？")
    conversation = chat_url(first.conversation_id)
    timeline = reverse("admin:sessions_app_session_timeline", args=[chat.pk])
    few = {url: query_count(staff, url) for url in (TURNS_URL, conversation, timeline)}

    for i in range(12):
        completed(chat, f"question {i}")
        failed(chat)
    abandoned(chat)
    for url, count in few.items():
        with django_assert_max_num_queries(count):
            staff.get(url)
    # One query for the turns of a whole chat page.
    with CaptureQueriesContext(connection) as queries:
        staff.get(conversation)
    assert len([q for q in queries.captured_queries if 'FROM "sessions_app_turn"' in q["sql"]]) == 1
