"""Providers in the admin: added and changed through the services (the API's checks, the key encrypted and never
shown, blank on edit keeps it), listed with filters and search, activated and deactivated in bulk, deleted; and
the API keys' gateway rate limits."""

import re

from gateway_app.models import Provider
from gateway_app.services.providers import provider_create
from sessions_app.models import ApiKey

ADD = "/admin/gateway_app/provider/add/"
LIST = "/admin/gateway_app/provider/"
KEY = "sk-admin-secret-1234567890"


def change_url(provider) -> str:
    return f"/admin/gateway_app/provider/{provider.pk}/change/"


def add_form(tenant, **values) -> dict:
    return {
        "tenant": str(tenant.pk),
        "name": "deepseek",
        "kind": "openai",
        "base_url": "https://api.deepseek.com/v1",
        "api_key": KEY,
        "active": "on",
        "allowed_models": "deepseek-chat\r\ndeepseek-reasoner\r\n\r\n",
        **values,
    }


def change_form(provider, **values) -> dict:
    form = {
        "name": provider.name,
        "kind": provider.kind,
        "base_url": provider.base_url,
        "api_key": "",
        "allowed_models": "\n".join(provider.allowed_models),
        **values,
    }
    if provider.active and "active" not in values:
        form["active"] = "on"
    return {key: value for key, value in form.items() if value is not None}


def errors_of(response) -> str:
    html = response.content.decode()
    return " ".join(re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', html, re.S))


def test_add_through_the_services_key_encrypted_and_never_shown(staff, api):
    response = staff.post(ADD, add_form(api.tenant))
    assert response.status_code == 302, errors_of(response)
    provider = Provider.objects.get(tenant=api.tenant)
    assert provider.name == "deepseek" and provider.allowed_models == ["deepseek-chat", "deepseek-reasoner"]
    assert provider.api_key == KEY and KEY not in provider.api_key_encrypted and provider.api_key_hint == "…7890"

    for page in (LIST, change_url(provider), f"{LIST}?q=deepseek"):
        html = staff.get(page).content.decode()
        assert KEY not in html and provider.api_key_encrypted not in html, page
        assert "…7890" in html and "deepseek-chat" in html, page
    listing = staff.get(LIST).content.decode()
    assert "https://api.deepseek.com/v1" in listing and api.tenant.name in listing


def test_the_form_refuses_what_the_api_refuses(staff, api, settings):
    provider_create(
        tenant=api.tenant, name="OpenAI", kind="openai", base_url="https://api.openai.com/v1", api_key="sk-x" * 4
    )
    settings.ACE_OUTBOUND_ALLOW = ""
    for values, words in [
        ({"api_key": ""}, "Give the provider&#x27;s API key"),
        ({"name": "openai"}, "already has a provider named"),
        ({"name": "bad name"}, "letters, digits"),
        ({"base_url": "http://127.0.0.1:11434/v1"}, "ACE_OUTBOUND_ALLOW"),
        ({"kind": "anthropic", "base_url": "https://api.anthropic.com/v1"}, "before /v1"),
        ({"allowed_models": "m" * 256}, "255"),
    ]:
        response = staff.post(ADD, add_form(api.tenant, **values))
        assert response.status_code == 200, values
        assert words in errors_of(response), (values, errors_of(response))
        assert "provider_tenant_name" not in response.content.decode()  # one message, the service's
    assert Provider.objects.count() == 1


def test_change_blank_key_keeps_it_a_new_one_replaces_it(staff, api):
    provider = provider_create(
        tenant=api.tenant, name="kimi", kind="openai", base_url="https://api.moonshot.ai/v1", api_key=KEY
    )
    response = staff.post(change_url(provider), change_form(provider, allowed_models="kimi-k2-0905-preview"))
    assert response.status_code == 302, errors_of(response)
    provider.refresh_from_db()
    assert provider.api_key == KEY and provider.allowed_models == ["kimi-k2-0905-preview"]

    response = staff.post(change_url(provider), change_form(provider, api_key="sk-moonshot-new-key-zzzz"))
    assert response.status_code == 302, errors_of(response)
    provider.refresh_from_db()
    assert provider.api_key == "sk-moonshot-new-key-zzzz" and provider.api_key_hint == "…zzzz"

    response = staff.post(change_url(provider), change_form(provider, base_url="ftp://nowhere"))
    assert response.status_code == 200 and "http:// or https://" in errors_of(response)
    provider.refresh_from_db()
    assert provider.base_url == "https://api.moonshot.ai/v1"


def test_filters_search_actions_and_delete(staff, api, other_api):
    glm = provider_create(
        tenant=api.tenant, name="glm", kind="openai", base_url="https://open.bigmodel.cn/api/paas/v4", api_key=KEY
    )
    claude = provider_create(
        tenant=other_api.tenant, name="claude", kind="anthropic", base_url="https://api.anthropic.com", api_key=KEY
    )
    assert "glm" not in staff.get(f"{LIST}?kind=anthropic").content.decode()
    assert "claude" in staff.get(f"{LIST}?kind=anthropic").content.decode()
    assert "claude" not in staff.get(f"{LIST}?tenant__id__exact={api.tenant.pk}").content.decode()
    assert "glm" in staff.get(f"{LIST}?q=bigmodel").content.decode()

    response = staff.post(LIST, {"action": "deactivate", "_selected_action": [str(glm.pk), str(claude.pk)]})
    assert response.status_code == 302
    assert not Provider.objects.filter(active=True).exists()
    assert "claude" in staff.get(f"{LIST}?active__exact=0").content.decode()
    staff.post(LIST, {"action": "activate", "_selected_action": [str(glm.pk)]})
    assert list(Provider.objects.filter(active=True)) == [glm]

    response = staff.post(f"/admin/gateway_app/provider/{glm.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    response = staff.post(LIST, {"action": "delete_selected", "_selected_action": [str(claude.pk)], "post": "yes"})
    assert response.status_code == 302
    assert not Provider.objects.exists()


def test_api_keys_get_their_gateway_rate_limits_in_the_admin(staff, api):
    response = staff.post(
        "/admin/sessions_app/apikey/add/",
        {"tenant": str(api.tenant.pk), "name": "chat app", "requests_per_minute": "60", "tokens_per_minute": ""},
    )
    assert response.status_code == 200 and "API key created" in response.content.decode()
    key = ApiKey.objects.get(name="chat app")
    assert key.requests_per_minute == 60 and key.tokens_per_minute is None

    url = f"/admin/sessions_app/apikey/{key.pk}/change/"
    assert 'name="tokens_per_minute"' in staff.get(url).content.decode()
    response = staff.post(url, {"name": "chat app", "requests_per_minute": "", "tokens_per_minute": "200000"})
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.requests_per_minute is None and key.tokens_per_minute == 200_000
    assert "200,000 tokens/min" in staff.get("/admin/sessions_app/apikey/").content.decode()
