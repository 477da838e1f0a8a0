"""The admin as the auditors' tool: every page answers, the message list stays cheap on a big table, the
timeline reads like a transcript, messages stay read-only, and key creation and revocation go through the
API-key service."""

import datetime
import hashlib
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from platform_kit.admin.paginator import EstimatedCountPaginator
from sessions_app.models import ApiKey, Conversation, LlmRequest, Message, Session, StateVersion, Tenant, UsageHourly
from sessions_app.services.messages import messages_append
from sessions_app.services.state import state_replace
from tests.support.factories import SessionFactory

MESSAGES_URL = reverse("admin:sessions_app_message_changelist")


def append(session, items):
    return messages_append(tenant=session.tenant, session_id=session.pk, items=items).messages


@pytest.fixture
def recorded(session):
    """Two conversations: a Chinese one with a tool call, an English one with an error; and a state change."""
    append(
        session,
        [
            {"role": "user", "content": "今天天气怎么样？", "external_id": "ext-42"},
            {
                "role": "assistant",
                "content": "",
                "thinking": "The user asks about the weather; call the tool.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "杭州"}}],
                "model": "qwen-max",
                "auth_type": "api_key",
                "request_id": "req-1",
                "input_tokens": 1200,
                "output_tokens": 34,
                "finish_reason": "tool_calls",
                "elapsed_ms": 812,
            },
            {"role": "toolResult", "tool_name": "get_weather", "content": '{"city": "杭州", "sky": "晴"}'},
            {
                "role": "assistant",
                "content": "杭州今天晴，气温 25 度。",
                "model": "qwen-max",
                "request_id": "req-2",
                "auth_type": "api_key",
                "input_tokens": 1500,
                "output_tokens": 20,
                "finish_reason": "stop",
            },
        ],
    )
    append(
        session,
        [
            {
                "role": "user",
                "content": "What's the weather in Hangzhou tomorrow?",
                "conversation": "conv-b",
                "feishu_conversation_id": "oc_123",
            },
            {"role": "assistant", "content": "Tomorrow will be sunny.", "model": "qwen-max", "request_id": "req-3"},
            {"role": "error", "content": "rate limited"},
        ],
    )
    state_replace(tenant=session.tenant, session_id=session.pk, data={"city": "杭州", "days": 3})
    session.refresh_from_db()
    return session


def result_list(response):
    return list(response.context["cl"].result_list)


def message_queries(client, url=MESSAGES_URL):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return response, [q["sql"] for q in queries.captured_queries]


def assert_no_message_count(sqls):
    counts = [sql for sql in sqls if "COUNT(" in sql.upper() and "sessions_app_message" in sql]
    assert counts == []


# -- every page answers ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_changelist_and_change_page_answers(staff, recorded):
    objects = {
        Session: recorded,
        Conversation: Conversation.objects.filter(session=recorded).first(),
        Message: Message.objects.filter(session=recorded, role="assistant").first(),
        LlmRequest: LlmRequest.objects.filter(session=recorded).first(),
        StateVersion: StateVersion.objects.filter(session=recorded).first(),
        UsageHourly: UsageHourly.objects.first(),
        Tenant: recorded.tenant,
        ApiKey: ApiKey.objects.first(),
    }
    assert staff.get(reverse("admin:index")).status_code == 200
    for model, obj in objects.items():
        name = f"admin:sessions_app_{model._meta.model_name}"
        assert obj is not None, model
        assert staff.get(reverse(f"{name}_changelist")).status_code == 200, model
        assert staff.get(reverse(f"{name}_change", args=[obj.pk])).status_code == 200, model
    assert staff.get(reverse("admin:sessions_app_apikey_add")).status_code == 200


@pytest.mark.django_db
def test_filters_and_searches_answer_without_error(staff, recorded):
    today = timezone.now().date().isoformat()
    urls = {
        "admin:sessions_app_session_changelist": [
            "active=yes",
            "active=no&deleted=no",
            "deleted=yes",
            "tool=chat",
            f"started_at__from={today}&started_at__to={today}",
            f"tenant__id__exact={recorded.tenant_id}",
            "q=杭州",
            "q=xiaoming",
            f"q={recorded.pk}",
        ],
        "admin:sessions_app_message_changelist": [
            "role__exact=assistant",
            "tool=chat",
            "model=qwen-max",
            f"created_at__from={today}&created_at__to={today}",
            f"created_at__from={today}&created_at__to=",
            f"session={recorded.pk}",
            f"tenant__id__exact={recorded.tenant_id}",
            "o=1",
        ],
        "admin:sessions_app_conversation_changelist": [f"session={recorded.pk}", "q=conv-b", "q=oc_123"],
        "admin:sessions_app_llmrequest_changelist": ["model=qwen-max", "q=req-1", f"session={recorded.pk}"],
        "admin:sessions_app_stateversion_changelist": [f"session={recorded.pk}", "change__exact=put"],
        "admin:sessions_app_usagehourly_changelist": ["model=qwen-max", "tool=chat"],
        "admin:sessions_app_apikey_changelist": ["status=active", "status=revoked"],
    }
    for name, queries in urls.items():
        for query in queries:
            response = staff.get(f"{reverse(name)}?{query}")
            assert response.status_code == 200, (name, query, response.status_code)
            assert "cl" in response.context, (name, query)
    # A bad session id or date is a redirect to the "?e=1" error page, never a 500.
    assert staff.get(f"{MESSAGES_URL}?session=not-a-uuid").status_code == 302
    assert staff.get(f"{MESSAGES_URL}?created_at__from=yesterday").status_code == 302


@pytest.mark.django_db
def test_session_list_and_page_show_the_stored_counters(staff, recorded):
    response = staff.get(reverse("admin:sessions_app_session_changelist"))
    assert recorded.name in response.content.decode()
    page = staff.get(reverse("admin:sessions_app_session_change", args=[recorded.pk])).content.decode()
    assert f"{recorded.total_tokens:,}" in page  # 2,754 total tokens, with the thousands separator
    assert recorded.total_tokens >= 1000
    assert reverse("admin:sessions_app_session_timeline", args=[recorded.pk]) in page
    assert "v1" in page and "days" in page  # the state history
    assert "conv-b" in page and "oc_123" in page  # the conversations inline


def test_session_list_tokens_count_cache_reads_and_writes_as_the_dashboard_does(staff, session):
    """The lists' tokens are every token (input + output + cache read + cache write), like the usage dashboard's
    total and ccusage's; a cache-heavy session ranks first when the column is sorted most-first."""
    append(
        session,
        [
            {"role": "user", "content": "refactor the parser"},
            {
                "role": "assistant",
                "content": "done",
                "model": "claude-sonnet-4-5",
                "auth_type": "oauth",
                "input_tokens": 100,
                "output_tokens": 50,
                "cache_read_tokens": 2_000_000,
                "cache_creation_tokens": 300,
            },
        ],
    )
    light = SessionFactory(tenant=session.tenant, name="light session")
    append(light, [{"role": "assistant", "content": "hi", "auth_type": "oauth", "input_tokens": 9000}])
    url = reverse("admin:sessions_app_session_changelist")
    page = staff.get(url).content.decode()
    assert 'title="2,000,450: 100 input · 50 output · 2,000,000 cache read · 300 cache write"' in page
    assert ">2.0M<" in page
    headers = page.split("<thead>")[1].split("</thead>")[0].split("</th>")  # `o` counts the checkbox column too
    column = next(i for i, th in enumerate(headers) if "column-tokens_summary" in th)
    ordered = staff.get(url, {"o": f"-{column}"}).content.decode()  # the column sorted most first
    assert ordered.index(session.name) < ordered.index("light session")


# -- the message timeline --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_timeline_reads_in_seq_order_grouped_by_conversation(staff, recorded):
    response = staff.get(reverse("admin:sessions_app_session_timeline", args=[recorded.pk]))
    assert response.status_code == 200
    groups = response.context["groups"]
    assert [g["conversation"].ordinal for g in groups] == [1, 2]
    assert [[m.seq for m in g["messages"]] for g in groups] == [[1, 2, 3, 4], [5, 6, 7]]
    html = response.content.decode()
    order = ["今天天气怎么样", "get_weather", "杭州今天晴", "What&#x27;s the weather in Hangzhou", "rate limited"]
    positions = [html.index(text) for text in order]
    assert positions == sorted(positions)
    assert "<details" in html and "call the tool" in html  # thinking, folded
    assert '"name": "get_weather"' in html.replace("&quot;", '"')  # tool calls, pretty-printed JSON
    assert "oc_123" in html and "conv-b" in html
    assert "qwen-max" in html and "1,200" in html and "812 ms" in html and "tool_calls" in html


@pytest.mark.django_db
def test_timeline_pages_by_seq(staff, session):
    append(
        session,
        [{"role": "user" if i % 25 == 0 else "assistant", "content": f"message number {i + 1}"} for i in range(250)],
    )
    url = reverse("admin:sessions_app_session_timeline", args=[session.pk])

    def seqs(response):
        return [m.seq for g in response.context["groups"] for m in g["messages"]]

    with CaptureQueriesContext(connection) as queries:
        first = staff.get(url)
    assert seqs(first) == list(range(1, 201))
    assert first.context["next_url"] == "?after_seq=200" and first.context["previous_url"] is None
    # Only one page of messages is ever read.
    assert all(
        "LIMIT 200" in q["sql"]
        for q in queries.captured_queries
        if 'FROM "sessions_app_message"' in q["sql"] and "EXISTS" not in q["sql"].upper() and "LIMIT 1" not in q["sql"]
    )

    second = staff.get(url + first.context["next_url"])
    assert seqs(second) == list(range(201, 251))
    assert second.context["next_url"] is None
    assert "message number 250" in second.content.decode()

    back = staff.get(url + second.context["previous_url"])
    assert seqs(back) == list(range(1, 201))
    last = staff.get(url + first.context["last_url"])
    assert seqs(last) == list(range(51, 251))


@pytest.mark.django_db
def test_timeline_of_an_unknown_session_redirects(staff, db):
    response = staff.get(reverse("admin:sessions_app_session_timeline", args=["00000000-0000-0000-0000-000000000000"]))
    assert response.status_code == 302


# -- the message list on a big table ---------------------------------------------------------------------


def add_messages(session, count):
    append(
        session, [{"role": ("user", "assistant")[i % 2], "content": f"line {i}", "model": "m1"} for i in range(count)]
    )


@pytest.mark.django_db
def test_message_list_runs_a_fixed_number_of_queries_and_never_counts(staff, session, django_assert_max_num_queries):
    other = SessionFactory(tenant=session.tenant, tool="claude-code")
    add_messages(session, 5)
    add_messages(other, 5)
    _, small = message_queries(staff)

    add_messages(session, 45)
    add_messages(other, 45)
    response, big = message_queries(staff)
    assert len(result_list(response)) == 100
    assert len(big) == len(small)
    with django_assert_max_num_queries(len(small)):
        staff.get(MESSAGES_URL)
    assert_no_message_count(small + big)

    # Filtered and searched lists are bounded too.
    _, filtered = message_queries(staff, f"{MESSAGES_URL}?role__exact=user&tool=claude-code&model=m1&q=line")
    # + the model filter's choices, and the keyword probe (EXPLAIN, savepoint, SET LOCAL, GIN lookup, release).
    assert len(filtered) <= len(small) + 6
    assert_no_message_count(filtered)


@pytest.mark.django_db
def test_message_list_estimates_past_the_exact_limit(staff, session, monkeypatch):
    monkeypatch.setattr(EstimatedCountPaginator, "exact_limit", 30)
    add_messages(session, 150)

    response, sqls = message_queries(staff, f"{MESSAGES_URL}?role__exact=user")  # filtered: the planner's estimate
    assert response.context["cl"].paginator.is_estimate
    assert response.context["cl"].result_count > 30
    assert "about" in response.content.decode()
    assert any(sql.startswith("EXPLAIN") for sql in sqls)
    assert_no_message_count(sqls)

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_message")
    response, sqls = message_queries(staff)  # unfiltered: pg_class.reltuples
    assert response.context["cl"].result_count == 150
    assert len(result_list(response)) == 100
    assert any("reltuples" in sql for sql in sqls)
    assert_no_message_count(sqls)
    assert staff.get(MESSAGES_URL + "?p=2").status_code == 200


@pytest.mark.django_db
def test_message_list_is_newest_first_with_session_links(staff, recorded):
    response = staff.get(MESSAGES_URL)
    rows = result_list(response)
    assert [m.seq for m in rows] == sorted((m.seq for m in rows), reverse=True)
    html = response.content.decode()
    assert reverse("admin:sessions_app_session_change", args=[recorded.pk]) in html
    assert "rate limited" in html and "get_weather" in html


# -- messages are read-only ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_messages_cannot_be_added_changed_or_deleted(staff, recorded):
    message = Message.objects.filter(session=recorded).first()
    change_url = reverse("admin:sessions_app_message_change", args=[message.pk])

    page = staff.get(change_url)
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert "今天天气怎么样" in page.content.decode()

    assert staff.get(reverse("admin:sessions_app_message_add")).status_code == 403
    assert staff.post(reverse("admin:sessions_app_message_add"), {"content": "forged"}).status_code == 403
    assert staff.post(change_url, {"content": "changed"}).status_code == 403
    assert staff.get(reverse("admin:sessions_app_message_delete", args=[message.pk])).status_code == 403
    assert (
        staff.post(reverse("admin:sessions_app_message_delete", args=[message.pk]), {"post": "yes"}).status_code == 403
    )
    response = staff.post(MESSAGES_URL, {"action": "delete_selected", "_selected_action": [str(message.pk)]})
    assert response.status_code in (200, 302)
    message.refresh_from_db()
    assert message.content == "今天天气怎么样？"
    assert Message.objects.filter(session=recorded).count() == 7


# -- full-text search ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_full_text_search_finds_chinese_and_english(staff, recorded):
    def found(query):
        return {m.content for m in result_list(staff.get(MESSAGES_URL, {"q": query}))}

    assert found("天气") == {"今天天气怎么样？"}
    assert found("杭州") == {"杭州今天晴，气温 25 度。", '{"city": "杭州", "sky": "晴"}'}
    assert found("weather") == {"What's the weather in Hangzhou tomorrow?"}
    assert found("sunny") == {"Tomorrow will be sunny."}
    assert found("ext-42") == {"今天天气怎么样？"}  # an exact external_id
    assert found("req-3") == {"Tomorrow will be sunny."}  # an exact request_id
    assert found("snow") == set()


# -- sessions: actions and edits go through the services -------------------------------------------------


@pytest.mark.django_db
def test_end_selected_sessions(staff, recorded):
    other = SessionFactory(tenant=recorded.tenant)
    url = reverse("admin:sessions_app_session_changelist")
    response = staff.post(
        url, {"action": "end_sessions", "_selected_action": [str(recorded.pk), str(other.pk)]}, follow=True
    )
    assert response.status_code == 200
    assert "Ended 2 sessions." in response.content.decode()
    assert Session.objects.filter(pk__in=[recorded.pk, other.pk], ended_at__isnull=True).count() == 0


def hidden_inputs(html: str) -> dict[str, str]:
    """The hidden fields a browser would post back (the inline's management form and row ids)."""
    fields = {}
    for tag in re.findall(r"<input[^>]*>", html):
        if 'type="hidden"' in tag and "csrfmiddlewaretoken" not in tag:
            name = re.search(r'name="([^"]+)"', tag).group(1)
            value = re.search(r'value="([^"]*)"', tag)
            fields[name] = value.group(1) if value else ""
    return fields


@pytest.mark.django_db
def test_renaming_a_session_keeps_counters_written_meanwhile(staff, recorded):
    url = reverse("admin:sessions_app_session_change", args=[recorded.pk])
    form = staff.get(url)
    assert form.status_code == 200
    data = hidden_inputs(form.content.decode())
    assert data["conversation_set-INITIAL_FORMS"] == "2"
    append(recorded, [{"role": "user", "content": "one more"}])  # arrives while the form is open
    data.update({"name": "Renamed trip", "app": "web", "metadata": "{}", "_save": "Save"})
    response = staff.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    stored = Session.objects.get(pk=recorded.pk)
    assert (stored.name, stored.app) == ("Renamed trip", "web")
    assert stored.messages == 8 and stored.conversations == 3  # the service re-read the row under its lock
    assert stored.tool == "chat" and stored.user_id == "xiaoming"


@pytest.mark.django_db
def test_sessions_cannot_be_added_or_deleted_in_the_admin(staff, recorded):
    assert staff.get(reverse("admin:sessions_app_session_add")).status_code == 403
    assert staff.get(reverse("admin:sessions_app_session_delete", args=[recorded.pk])).status_code == 403


@pytest.mark.django_db
def test_session_list_runs_a_fixed_number_of_queries(staff, api):
    url = reverse("admin:sessions_app_session_changelist")
    SessionFactory.create_batch(3, tenant=api.tenant)
    with CaptureQueriesContext(connection) as few:
        staff.get(url)
    SessionFactory.create_batch(30, tenant=api.tenant)
    with CaptureQueriesContext(connection) as many:
        staff.get(url)
    assert len(many) == len(few)


# -- API keys --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_revoke_selected_keys_locks_the_key_out_of_the_api(staff, api):
    assert api.get("/api/v1/sessions/").status_code == 200
    api_key = ApiKey.objects.get(tenant=api.tenant)
    response = staff.post(
        reverse("admin:sessions_app_apikey_changelist"),
        {"action": "revoke_keys", "_selected_action": [str(api_key.pk)]},
        follow=True,
    )
    assert "Revoked 1 key." in response.content.decode()
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None
    client = APIClient()
    response = client.get("/api/v1/sessions/", HTTP_AUTHORIZATION=f"Bearer {api.key}")
    assert response.status_code == 401


@pytest.mark.django_db
def test_adding_a_key_shows_it_once_and_stores_only_its_hash(staff, api):
    response = staff.post(reverse("admin:sessions_app_apikey_add"), {"tenant": str(api.tenant.pk), "name": "ci"})
    assert response.status_code == 200
    plain_key = response.context["plain_key"]
    assert plain_key.startswith("ace_") and plain_key in response.content.decode()
    assert "no-store" in response["Cache-Control"]

    api_key = ApiKey.objects.get(tenant=api.tenant, name="ci")
    assert api_key.key_hash == hashlib.sha256(plain_key.encode()).hexdigest()
    stored = [str(getattr(api_key, f.attname)) for f in ApiKey._meta.concrete_fields]
    assert plain_key not in " ".join(stored)
    assert not any(plain_key in entry.object_repr + entry.change_message for entry in LogEntry.objects.all())
    assert plain_key not in str(response.cookies)  # not parked in a messages cookie either

    for url in (
        reverse("admin:sessions_app_apikey_changelist"),
        reverse("admin:sessions_app_apikey_change", args=[api_key.pk]),
        reverse("admin:sessions_app_tenant_change", args=[api.tenant.pk]),
    ):
        html = staff.get(url).content.decode()
        assert plain_key not in html and api_key.key_hash not in html

    client = APIClient()
    assert client.get("/api/v1/sessions/", HTTP_AUTHORIZATION=f"Bearer {plain_key}").status_code == 200


@pytest.mark.django_db
def test_date_range_filter_includes_the_whole_to_day(staff, recorded):
    today = timezone.now().date()
    yesterday = (today - datetime.timedelta(days=1)).isoformat()
    inside = staff.get(MESSAGES_URL, {"created_at__from": today.isoformat(), "created_at__to": today.isoformat()})
    assert len(result_list(inside)) == 7
    before = staff.get(MESSAGES_URL, {"created_at__to": yesterday})
    assert result_list(before) == []


# -- long values on the lists --------------------------------------------------------------------------------

LONG_PROJECT = "/home/zhang.wei/work/company-monorepo/services/payments-gateway/internal/reconciliation/settlement"


def add_long_sessions(tenant, count):
    for i in range(count):
        session = SessionFactory(
            tenant=tenant,
            name=f"重构支付网关的对账模块并补充单元测试：处理跨时区结算批次的边界情况 {i}",
            tool="claude-code",
            user_id=f"zhang.wei.{i}@company-monorepo.example.com",
            project=f"{LONG_PROJECT}-{i}",
            machine=f"zhang-wei-macbook-pro-m3-max-{i}.corp.company-monorepo.internal",
        )
        append(session, [{"role": "assistant", "content": "…", "model": f"claude-sonnet-4-5-{i}", "output_tokens": 9}])


@pytest.mark.django_db
def test_lists_cut_long_values_with_the_whole_on_hover_at_a_fixed_query_count(staff, api, other_api):
    """The sessions and usage lists show the start of a long name and the end of a long path, the whole on
    hover, and their tenant column costs no query per row."""
    urls = [reverse(f"admin:sessions_app_{name}_changelist") for name in ("session", "usagehourly", "usagedaily")]
    add_long_sessions(api.tenant, 1)
    small = [len(message_queries(staff, url)[1]) for url in urls]
    add_long_sessions(other_api.tenant, 6)
    add_long_sessions(api.tenant, 5)
    responses = [message_queries(staff, url) for url in urls]
    assert [len(sqls) for _, sqls in responses] == small
    sessions = responses[0][0].content.decode()
    name = "重构支付网关的对账模块并补充单元测试：处理跨时区结算批次的边界情况 3"
    assert f'title="{name}">重构支付网关的对账模块并补…<' in sessions
    assert 'title="zhang.wei.3@company-monorepo.example.com">zhang.wei.3@c…<' in sessions
    hourly = responses[1][0].content.decode()
    assert f'title="{LONG_PROJECT}-3">…n/settlement-3<' in hourly
    assert ">globex<" in hourly and ">acme<" in hourly
