"""Weekly usage (`GET /api/v1/usage/weekly/`): weeks as ccusage's `weekly` sums them (Sunday by default, in UTC), or
from the plan's reset weekday and hour; per user or machine; the percent of the weekly limits; the current week's
projection; read from the hourly roll-ups (docs/accounting.md, "Plan windows")."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import ModelPrice
from sessions_app.selectors.weekly import usage_weekly
from tests.support.api import post_messages
from tests.support.factories import SessionFactory

WEEKLY = "/api/v1/usage/weekly/"
MARCH = {"since": "2026-03-01T00:00:00Z", "until": "2026-03-15T00:00:00Z"}


def call(request_id, when, input_tokens, output_tokens):
    return {
        "role": "assistant",
        "content": "ok",
        "request_id": request_id,
        "model": "claude-sonnet-4-5",
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "created_at": when,
    }


@pytest.fixture
def weeks(api):
    """2026-03-01 is a Sunday. xiaoming on his laptop and a server, alice on her desktop."""
    ModelPrice.objects.create(
        model="claude-sonnet-4-5",
        input_usd_per_mtok=3,
        output_usd_per_mtok=15,
        cache_read_usd_per_mtok=0,
        cache_write_usd_per_mtok=0,
    )
    laptop = SessionFactory(tenant=api.tenant, user_id="xiaoming", machine="laptop", tool="claude-code")
    server = SessionFactory(tenant=api.tenant, user_id="xiaoming", machine="server", tool="claude-code")
    desktop = SessionFactory(tenant=api.tenant, user_id="alice", machine="desktop", tool="claude-code")
    post_messages(
        api,
        laptop,
        [
            call("a", "2026-03-01T09:15:00Z", 100, 10),
            call("b", "2026-03-07T23:30:00Z", 200, 20),
            call("c", "2026-03-08T00:30:00Z", 300, 30),
            call("d", "2026-03-09T08:59:00Z", 400, 40),
        ],
    )
    post_messages(api, server, [call("e", "2026-03-09T09:00:00Z", 500, 50)])
    post_messages(api, desktop, [call("f", "2026-03-02T12:00:00Z", 1000, 100)])


def rows(api, **query):
    response = api.get(WEEKLY, {**MARCH, **query})
    assert response.status_code == 200, response.content
    return response.json()


def test_weeks_start_on_sunday_in_utc_as_ccusages_weekly(api, weeks):
    body = rows(api, user_id="xiaoming")
    assert (body["start_of_week"], body["start_hour"]) == ("sunday", 0)
    assert [(r["week"], r["requests"], r["input_tokens"], r["output_tokens"]) for r in body["results"]] == [
        ("2026-03-01", 2, 300, 30),
        ("2026-03-08", 3, 1200, 120),
    ]
    first = body["results"][0]
    assert (first["week_start"], first["week_end"]) == ("2026-03-01T00:00:00.000000Z", "2026-03-08T00:00:00.000000Z")
    assert first["all_tokens"] == 330 and first["cost_usd"] == "0.001350"  # 300 × $3 + 30 × $15, per million
    assert first["is_current"] is False and first["projection"] is None and first["plan_usage"] is None
    assert body["totals"]["input_tokens"] == 1500 and body["totals"]["requests"] == 5


def test_the_plans_reset_weekday_and_hour_move_the_weeks(api, weeks):
    plan = {"user_id": "xiaoming", "week_starts_on": "monday", "week_start_hour": 9, "weekly_token_limit": 1000}
    assert api.post("/api/v1/plans/", plan, format="json").status_code == 201
    body = rows(api, user_id="xiaoming")
    assert (body["start_of_week"], body["start_hour"], body["plan"]["applies"]) == ("monday", 9, "user")
    # 2026-03-09 09:00 is exactly the reset: the next week.
    assert [(r["week_start"][:16], r["input_tokens"]) for r in body["results"]] == [
        ("2026-02-23T09:00", 100),
        ("2026-03-02T09:00", 900),
        ("2026-03-09T09:00", 500),
    ]
    assert [r["plan_usage"]["tokens_percent"] for r in body["results"]] == [11.0, 99.0, 55.0]
    assert [r["plan_usage"]["status"] for r in body["results"]] == ["ok", "warning", "ok"]
    # Asked for: Sunday weeks again.
    assert [r["week"] for r in rows(api, user_id="xiaoming", start_of_week="sunday", start_hour=0)["results"]] == [
        "2026-03-01",
        "2026-03-08",
    ]


def test_per_user_with_each_ones_plan_and_per_machine(api, weeks):
    api.post("/api/v1/plans/", {"weekly_token_limit": 1000}, format="json")
    api.post("/api/v1/plans/", {"user_id": "xiaoming", "weekly_token_limit": 2000}, format="json")
    by_user = rows(api, group_by="user_id")["results"]
    assert [(r["week"], r["key"], r["all_tokens"], r["plan_usage"]["tokens_percent"]) for r in by_user] == [
        ("2026-03-01", "alice", 1100, 110.0),
        ("2026-03-01", "xiaoming", 330, 16.5),
        ("2026-03-08", "xiaoming", 1320, 66.0),
    ]
    assert by_user[0]["plan_usage"]["status"] == "exceeds"
    by_machine = rows(api, group_by="machine", user_id="xiaoming")["results"]
    assert [(r["week"], r["key"], r["input_tokens"]) for r in by_machine] == [
        ("2026-03-01", "laptop", 300),
        ("2026-03-08", "laptop", 700),
        ("2026-03-08", "server", 500),
    ]


def test_the_current_week_is_projected_at_its_pace_so_far(api, weeks):
    api.post("/api/v1/plans/", {"weekly_token_limit": 3000}, format="json")
    now = datetime.fromisoformat("2026-03-09T10:00:00+00:00")  # 34 hours into the week of 2026-03-08
    body = usage_weekly(tenant=api.tenant, user_id="xiaoming", now=now)
    current = body["results"][-1]
    assert current["is_current"] and current["week"] == "2026-03-08"
    assert current["projection"]["input_output_tokens"] == 1320 * 168 // 34
    assert current["projection"]["cost_usd"] == (Decimal("0.005400") * 168 / 34).quantize(Decimal("0.000001"))
    assert current["plan_usage"]["tokens_percent"] == 44.0
    assert current["plan_usage"]["projected_percent"] == 217.4  # 6,522 of 3,000
    assert current["plan_usage"]["status"] == "exceeds"
    # By default: this week and the seven before it.
    assert body["since"] == datetime.fromisoformat("2026-01-18T00:00:00+00:00")
    assert body["until"] == datetime.fromisoformat("2026-03-15T00:00:00+00:00")


def test_weeks_are_read_from_the_roll_ups_and_tenants_do_not_mix(api, other_api, weeks):
    with CaptureQueriesContext(connection) as queries:
        rows(api, group_by="user_id")
    assert not any("sessions_app_message" in q["sql"] or "sessions_app_llmrequest" in q["sql"] for q in queries)
    assert rows(other_api, group_by="user_id")["results"] == []


def test_bad_weekly_queries_are_400s(api):
    for query, field in [
        ({"group_by": "model"}, "group_by"),
        ({"start_of_week": "funday"}, "start_of_week"),
        ({"start_hour": 24}, "start_hour"),
        ({"since": "2024-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
    ]:
        response = api.get(WEEKLY, query)
        assert response.status_code == 400, (query, response.content)
        assert field in response.json()["errors"]


def test_a_since_too_far_back_is_a_400_with_or_without_until(api):
    assert api.get(WEEKLY, {"since": "2020-01-01T00:00:00Z"}).status_code == 400
    assert api.get(WEEKLY, {"until": "2020-01-01T00:00:00Z"}).status_code == 200  # the 8 weeks before it
