"""Plan windows through the API: usage plans (presets, editable figures, bounds, a user's plan over the tenant's),
a user's 5-hour blocks with the percent of their plan, and tenant isolation (docs/accounting.md, "Plan windows")."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from sessions_app.models import ModelPrice, UsagePlan
from tests.support.api import post_messages
from tests.support.factories import SessionFactory

PLANS = "/api/v1/plans/"
BLOCKS = "/api/v1/usage/blocks/"


def create(api, **body):
    response = api.post(PLANS, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_preset_fills_the_figures_and_each_stays_editable(api):
    plan = create(api, preset="max5")
    assert (plan["user_id"], plan["token_limit"], plan["cost_limit"], plan["message_limit"]) == ("", 88_000, 35.0, 1000)
    assert (plan["token_counting"], plan["week_starts_on"], plan["week_start_hour"]) == ("input_output", "sunday", 0)
    assert plan["weekly_token_limit"] is None  # no community figure: set your own

    mine = create(api, user_id="xiaoming", preset="max20", cost_limit=150.5, weekly_cost_limit=900)
    assert (mine["token_limit"], mine["cost_limit"], mine["weekly_cost_limit"]) == (220_000, 150.5, 900.0)

    changed = api.patch(f"{PLANS}{plan['id']}/", {"token_limit": 100_000}, format="json").json()
    assert (changed["preset"], changed["token_limit"], changed["cost_limit"]) == ("max5", 100_000, 35.0)
    # A new preset brings its figures, except those sent with it.
    changed = api.patch(f"{PLANS}{plan['id']}/", {"preset": "pro", "message_limit": 300}, format="json").json()
    assert (changed["token_limit"], changed["cost_limit"], changed["message_limit"]) == (19_000, 18.0, 300)
    cleared = api.patch(f"{PLANS}{plan['id']}/", {"cost_limit": None}, format="json").json()
    assert cleared["cost_limit"] is None

    listed = api.get(PLANS).json()["results"]
    assert [p["user_id"] for p in listed] == ["", "xiaoming"]
    assert [p["user_id"] for p in api.get(PLANS, {"user_id": "xiaoming"}).json()["results"]] == ["xiaoming"]

    presets = api.get(f"{PLANS}presets/").json()
    assert "Claude-Code-Usage-Monitor" in presets["source"]
    figures = {p["preset"]: (p["token_limit"], p["cost_limit"], p["message_limit"]) for p in presets["results"]}
    assert figures == {
        "pro": (19_000, 18.0, 250),
        "max5": (88_000, 35.0, 1000),
        "max20": (220_000, 140.0, 2000),
        "custom": (None, None, None),
    }


@pytest.mark.parametrize(
    "body, field",
    [
        ({"preset": "ultra"}, "preset"),
        ({"token_limit": 0}, "token_limit"),
        ({"token_limit": 10**16}, "token_limit"),
        ({"token_limit": "1000"}, "token_limit"),
        ({"cost_limit": 0.001}, "cost_limit"),
        ({"cost_limit": 10**10}, "cost_limit"),
        ({"cost_limit": "35"}, "cost_limit"),
        ({"week_start_hour": 24}, "week_start_hour"),
        ({"week_starts_on": "funday"}, "week_starts_on"),
        ({"token_counting": "some"}, "token_counting"),
        ({"limit": 5}, "limit"),
    ],
)
def test_bad_figures_are_400s_that_say_what_to_fix(api, body, field):
    response = api.post(PLANS, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert not UsagePlan.objects.exists()


def test_one_plan_per_user_and_one_for_the_tenant(api):
    create(api)
    create(api, user_id="xiaoming")
    for body in ({}, {"user_id": "xiaoming"}):
        response = api.post(PLANS, body, format="json")
        assert response.status_code == 400
        assert "exists already" in response.json()["errors"]["user_id"][0]
    assert api.put(f"{PLANS}{UsagePlan.objects.first().pk}/", {}, format="json").status_code == 405


@pytest.fixture
def recent(api):
    """xiaoming's last hour: three Claude Code requests (10:00-relative times around now), priced."""
    ModelPrice.objects.create(
        model="claude-sonnet-4-5",
        input_usd_per_mtok=3,
        output_usd_per_mtok=15,
        cache_read_usd_per_mtok=Decimal("0.3"),
        cache_write_usd_per_mtok=Decimal("3.75"),
    )
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming", tool="claude-code", machine="laptop")
    now = timezone.now()
    rows = [
        {
            "role": "assistant",
            "content": "ok",
            "request_id": f"r{index}",
            "model": "claude-sonnet-4-5",
            "input_tokens": 2000,
            "output_tokens": 1000,
            "cache_read_tokens": 10_000,
            "created_at": (now - timedelta(minutes=minutes)).isoformat(),
        }
        for index, minutes in enumerate((50, 30, 10))
    ]
    post_messages(api, session, rows)
    return now


def test_a_users_current_block_shows_the_percent_of_their_plan_next_to_the_cost(api, recent):
    create(api, preset="pro")  # the tenant's: 19,000 input + output tokens, $18, 250 messages per block
    body = api.get(BLOCKS, {"user_id": "xiaoming"}).json()
    block = body["active_block"]
    assert body["results"][-1] == block and block["is_active"] and not block["is_gap"]
    assert (block["entries"], block["requests"], block["models"]) == (3, 3, ["claude-sonnet-4-5"])
    assert (block["input_tokens"], block["output_tokens"], block["cache_read_tokens"]) == (6000, 3000, 30_000)
    assert block["all_tokens"] == 39_000
    # 6,000 × $3 + 3,000 × $15 + 30,000 × $0.3, per million
    assert block["cost_usd"] == "0.072000" and block["unpriced_tokens"] == 0
    usage = block["plan_usage"]
    assert (usage["tokens"], usage["token_limit"], usage["tokens_percent"]) == (9000, 19_000, 47.37)
    assert (usage["cost_usd"], usage["cost_limit"], usage["cost_percent"]) == ("0.072000", "18.000000", 0.4)
    assert (usage["messages"], usage["message_limit"], usage["messages_percent"]) == (3, 250, 1.2)
    assert usage["percent"] == 47.37  # the nearest limit
    assert usage["projected_percent"] > usage["percent"] and usage["status"] in ("warning", "exceeds")
    assert block["burn_rate"]["tokens_per_minute"] == pytest.approx(39_000 / 40)
    assert block["projection"]["remaining_minutes"] > 0
    assert body["plan"]["applies"] == "tenant" and body["plan"]["preset"] == "pro"

    # Their own plan wins over the tenant's, counting every token (as ccusage's --token-limit).
    create(api, user_id="xiaoming", preset="custom", token_limit=78_000, token_counting="all")
    usage = api.get(BLOCKS, {"user_id": "xiaoming"}).json()["active_block"]["plan_usage"]
    assert (usage["tokens"], usage["tokens_percent"], usage["cost_percent"], usage["percent"]) == (
        39_000,
        50.0,
        None,
        50.0,
    )


def test_blocks_without_a_plan_and_for_another_machine(api, recent):
    body = api.get(BLOCKS, {"user_id": "xiaoming"}).json()
    assert body["plan"] is None and body["active_block"]["plan_usage"] is None
    assert api.get(BLOCKS, {"user_id": "xiaoming", "machine": "desktop"}).json()["results"] == []
    assert (
        len(api.get(BLOCKS, {"user_id": "xiaoming", "machine": "laptop", "tool": "claude-code"}).json()["results"]) == 1
    )
    assert api.get(BLOCKS, {"user_id": "nobody"}).json()["results"] == []


def test_bad_block_queries_are_400s(api):
    now = timezone.now()
    for query, field in [
        ({}, "user_id"),
        ({"user_id": "x", "since": (now - timedelta(days=40)).isoformat()}, "since"),
        ({"user_id": "x", "since": now.isoformat(), "until": (now - timedelta(hours=1)).isoformat()}, "until"),
        ({"user_id": "x", "since": "yesterday"}, "since"),
    ]:
        response = api.get(BLOCKS, query)
        assert response.status_code == 400, (query, response.content)
        assert field in response.json()["errors"]


def test_another_tenants_user_plans_and_usage_are_not_seen(api, other_api, recent):
    """The same user_id in another tenant: its usage is not in our blocks, its plan does not apply, its plan's id
    is a 404 here."""
    theirs_session = SessionFactory(tenant=other_api.tenant, user_id="xiaoming", tool="claude-code")
    post_messages(
        other_api,
        theirs_session,
        [
            {
                "role": "assistant",
                "content": "theirs",
                "request_id": "t1",
                "model": "claude-sonnet-4-5",
                "input_tokens": 500_000,
                "output_tokens": 1,
                "created_at": (recent - timedelta(minutes=20)).isoformat(),
            }
        ],
    )
    theirs = create(other_api, user_id="xiaoming", preset="max20")
    ours = api.get(BLOCKS, {"user_id": "xiaoming"}).json()
    assert ours["plan"] is None
    assert sum(block["input_tokens"] for block in ours["results"]) == 6000
    assert other_api.get(BLOCKS, {"user_id": "xiaoming"}).json()["active_block"]["input_tokens"] == 500_000
    assert api.get(PLANS).json()["results"] == []
    for method in ("get", "patch", "delete"):
        assert getattr(api, method)(f"{PLANS}{theirs['id']}/", {}, format="json").status_code == 404
    assert UsagePlan.objects.get(pk=theirs["id"]).preset == "max20"


def test_a_deleted_user_plan_lets_the_tenants_apply_again(api, recent):
    create(api, preset="max5")
    mine = create(api, user_id="xiaoming", preset="pro")
    assert api.get(BLOCKS, {"user_id": "xiaoming"}).json()["plan"]["preset"] == "pro"
    assert api.delete(f"{PLANS}{mine['id']}/").status_code == 204
    plan = api.get(BLOCKS, {"user_id": "xiaoming"}).json()["plan"]
    assert (plan["preset"], plan["applies"]) == ("max5", "tenant")


def test_forgetting_a_user_deletes_their_plan_not_the_tenants(api, recent):
    create(api, preset="max5")
    create(api, user_id="xiaoming", preset="pro")
    response = api.post("/api/v1/users/xiaoming/forget/", {"confirm": "xiaoming"}, format="json")
    assert response.status_code == 200, response.content
    assert list(UsagePlan.objects.values_list("user_id", flat=True)) == [""]


def test_the_admin_edits_plans_with_the_apis_rules(admin_client, api):
    form = {
        "tenant": api.tenant.pk,
        "user_id": "",
        "preset": "max5",
        "token_counting": "input_output",
        "week_starts_on": "sunday",
        "week_start_hour": 0,
        "notes": "",
    }
    response = admin_client.post("/admin/sessions_app/usageplan/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    plan = UsagePlan.objects.get(tenant=api.tenant, user_id="")
    assert (plan.token_limit, plan.cost_limit, plan.message_limit) == (88_000, Decimal("35"), 1000)  # the preset's
    change = f"/admin/sessions_app/usageplan/{plan.pk}/change/"
    edited = {**form, "preset": "max5", "token_limit": 120_000, "cost_limit": "35", "message_limit": 1000}
    assert admin_client.post(change, edited).status_code == 302
    plan.refresh_from_db()
    assert (plan.preset, plan.token_limit) == ("max5", 120_000)
    switched = {**edited, "preset": "max20"}  # a new preset: its figures for the limits left as they were
    assert admin_client.post(change, switched).status_code == 302
    plan.refresh_from_db()
    assert (plan.token_limit, plan.cost_limit, plan.message_limit) == (220_000, Decimal("140"), 2000)
    refused = admin_client.post(change, {**switched, "token_limit": 0, "week_start_hour": 30})
    assert refused.status_code == 200 and "A whole number from 1" in refused.content.decode()
    again = admin_client.post("/admin/sessions_app/usageplan/add/", form)
    assert again.status_code == 200 and "exists already" in again.content.decode()
    listing = admin_client.get("/admin/sessions_app/usageplan/").content.decode()
    assert "220,000 tokens" in listing and "every user" in listing
