"""Every budget the documented bounds allow can be read back by every view that shows budgets (docs/budgets.md):
created through the API with usage recorded before and after, then its list, its detail, the admin's budget
list and change page and the usage dashboard (one tenant's and every tenant's) all answer 200. A large limit
spent slowly runs out long after the period ends — after the last date Python can hold — and that is "it lasts
the period" (`projected_exhaustion_at` null), never a 500."""

import uuid
from decimal import Decimal

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_app.models import ApiKey, Budget, BudgetChange
from sessions_app.models.budgets import (
    THRESHOLD_MAX,
    THRESHOLD_MIN,
    THRESHOLDS_MAX_COUNT,
    TOKEN_LIMIT_MAX,
    USD_LIMIT_MAX,
    USD_LIMIT_MIN,
    WINDOW_HOURS_MAX,
    WINDOW_HOURS_MIN,
)
from sessions_app.schema import MAX_TOKENS
from tests.support.factories import SessionFactory

BUDGETS = "/api/v1/budgets/"
DASHBOARD = reverse("admin:sessions_app_usage_dashboard")
CHANGELIST = reverse("admin:sessions_app_budget_changelist")

token_limits = st.one_of(
    st.sampled_from([1, 2, 10**6, 10**9, 10**12, TOKEN_LIMIT_MAX - 1, TOKEN_LIMIT_MAX]),
    st.integers(min_value=1, max_value=TOKEN_LIMIT_MAX),
)
usd_limits = st.one_of(
    st.sampled_from([Decimal(USD_LIMIT_MIN), Decimal("0.011"), Decimal("1"), Decimal("999999999.999999")]),
    st.just(Decimal(USD_LIMIT_MAX)),
    st.decimals(min_value=Decimal(USD_LIMIT_MIN), max_value=USD_LIMIT_MAX, places=6),
)
periods = st.one_of(
    st.fixed_dictionaries({"period": st.sampled_from(["day", "week", "month"])}),
    st.fixed_dictionaries(
        {
            "period": st.just("rolling"),
            "window_hours": st.sampled_from([WINDOW_HOURS_MIN, 5, 24 * 7, WINDOW_HOURS_MAX])
            | st.integers(min_value=WINDOW_HOURS_MIN, max_value=WINDOW_HOURS_MAX),
        }
    ),
)
# The zones with the largest offsets either way, a half-hour one and one with summer time.
timezones = st.sampled_from(["UTC", "Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kolkata", "America/St_Johns"])
thresholds = st.lists(
    st.integers(min_value=THRESHOLD_MIN, max_value=THRESHOLD_MAX),
    min_size=1,
    max_size=THRESHOLDS_MAX_COUNT,
    unique=True,
)
spends = st.lists(st.sampled_from([0, 1, 1000, MAX_TOKENS]) | st.integers(0, MAX_TOKENS), min_size=0, max_size=3)


def spend(api, session, tokens: int) -> None:
    message = {"role": "assistant", "content": "ok", "model": "qwen-max", "total_tokens": tokens}
    message.update(input_tokens=tokens // 2, output_tokens=tokens - tokens // 2)
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", message, format="json")
    assert response.status_code in (201, 429), response.content  # 429: a hard-limit budget used up


def read_back(api, staff, budget_id: str) -> dict:
    """The budget through every view that shows it: each answers 200."""
    listed = api.get(BUDGETS)
    assert listed.status_code == 200, listed.content[:500]
    assert budget_id in [body["id"] for body in listed.json()["results"]]
    detail = api.get(f"{BUDGETS}{budget_id}/")
    assert detail.status_code == 200, detail.content[:500]
    for url in (
        CHANGELIST,
        f"{CHANGELIST}?tenant__id__exact={api.tenant.pk}",
        reverse("admin:sessions_app_budget_change", args=[budget_id]),
        f"{DASHBOARD}?tenant={api.tenant.pk}",
        f"{DASHBOARD}?tenant=all",
    ):
        page = staff.get(url)
        assert page.status_code == 200, (url, page.content[:500])
    return detail.json()


@pytest.mark.parametrize("limit", [10**9, TOKEN_LIMIT_MAX])
def test_a_large_token_limit_spent_slowly_is_created_listed_and_shown(api, staff, session, limit):
    spend(api, session, 10)  # 10 tokens this period: at this pace 10**9 lasts thousands of years
    response = api.post(BUDGETS, {"name": f"big {limit}", "limit": limit}, format="json")
    assert response.status_code == 201, response.content[:500]
    body = response.json()
    assert (body["limit"], body["used"], body["exhausted"]) == (limit, 10, False)
    assert body["projected_exhaustion_at"] is None  # after the period ends: it lasts the period
    assert read_back(api, staff, body["id"])["projected_exhaustion_at"] is None
    for period in ("day", "week", "rolling"):
        changed = api.patch(
            f"{BUDGETS}{body['id']}/",
            {"period": period, **({"window_hours": WINDOW_HOURS_MAX} if period == "rolling" else {})},
            format="json",
        )
        assert changed.status_code == 200, changed.content[:500]
        read_back(api, staff, body["id"])
    assert api.delete(f"{BUDGETS}{body['id']}/").status_code == 204


def test_a_budget_that_cannot_be_shown_is_not_kept(api, session, monkeypatch):
    """The 201 is made in the create's transaction: should showing the new budget fail, nothing is stored
    (no budget, no audit entry) and the client may simply try again."""
    from sessions_app.api import budgets as budgets_api

    def broken(budgets):
        raise RuntimeError("the projection failed")

    monkeypatch.setattr(budgets_api, "budgets_status", broken)
    api.raise_request_exception = False
    response = api.post(BUDGETS, {"name": "unshowable", "limit": 1000}, format="json")
    assert response.status_code == 500
    assert not Budget.objects.filter(name="unshowable").exists()
    assert not BudgetChange.objects.filter(budget_name="unshowable").exists()


@pytest.mark.django_db
def test_every_budget_within_the_documented_bounds_is_readable_by_every_view(api, staff):
    session = SessionFactory(tenant=api.tenant, tool="chat", user_id="bounded", project="bounds")
    key = ApiKey.objects.filter(tenant=api.tenant).first()
    scopes = st.sampled_from(
        [
            {"scope": "tenant"},
            {"scope": "user_id", "scope_value": "bounded"},
            {"scope": "project", "scope_value": "bounds"},
            {"scope": "api_key", "api_key": str(key.pk)},
        ]
    )
    limits = st.one_of(
        token_limits.map(lambda limit: {"unit": "tokens", "limit": limit}),
        usd_limits.map(lambda limit: {"unit": "usd", "limit": int(limit) if limit == int(limit) else float(limit)}),
    )
    budgets = st.tuples(scopes, limits, periods, timezones, thresholds, st.booleans(), st.booleans())

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(budgets, spends, spends)
    def check(budget, before, after):
        scope, limit, period, zone, marks, hard_limit, active = budget
        for tokens in before:
            spend(api, session, tokens)
        body = {"name": f"b-{uuid.uuid4().hex[:12]}", **scope, **limit, **period}
        body.update(timezone=zone, thresholds=marks, hard_limit=hard_limit, active=active)
        created = api.post(BUDGETS, body, format="json")
        assert created.status_code == 201, (body, created.content[:500])
        budget_id = created.json()["id"]
        for tokens in after:
            spend(api, session, tokens)
        shown = read_back(api, staff, budget_id)
        assert shown["limit"] == limit["limit"]
        assert api.delete(f"{BUDGETS}{budget_id}/").status_code == 204

    check()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"limit": TOKEN_LIMIT_MAX + 1}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": 1.5}, "limit"),
        ({"unit": "usd", "limit": USD_LIMIT_MAX + 0.01}, "limit"),
        ({"unit": "usd", "limit": 0.001}, "limit"),
        ({"unit": "usd", "limit": 1.0000001}, "limit"),
        ({"period": "rolling", "window_hours": WINDOW_HOURS_MAX + 1}, "window_hours"),
        ({"period": "rolling", "window_hours": 0}, "window_hours"),
        ({"thresholds": [THRESHOLD_MAX + 1]}, "thresholds"),
        ({"thresholds": list(range(1, THRESHOLDS_MAX_COUNT + 2))}, "thresholds"),
    ],
)
def test_a_value_just_out_of_bounds_is_a_400_naming_the_field_and_stores_nothing(api, body, field):
    response = api.post(BUDGETS, {"name": "out of bounds", "limit": 1000, **body}, format="json")
    assert response.status_code == 400, response.content[:500]
    assert field in response.json()["errors"], response.json()
    assert not Budget.objects.filter(name="out of bounds").exists()
