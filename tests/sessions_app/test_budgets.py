"""Budgets through the API: what a period has used, thresholds crossed by exactly the write that crosses them,
hard limits, bounds, audit and tenant isolation (docs/budgets.md)."""

import datetime

import pytest
from django.utils import timezone

from sessions_app.models import BudgetChange, BudgetCrossing, ModelPrice
from tests.support.factories import SessionFactory

BUDGETS = "/api/v1/budgets/"


def create(api, **body):
    response = api.post(BUDGETS, {"name": "monthly", "limit": 1000, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def spend(api, session, tokens, **extra):
    message = {"role": "assistant", "content": "ok", "model": "qwen-max", "total_tokens": tokens, **extra}
    return api.post(f"/api/v1/sessions/{session.pk}/messages/", message, format="json")


def crossings(budget_id):
    return sorted(BudgetCrossing.objects.filter(budget_id=budget_id).values_list("threshold", flat=True))


def test_a_threshold_is_crossed_by_exactly_the_write_that_reaches_it(api, session):
    budget = create(api, thresholds=[100, 80])
    assert (budget["thresholds"], budget["used"], budget["percent"]) == ([80, 100], 0, 0.0)
    assert spend(api, session, 799).status_code == 201
    assert crossings(budget["id"]) == []
    assert spend(api, session, 1).status_code == 201  # 800 = 80 % exactly: this write crosses it
    assert crossings(budget["id"]) == [80]
    assert spend(api, session, 199).status_code == 201
    assert crossings(budget["id"]) == [80]
    spend(api, session, 1)  # 1000: the limit
    assert crossings(budget["id"]) == [80, 100]
    spend(api, session, 500)  # over it: no second alert in the same period
    assert crossings(budget["id"]) == [80, 100]
    body = api.get(f"{BUDGETS}{budget['id']}/").json()
    assert (body["used"], body["remaining"], body["percent"], body["exhausted"]) == (1500, 0, 150.0, True)
    assert [c["threshold"] for c in body["crossings"]] == [80, 100]
    crossing = BudgetCrossing.objects.get(budget_id=budget["id"], threshold=80)
    assert (crossing.payload["used"], crossing.payload["limit"], crossing.payload["threshold"]) == (800, 1000, 80)


def test_the_period_counts_usage_from_before_the_budget_and_only_what_its_scope_covers(api, session):
    spend(api, session, 300)
    other_user = SessionFactory(tenant=api.tenant, tool="chat", user_id="someone-else", project="apollo")
    spend(api, other_user, 50)
    tenant = create(api, name="all")
    mine = create(api, name="xiaoming", scope="user_id", scope_value="xiaoming")
    project = create(api, name="apollo", scope="project", scope_value="apollo")
    assert (tenant["used"], mine["used"], project["used"]) == (350, 300, 50)
    spend(api, session, 10)
    spend(api, other_user, 1)
    used = {b["name"]: b["used"] for b in api.get(BUDGETS).json()["results"]}
    assert used == {"all": 361, "xiaoming": 310, "apollo": 51}


def test_a_cost_budget_prices_usage_with_the_price_book(api, session):
    ModelPrice.objects.create(
        model="qwen-max",
        input_usd_per_mtok=2,
        output_usd_per_mtok=6,
        cache_read_usd_per_mtok=0,
        cache_write_usd_per_mtok=0,
    )
    budget = create(api, unit="usd", limit=1.5, thresholds=[50])
    spend(api, session, 300_000, input_tokens=200_000, output_tokens=100_000)  # 0.4 + 0.6 = 1.0 USD
    body = api.get(f"{BUDGETS}{budget['id']}/").json()
    assert body["used"] == 1.0 and body["limit"] == 1.5
    assert crossings(budget["id"]) == [50]
    spend(api, session, 10, model="no-price-known")  # unpriced: adds nothing
    assert api.get(f"{BUDGETS}{budget['id']}/").json()["used"] == 1.0


def test_a_rolling_window_slides_and_the_same_threshold_can_be_crossed_again(api, session, monkeypatch):
    budget = create(api, name="5h", period="rolling", window_hours=5, thresholds=[100], limit=100)
    start = timezone.now()
    spend(api, session, 500, created_at=(start - datetime.timedelta(hours=6)).isoformat())  # before the window
    assert api.get(f"{BUDGETS}{budget['id']}/").json()["used"] == 0
    spend(api, session, 100)
    assert crossings(budget["id"]) == [100]
    spend(api, session, 1)
    assert crossings(budget["id"]) == [100]
    # Five hours on, the hour that crossed it has slid out of the window: usage falls back under the limit.
    later = start + datetime.timedelta(hours=5)
    monkeypatch.setattr(timezone, "now", lambda: later)
    body = api.get(f"{BUDGETS}{budget['id']}/").json()
    assert (body["used"], body["crossings"]) == (0, [])
    spend(api, session, 99)
    assert crossings(budget["id"]) == [100]
    spend(api, session, 1)
    assert crossings(budget["id"]) == [100, 100]  # a new crossing, in the window that holds it now


def test_a_hard_limit_refuses_writes_with_429_until_the_period_ends(api, session):
    budget = create(api, name="capped", limit=100, hard_limit=True, period="day")
    assert spend(api, session, 60).status_code == 201
    assert spend(api, session, 40).status_code == 201  # the write that reaches the limit is taken
    refused = spend(api, session, 1)
    assert refused.status_code == 429
    body = refused.json()
    assert body["budget"]["id"] == budget["id"] and "capped" in body["detail"]
    retry_after = int(refused["Retry-After"])
    assert 0 < retry_after <= 24 * 3600
    turn = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "hi"}, format="json")
    assert turn.status_code == 429
    assert api.get(f"{BUDGETS}{budget['id']}/").json()["used"] == 100  # nothing refused was stored
    # Raising the limit lifts the block at once.
    api.patch(f"{BUDGETS}{budget['id']}/", {"limit": 200}, format="json")
    assert spend(api, session, 1).status_code == 201


def test_without_a_hard_limit_writes_go_on_over_the_budget(api, session):
    create(api, name="soft", limit=10)
    assert spend(api, session, 50).status_code == 201
    assert spend(api, session, 50).status_code == 201


def test_an_api_key_budget_counts_the_sessions_that_key_created(api):
    from sessions_app.models import ApiKey

    key = ApiKey.objects.get(tenant=api.tenant)
    session = api.post("/api/v1/sessions/", {"user_id": "u"}, format="json").json()
    budget = create(api, name="key", scope="api_key", api_key=str(key.pk), limit=100, hard_limit=True)
    url = f"/api/v1/sessions/{session['id']}/messages/"
    assert api.post(url, {"role": "assistant", "content": "a", "total_tokens": 100}, format="json").status_code == 201
    assert api.get(f"{BUDGETS}{budget['id']}/").json()["used"] == 100
    assert api.post(url, {"role": "user", "content": "more"}, format="json").status_code == 429


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"limit": -5}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": 1.5}, "limit"),  # tokens are whole
        ({"limit": "100"}, "limit"),
        ({"thresholds": [0]}, "thresholds"),
        ({"thresholds": [1001]}, "thresholds"),
        ({"thresholds": []}, "thresholds"),
        ({"scope": "galaxy"}, "scope"),
        ({"scope": "user_id"}, "scope_value"),
        ({"period": "rolling"}, "window_hours"),
        ({"period": "rolling", "window_hours": 0}, "window_hours"),
        ({"period": "rolling", "window_hours": 721}, "window_hours"),
        ({"period": "day", "window_hours": 5}, "window_hours"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"feishu_url": "https://example.com/hook"}, "feishu_url"),
        ({"dingtalk_url": "ftp://oapi.dingtalk.com/robot/send?access_token=x"}, "dingtalk_url"),
        ({"emails": ["not-an-address"]}, "emails"),
        ({"unit": "usd", "limit": 10**10}, "limit"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_a_400_that_says_what_to_fix(api, body, field):
    response = api.post(BUDGETS, {"name": "b", "limit": 1000, **body}, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert field in errors and errors[field][0]
    assert not api.get(BUDGETS).json()["results"]


def test_every_change_is_audited_and_secrets_never_shown(api):
    budget = create(api, feishu_url="https://open.feishu.cn/open-apis/bot/v2/hook/abc", feishu_secret="s3cret")
    assert "feishu_secret" not in budget and budget["feishu_signed"] is True
    api.patch(f"{BUDGETS}{budget['id']}/", {"limit": 2000, "thresholds": [50]}, format="json")
    assert api.patch(f"{BUDGETS}{budget['id']}/", {"limit": -1}, format="json").status_code == 400
    assert api.delete(f"{BUDGETS}{budget['id']}/").status_code == 204
    changes = list(BudgetChange.objects.filter(budget_id=budget["id"]).order_by("id"))
    assert [c.action for c in changes] == ["created", "updated", "deleted"]
    assert changes[1].changes == {"limit": ["1000", "2000"], "thresholds": [[80, 100], [50]]}
    assert changes[0].changes["feishu_secret"] == [None, "(set)"]
    assert all("api key" in c.actor for c in changes)


def test_another_tenants_budget_is_not_found(api, other_api):
    budget = create(api)
    for call in (other_api.get, other_api.patch, other_api.delete):
        assert call(f"{BUDGETS}{budget['id']}/").status_code == 404
    assert other_api.get(BUDGETS).json()["results"] == []
    other_session = SessionFactory(tenant=other_api.tenant, user_id="x")
    spend(other_api, other_session, 5000)
    assert api.get(f"{BUDGETS}{budget['id']}/").json()["used"] == 0


def test_the_admin_creates_budgets_through_the_same_rules_and_the_dashboard_shows_the_projection(
    api, session, admin_client
):
    spend(api, session, 250)
    form = {
        "tenant": str(api.tenant.pk),
        "name": "admin made",
        "scope": "tenant",
        "scope_value": "",
        "unit": "tokens",
        "limit": "1000",
        "period": "month",
        "timezone": "UTC",
        "thresholds": "[80, 100]",
        "emails": "[]",
        "active": "on",
        "crossings-TOTAL_FORMS": "0",
        "crossings-INITIAL_FORMS": "0",
    }
    bad = admin_client.post("/admin/sessions_app/budget/add/", {**form, "thresholds": "[0]"})
    assert bad.status_code == 200 and "from 1 to 1000" in bad.content.decode()
    response = admin_client.post("/admin/sessions_app/budget/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    budget = api.get(BUDGETS).json()["results"][0]
    assert (budget["name"], budget["used"]) == ("admin made", 250)
    change = BudgetChange.objects.get(budget_id=budget["id"])
    assert change.action == "created" and change.actor == "admin admin"
    page = admin_client.get("/admin/sessions_app/usagehourly/dashboard/", {"tenant": str(api.tenant.pk)})
    html = page.content.decode()
    assert page.status_code == 200 and 'id="ace-budgets"' in html and "admin made" in html
    assert "250 / 1000 tokens" in html
