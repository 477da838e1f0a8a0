"""The budget form in the admin: it saves as it is shown (defaults filled in, never the text "null"), shows
nothing of a budget not yet saved, and chooses the tenant the admin came from (or the only one there is)."""

import re
from urllib.parse import urlencode

from sessions_app.models import Budget, Tenant
from tests.support.factories import SessionFactory

ADD = "/admin/sessions_app/budget/add/"


def shown_form(html: str) -> dict:
    """The add form's fields as a browser would send them, untouched."""
    values = {}
    for tag in re.findall(r"<(?:input|textarea|select)\b[^>]*>(?:[^<]*</textarea>)?", html):
        name = re.search(r'name="([^"]+)"', tag)
        if not name or name.group(1) in ("csrfmiddlewaretoken", "_save", "_addanother", "_continue"):
            continue
        if tag.startswith("<textarea"):
            values[name.group(1)] = re.search(r">\n?([^<]*)</textarea>", tag).group(1)
        elif tag.startswith("<input"):
            kind = re.search(r'type="([^"]+)"', tag).group(1)
            value = re.search(r'value="([^"]*)"', tag)
            if kind == "checkbox":
                if " checked" in tag:
                    values[name.group(1)] = "on"
            elif kind != "submit":
                values[name.group(1)] = value.group(1) if value else ""
    for select in re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', html, re.S):
        chosen = re.search(r'<option value="([^"]*)"[^>]*selected', select[1])
        values[select[0]] = chosen.group(1) if chosen else ""
    return values


def test_the_add_form_saves_as_shown_with_the_only_tenant_chosen(api, admin_client):
    page = admin_client.get(ADD)
    html = page.content.decode()
    assert page.status_code == 200
    assert "null" not in html
    assert "Created at" not in html and "Updated at" not in html and "Where it stands" not in html
    form = shown_form(html)
    assert form["thresholds"] == "80, 100" and form["emails"] == ""
    assert form["tenant"] == str(api.tenant.pk)  # the only tenant there is
    response = admin_client.post(ADD, {**form, "name": "as shown", "limit": "1000"})
    assert response.status_code == 302, response.content.decode()[:2000]
    budget = Budget.objects.get(name="as shown")
    assert (budget.tenant, budget.thresholds, budget.emails) == (api.tenant, [80, 100], [])


def test_lists_are_typed_with_commas_and_read_back_the_same_way(api, admin_client):
    form = shown_form(admin_client.get(ADD).content.decode())
    body = {
        **form,
        "name": "lists",
        "limit": "500",
        "thresholds": "100 50,150",
        "emails": "a@example.com, b@example.com",
    }
    assert admin_client.post(ADD, body).status_code == 302
    budget = Budget.objects.get(name="lists")
    assert (budget.thresholds, budget.emails) == ([50, 100, 150], ["a@example.com", "b@example.com"])
    change = shown_form(admin_client.get(f"/admin/sessions_app/budget/{budget.pk}/change/").content.decode())
    assert (change["thresholds"], change["emails"]) == ("50, 100, 150", "a@example.com, b@example.com")
    refused = admin_client.post(ADD, {**body, "name": "bad", "thresholds": "80, lots"})
    assert refused.status_code == 200 and "Each threshold is a whole percentage" in refused.content.decode()
    refused = admin_client.post(ADD, {**body, "name": "bad", "emails": "not-an-address"})
    assert refused.status_code == 200 and "Not an email address" in refused.content.decode()
    assert not Budget.objects.filter(name="bad").exists()


def test_with_two_tenants_the_one_the_admin_came_from_is_chosen(api, other_api, admin_client):
    assert shown_form(admin_client.get(ADD).content.decode())["tenant"] == ""  # two tenants: no guess
    filtered = urlencode({"_changelist_filters": urlencode({"tenant__id__exact": other_api.tenant.pk})})
    assert shown_form(admin_client.get(f"{ADD}?{filtered}").content.decode())["tenant"] == str(other_api.tenant.pk)
    tenant_page = admin_client.get(f"/admin/sessions_app/tenant/{other_api.tenant.pk}/change/").content.decode()
    link = re.search(r'href="([^"]*budget/add/[^"]*)"', tenant_page).group(1).replace("&amp;", "&")
    assert "0 budgets" in tenant_page
    assert shown_form(admin_client.get(link).content.decode())["tenant"] == str(other_api.tenant.pk)
    assert Tenant.objects.count() == 2


def test_a_budget_the_period_is_already_over_is_crossed_at_once_from_the_admin_too(api, admin_client):
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    posted = api.post(
        f"/api/v1/sessions/{session.pk}/messages/", {"role": "assistant", "content": "x", "total_tokens": 900},
        format="json",
    )  # fmt: skip
    assert posted.status_code == 201
    form = shown_form(admin_client.get(ADD).content.decode())
    body = {**form, "name": "late", "limit": "1000", "emails": "ops@example.com"}
    assert admin_client.post(ADD, body).status_code == 302
    budget = Budget.objects.get(name="late")
    assert list(budget.crossings.values_list("threshold", flat=True)) == [80]
    crossing = budget.crossings.get()
    assert crossing.payload["cause"] == "budget_created" and crossing.payload["used"] == 900
    page = admin_client.get(f"/admin/sessions_app/budget/{budget.pk}/change/").content.decode()
    assert "(90" in page  # where it stands: 900 of 1000 (90%)
