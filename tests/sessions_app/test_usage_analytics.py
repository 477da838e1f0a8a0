"""Grouped usage by day, tool, user, project and model from the hourly roll-ups: exact figures, sessions
counted once, filters, tenant isolation, and roll-ups that agree with a recount from the messages."""

import pytest
from django.core.management import call_command

from sessions_app.models import SessionModelUsage, UsageDaily, UsageHourly
from sessions_app.selectors.recount import rollup_drift
from sessions_app.services.rollups import rollups_rebuild
from tests.support.api import make_client, post_messages
from tests.support.factories import SessionFactory

SONNET = "claude-sonnet-4-5-20250929"


@pytest.fixture
def workload(api, other_api):
    """Three sessions of acme over two days, two projects, four models (one without a price); one of globex."""
    s1 = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice", project="open-ace")
    s2 = SessionFactory(tenant=api.tenant, tool="qwen-code", user_id="bob", project="weather")
    s3 = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice", project="weather")
    post_messages(
        api,
        s1,
        [
            {"role": "user", "content": "q1", "created_at": "2026-03-01T09:15:00Z"},
            # One response written as two lines (usage repeated, output growing): one request, 300 output tokens.
            {
                "role": "assistant",
                "content": "thinking…",
                "request_id": "r1",
                "model": SONNET,
                "input_tokens": 1000,
                "output_tokens": 10,
                "cache_read_tokens": 5000,
                "cache_creation_tokens": 200,
                "created_at": "2026-03-01T09:15:05Z",
            },
            {
                "role": "assistant",
                "content": "let me look",
                "request_id": "r1",
                "model": SONNET,
                "input_tokens": 1000,
                "output_tokens": 300,
                "cache_read_tokens": 5000,
                "cache_creation_tokens": 200,
                "created_at": "2026-03-01T09:15:07Z",
            },
            {"role": "toolResult", "content": "{}", "created_at": "2026-03-01T09:16:00Z"},
            {
                "role": "assistant",
                "content": "done",
                "request_id": "r2",
                "model": "claude-haiku-4-5",
                "input_tokens": 400,
                "output_tokens": 50,
                "created_at": "2026-03-01T10:02:00Z",
            },
            {"role": "user", "content": "q2", "created_at": "2026-03-02T08:00:00Z"},
            {
                "role": "assistant",
                "content": "?",
                "request_id": "r3",
                "model": "mystery-model-x",
                "input_tokens": 100,
                "output_tokens": 20,
                "created_at": "2026-03-02T08:00:03Z",
            },
        ],
    )
    post_messages(
        api,
        s2,
        [
            {"role": "user", "content": "天气", "created_at": "2026-03-01T09:40:00Z"},
            {
                "role": "assistant",
                "content": "晴",
                "auth_type": "qwen-oauth",
                "model": "qwen3-coder-plus",
                "input_tokens": 2000,
                "output_tokens": 100,
                "cache_read_tokens": 1000,
                "created_at": "2026-03-01T09:40:02Z",
            },
            {
                "role": "error",
                "content": "overloaded",
                "request_id": "e1",
                "model": "qwen3-coder-plus",
                "created_at": "2026-03-02T23:30:00Z",
            },
        ],
    )
    post_messages(
        api,
        s3,
        [
            {"role": "user", "content": "q", "created_at": "2026-03-02T10:00:00Z"},
            # The same request_id as in s1, in another session: another request.
            {
                "role": "assistant",
                "content": "a",
                "request_id": "r1",
                "model": "claude-sonnet-4-5",
                "input_tokens": 10,
                "output_tokens": 1,
                "created_at": "2026-03-02T10:00:01Z",
            },
        ],
    )
    g1 = SessionFactory(tenant=other_api.tenant, tool="claude-code", user_id="alice", project="open-ace")
    post_messages(
        other_api,
        g1,
        [
            {"role": "user", "content": "x", "created_at": "2026-03-01T09:00:00Z"},
            {
                "role": "assistant",
                "content": "y",
                "request_id": "g",
                "model": SONNET,
                "input_tokens": 77,
                "output_tokens": 7,
                "created_at": "2026-03-01T09:00:01Z",
            },
        ],
    )
    return s1, s2, s3


def grouped(api, query):
    response = api.get("/api/v1/stats/" + query)
    assert response.status_code == 200, response.content
    body = response.json()
    return {row["key"]: row for row in body["results"]}, body["totals"], body


def pick(row, *fields):
    return tuple(row[f] for f in fields)


COUNTS = ("sessions", "conversations", "requests", "messages")
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")


def test_by_project(api, workload):
    rows, totals, _ = grouped(api, "?group_by=project")
    assert set(rows) == {"open-ace", "weather"}
    assert pick(rows["open-ace"], *COUNTS) == (1, 2, 3, 7)
    assert pick(rows["open-ace"], *TOKENS) == (1500, 370, 5000, 200, 1870)
    # weather: s2 (a request by auth_type, an error request) and s3.
    assert pick(rows["weather"], *COUNTS) == (2, 2, 3, 5)
    assert pick(rows["weather"], *TOKENS) == (2010, 101, 1000, 0, 2111)
    assert pick(totals, *COUNTS) == (3, 4, 6, 12)
    assert (rows["weather"]["message_user"], rows["weather"]["message_error"]) == (2, 1)


def test_by_model(api, workload):
    rows, totals, _ = grouped(api, "?group_by=model")
    assert pick(rows[SONNET], "requests", "messages", *TOKENS) == (1, 2, 1000, 300, 5000, 200, 1300)
    assert pick(rows["claude-sonnet-4-5"], "requests", "input_tokens", "output_tokens") == (1, 10, 1)
    assert pick(rows["qwen3-coder-plus"], "requests", "messages", "input_tokens") == (2, 2, 2000)
    # User messages and the tool result carry no model; each session counts with its first message.
    assert pick(rows[None], "messages", "requests", "sessions", "conversations") == (5, 0, 3, 4)
    assert sum(row["sessions"] for row in rows.values()) == totals["sessions"] == 3


def test_by_day_counts_a_session_once_in_the_day_of_its_first_message(api, workload):
    s1, *_ = workload
    rows, totals, _ = grouped(api, "?group_by=day")
    assert list(rows) == ["2026-03-01", "2026-03-02"]
    assert pick(rows["2026-03-01"], *COUNTS) == (2, 2, 3, 7)
    assert pick(rows["2026-03-02"], *COUNTS) == (1, 2, 3, 5)
    # More messages later (a new day) do not count s1 again.
    post_messages(api, s1, [{"role": "user", "content": "q3", "created_at": "2026-03-03T12:00:00Z"}])
    rows, totals, _ = grouped(api, "?group_by=day")
    assert rows["2026-03-03"]["sessions"] == 0
    assert (rows["2026-03-03"]["conversations"], totals["sessions"]) == (1, 3)


def test_by_tool_and_user(api, workload):
    tools, _, _ = grouped(api, "?group_by=tool")
    assert pick(tools["claude-code"], *COUNTS) == (2, 3, 4, 9)
    assert pick(tools["qwen-code"], *COUNTS) == (1, 1, 2, 3)
    users, _, _ = grouped(api, "?group_by=user_id")
    assert pick(users["alice"], *COUNTS) == (2, 3, 4, 9)
    assert list(users) == ["bob", "alice"]  # most tokens first: 2,100 and 1,881


def test_filters_narrow_every_grouping(api, workload):
    rows, totals, _ = grouped(api, "?group_by=tool&project=weather")
    assert set(rows) == {"claude-code", "qwen-code"}
    assert pick(totals, *COUNTS) == (2, 2, 3, 5)
    rows, totals, _ = grouped(api, "?group_by=day&model=claude-haiku-4-5")
    assert list(rows) == ["2026-03-01"]
    assert pick(totals, "requests", "input_tokens", "output_tokens") == (1, 400, 50)
    rows, totals, _ = grouped(api, "?group_by=project&tool=claude-code&user_id=alice")
    assert pick(rows["weather"], *COUNTS) == (1, 1, 1, 2)
    _, totals, body = grouped(api, "?group_by=model&since=2026-03-02T00:00:00Z&until=2026-03-03T00:00:00Z")
    assert pick(totals, *COUNTS) == (1, 2, 3, 5)
    assert (body["since"][:19], body["until"][:19]) == ("2026-03-02T00:00:00", "2026-03-03T00:00:00")


def test_whole_days_read_the_daily_roll_ups_and_agree_with_the_hourly(api, workload):
    daily, daily_totals, body = grouped(api, "?group_by=model&since=2026-03-01T00:00:00Z&until=2026-03-03T00:00:00Z")
    # 23:30 rounds down to 23:00, not a day's start: the hourly roll-ups answer, with the same figures.
    hourly, hourly_totals, _ = grouped(api, "?group_by=model&since=2026-02-28T23:30:00Z&until=2026-03-03T00:00:00Z")
    assert daily == hourly and daily_totals == hourly_totals
    assert pick(daily_totals, *COUNTS) == (3, 4, 6, 12)


def test_group_by_session_filters_by_project_and_refuses_a_model(api, workload):
    _, s2, s3 = workload
    rows, totals, _ = grouped(api, "?group_by=session&project=weather")
    assert set(rows) == {str(s2.pk), str(s3.pk)}
    assert rows[str(s3.pk)]["project"] == "weather"
    assert (totals["sessions"], totals["messages"]) == (2, 5)
    response = api.get("/api/v1/stats/?group_by=session&model=qwen3-coder-plus")
    assert response.status_code == 400
    assert "model" in response.json()["errors"]


def test_tenants_see_only_their_usage(api, other_api, workload):
    rows, totals, _ = grouped(other_api, "?group_by=project")
    assert set(rows) == {"open-ace"}
    assert pick(totals, "sessions", "requests", "input_tokens") == (1, 1, 77)
    _, totals, _ = grouped(api, "?group_by=project")
    assert totals["input_tokens"] == 3510


def test_the_project_is_fixed_once_the_session_has_messages(api):
    session = SessionFactory(tenant=api.tenant, project="a")
    assert api.patch(f"/api/v1/sessions/{session.pk}/", {"project": "b"}, format="json").status_code == 200
    post_messages(api, session, [{"role": "user", "content": "x"}])
    response = api.patch(f"/api/v1/sessions/{session.pk}/", {"project": "c"}, format="json")
    assert response.status_code == 400
    assert "project" in response.json()["errors"]


def test_roll_ups_agree_with_a_recount_from_the_messages(api, workload):
    assert rollup_drift(tenant=api.tenant) == {"hourly": [], "daily": [], "session_model": []}
    # A turn (the streaming flow) moves its answer's counters when it completes: still exact.
    s1, *_ = workload
    turn = api.post(f"/api/v1/sessions/{s1.pk}/turns/", {"content": "and?"}, format="json").json()["turn"]
    done = {
        "content": "ok",
        "model": "qwen-max",
        "finish_reason": "stop",
        "input_tokens": 30,
        "output_tokens": 3,
        "elapsed_ms": 900,
        "requests": 2,
    }
    assert api.post(f"/api/v1/turns/{turn}/complete/", done, format="json").status_code == 200
    # A client clock with a half-hour offset: the message counts in its UTC hour.
    post_messages(api, s1, [{"role": "user", "content": "India", "created_at": "2026-03-05T10:10:00+05:30"}])
    assert UsageHourly.objects.filter(tenant=api.tenant, hour="2026-03-05T04:00:00Z").exists()
    assert rollup_drift(tenant=api.tenant) == {"hourly": [], "daily": [], "session_model": []}


def test_a_corrupted_roll_up_is_reported_and_rebuilt(api, workload):
    def snapshot():
        hourly = UsageHourly.objects.filter(tenant=api.tenant).order_by("hour", "tool", "user_id", "project", "model")
        daily = UsageDaily.objects.filter(tenant=api.tenant).order_by("day", "tool", "user_id", "project", "model")
        by_model = SessionModelUsage.objects.filter(tenant=api.tenant).order_by("session_id", "model", "day")
        return [[r for r in rows.values() if r.pop("id")] for rows in (hourly, daily, by_model)]

    before = snapshot()
    call_command("ace_recount", "--rollups", "--tenant", api.tenant.name)  # agrees: no exit
    UsageHourly.objects.filter(tenant=api.tenant, project="weather").update(requests=99)
    UsageDaily.objects.filter(tenant=api.tenant, project="open-ace").delete()
    SessionModelUsage.objects.filter(tenant=api.tenant, model=SONNET).delete()
    drift = rollup_drift(tenant=api.tenant)
    assert drift["hourly"] and drift["daily"] and drift["session_model"]
    with pytest.raises(SystemExit):
        call_command("ace_recount", "--rollups", "--tenant", api.tenant.name)
    call_command("ace_recount", "--rollups", "--fix", "--tenant", api.tenant.name)
    assert snapshot() == before
    assert rollups_rebuild(tenant=api.tenant) == {
        "hourly_rows": len(before[0]),
        "daily_rows": len(before[1]),
        "session_model_rows": len(before[2]),
    }
    assert snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_concurrent_sessions_sharing_roll_up_rows_stay_exact():
    """Eight sessions of one user, tool and project write at once: they share hourly, daily and model rows."""
    import threading

    from django.db import connection

    api = make_client("rollup-race")
    sessions = [SessionFactory(tenant=api.tenant, tool="claude-code", user_id="u", project="p") for _ in range(8)]
    start, errors = threading.Barrier(len(sessions)), []

    def writer(session):
        client = make_client("rollup-race")
        try:
            start.wait()
            for batch in range(4):
                body = [
                    {"role": "user", "content": "q", "created_at": "2026-03-01T09:10:00Z"},
                    answer_line(f"r{batch}", SONNET, "2026-03-01T09:10:01Z", 10, 2),
                    answer_line(f"h{batch}", "claude-haiku-4-5", "2026-03-01T10:10:01Z", 5, 1),
                ]
                response = client.post(f"/api/v1/sessions/{session.pk}/messages/", body, format="json")
                if response.status_code != 201:
                    errors.append(response.content)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert rollup_drift(tenant=api.tenant) == {"hourly": [], "daily": [], "session_model": []}
    rows, totals, _ = grouped(api, "?group_by=model")
    assert (totals["sessions"], totals["requests"], totals["messages"]) == (8, 64, 96)
    assert (rows[SONNET]["input_tokens"], rows["claude-haiku-4-5"]["input_tokens"]) == (320, 160)


def answer_line(request_id, model, created_at, input_tokens, output_tokens):
    return {
        "role": "assistant",
        "content": "a",
        "request_id": request_id,
        "model": model,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "created_at": created_at,
    }
