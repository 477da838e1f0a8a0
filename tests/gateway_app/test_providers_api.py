"""Providers through the API: the key write-only and encrypted at rest, names unique per tenant ignoring case, bad
input refused with what to fix and nothing written, upstreams under the outbound policy, another tenant's
providers not found."""

import pytest

from gateway_app.models import Provider

OPENAI = {
    "name": "openai",
    "kind": "openai",
    "base_url": "https://api.openai.com/v1",
    "api_key": "sk-test-0123456789abcd",
}


def create(api, **body):
    return api.post("/api/v1/providers/", {**OPENAI, **body}, format="json")


def test_create_read_change_and_delete_without_the_key_ever_coming_back(api):
    created = create(api, models=["gpt-4o-mini", "gpt-4o", "gpt-4o-mini"], base_url="https://api.openai.com/v1/")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert set(body) == {
        "id", "name", "kind", "base_url", "api_key_hint", "active", "models", "created_at", "updated_at",
    }  # fmt: skip
    assert body["api_key_hint"] == "…abcd" and body["active"] is True
    assert body["models"] == ["gpt-4o-mini", "gpt-4o"]  # deduplicated, in order
    assert body["base_url"] == "https://api.openai.com/v1"  # as the SDK takes it, without the trailing slash
    stored = Provider.objects.get(pk=body["id"])
    assert "sk-test" not in stored.api_key_encrypted and stored.api_key == OPENAI["api_key"]  # encrypted at rest

    one = api.get(f"/api/v1/providers/{body['id']}/").json()
    assert one == body
    assert [p["id"] for p in api.get("/api/v1/providers/").json()["results"]] == [body["id"]]

    patched = api.patch(
        f"/api/v1/providers/{body['id']}/",
        {"active": False, "api_key": "sk-new-key-98765wxyz", "models": []},
        format="json",
    )
    assert patched.status_code == 200, patched.json()
    assert patched.json()["active"] is False and patched.json()["models"] == []
    assert patched.json()["api_key_hint"] == "…wxyz" and "api_key" not in patched.json()
    assert patched.json()["updated_at"] > body["updated_at"]
    assert Provider.objects.get(pk=body["id"]).api_key == "sk-new-key-98765wxyz"
    for answer in (created, patched, api.get("/api/v1/providers/")):
        assert "sk-test-0123456789abcd" not in answer.content.decode()
        assert "sk-new-key-98765wxyz" not in answer.content.decode()

    renamed = api.patch(f"/api/v1/providers/{body['id']}/", {"name": "OpenAI-main", "kind": "openai"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "OpenAI-main"
    assert Provider.objects.get(pk=body["id"]).api_key == "sk-new-key-98765wxyz"  # a PATCH without it keeps it

    assert api.delete(f"/api/v1/providers/{body['id']}/").status_code == 204
    assert api.get(f"/api/v1/providers/{body['id']}/").status_code == 404
    assert not Provider.objects.exists()


def test_an_anthropic_provider_and_a_short_key(api):
    created = create(api, name="claude", kind="anthropic", base_url="https://api.anthropic.com", api_key="short")
    assert created.status_code == 201, created.json()
    assert created.json()["kind"] == "anthropic" and created.json()["api_key_hint"] == "…"  # too short to show a part


def test_names_are_unique_per_tenant_ignoring_case(api, other_api):
    assert create(api).status_code == 201
    for name in ("openai", "OpenAI", "OPENAI"):
        answer = create(api, name=name)
        assert answer.status_code == 400, name
        (message,) = answer.json()["errors"]["name"]
        assert "already has a provider named" in message and "ignoring case" in message
    assert create(other_api).status_code == 201  # another tenant's names are its own
    second = create(api, name="deepseek", base_url="https://api.deepseek.com/v1").json()
    answer = api.patch(f"/api/v1/providers/{second['id']}/", {"name": "OpenAI"}, format="json")
    assert answer.status_code == 400 and "already has a provider" in answer.json()["errors"]["name"][0]
    assert Provider.objects.get(pk=second["id"]).name == "deepseek"
    # its own name in another case is no clash
    assert api.patch(f"/api/v1/providers/{second['id']}/", {"name": "DeepSeek"}, format="json").status_code == 200


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "has space"}, "name", "letters, digits"),
        ({"name": "-dash-first"}, "name", "starting with a letter or a digit"),
        ({"name": "a/b"}, "name", "letters, digits"),
        ({"name": "x" * 65}, "name", "64"),
        ({"name": 12}, "name", "string"),
        ({"kind": "gemini"}, "kind", "not a valid choice"),
        ({"base_url": "ftp://files.example.com/v1"}, "base_url", "http:// or https://"),
        ({"base_url": "api.openai.com/v1"}, "base_url", "http:// or https://"),
        ({"base_url": "https:///v1"}, "base_url", "no host"),
        ({"base_url": "https://user:pw@api.example.com/v1"}, "base_url", "user name and password"),
        ({"base_url": "https://api.example.com/v1?key=1"}, "base_url", "no query"),
        ({"base_url": "https://api.example.com/" + "a" * 2000}, "base_url", "2000"),
        ({"kind": "anthropic", "base_url": "https://api.anthropic.com/v1"}, "base_url", "before /v1"),
        ({"api_key": ""}, "api_key", "blank"),
        ({"api_key": "   "}, "api_key", "blank"),
        ({"api_key": "sk-with a space"}, "api_key", "without spaces"),
        ({"api_key": "sk-\r\nX-Injected: 1"}, "api_key", "without spaces"),
        ({"api_key": 123456789012}, "api_key", "string"),
        ({"models": "gpt-4o"}, "models", "list"),
        ({"models": ["gpt-4o", ""]}, "models.1", "blank"),
        ({"models": ["gpt-4o", 4]}, "models.1", "string"),
        ({"models": ["m" * 256]}, "models.0", "255"),
        ({"active": "maybe"}, "active", ""),
        ({"colour": "blue"}, "colour", "Unknown field"),
    ],
)
def test_bad_input_is_refused_with_what_to_fix_and_nothing_is_written(api, body, field, words):
    answer = create(api, **body)
    assert answer.status_code == 400, answer.json()
    error = answer.json()
    assert field in error["errors"] and words in " ".join(error["errors"][field]), error
    assert error["detail"].startswith("Invalid input.")
    assert not Provider.objects.exists()


@pytest.mark.parametrize("missing", ["name", "kind", "base_url", "api_key"])
def test_create_needs_name_kind_base_url_and_key(api, missing):
    body = {key: value for key, value in OPENAI.items() if key != missing}
    answer = api.post("/api/v1/providers/", body, format="json")
    assert answer.status_code == 400 and missing in answer.json()["errors"]


def test_a_model_list_with_blank_names_after_trimming_is_refused_by_the_service(api):
    answer = create(api, models=[" "])
    assert answer.status_code == 400 and "models" in " ".join(answer.json()["errors"]), answer.json()


def test_bad_patch_changes_nothing(api):
    provider = create(api).json()
    for body in (
        {"base_url": "ftp://x", "active": False},
        {"kind": "anthropic", "base_url": "https://api.anthropic.com/v1", "active": False},
        {"api_key": "", "active": False},
    ):
        answer = api.patch(f"/api/v1/providers/{provider['id']}/", body, format="json")
        assert answer.status_code == 400, body
    stored = Provider.objects.get(pk=provider["id"])
    assert stored.active is True and stored.kind == "openai" and stored.api_key == OPENAI["api_key"]


def test_a_kind_change_is_checked_against_the_stored_base_url(api):
    provider = create(api, base_url="https://gw.example.com/anthropic/v1").json()
    answer = api.patch(f"/api/v1/providers/{provider['id']}/", {"kind": "anthropic"}, format="json")
    assert answer.status_code == 400 and "before /v1" in answer.json()["errors"]["base_url"][0]
    changed = api.patch(
        f"/api/v1/providers/{provider['id']}/",
        {"kind": "anthropic", "base_url": "https://gw.example.com/anthropic"},
        format="json",
    )
    assert changed.status_code == 200 and changed.json()["kind"] == "anthropic"


def test_upstreams_follow_the_outbound_policy(api, settings):
    settings.ACE_OUTBOUND_ALLOW = ""  # the default: the suite's own allows its loopback fakes
    for url, why in [
        ("http://127.0.0.1:11434/v1", "127.0.0.1 is a loopback address"),
        ("http://localhost:8000/v1", "localhost is a loopback name"),
        ("http://10.0.0.5:8000/v1", "10.0.0.5 is a private address"),
        ("http://169.254.169.254/latest", "link-local"),
        ("http://[::ffff:a9fe:a9fe]/v1", "169.254.169.254 written as IPv6"),
        ("http://2130706433/v1", "127.0.0.1 written another way"),
    ]:
        answer = create(api, name="local", base_url=url)
        assert answer.status_code == 400, url
        (message,) = answer.json()["errors"]["base_url"]
        assert why in message and "ACE_OUTBOUND_ALLOW" in message, (url, message)
    public = create(api).json()
    answer = api.patch(f"/api/v1/providers/{public['id']}/", {"base_url": "http://10.0.0.5:8000/v1"}, format="json")
    assert answer.status_code == 400 and "ACE_OUTBOUND_ALLOW" in answer.json()["errors"]["base_url"][0]

    settings.ACE_OUTBOUND_ALLOW = "10.0.0.0/8,localhost"  # an operator's own vLLM and Ollama
    assert create(api, name="vllm", base_url="http://10.0.0.5:8000/v1").status_code == 201
    assert create(api, name="ollama", base_url="http://localhost:11434/v1").status_code == 201
    assert create(api, name="metadata", base_url="http://169.254.169.254/v1").status_code == 400


def test_another_tenants_providers_are_not_found(api, other_api):
    theirs = create(other_api).json()
    for method, path in [
        ("get", f"/api/v1/providers/{theirs['id']}/"),
        ("patch", f"/api/v1/providers/{theirs['id']}/"),
        ("delete", f"/api/v1/providers/{theirs['id']}/"),
    ]:
        answer = getattr(api, method)(path, {"active": False} if method == "patch" else None, format="json")
        assert answer.status_code == 404, (method, path, answer.status_code)
        assert answer.json()["detail"]
    assert api.get("/api/v1/providers/").json()["results"] == []
    stored = Provider.objects.get(pk=theirs["id"])
    assert stored.active is True


def test_the_list_is_paged_newest_first(api):
    ids = [create(api, name=f"p{n}").json()["id"] for n in range(3)]
    first = api.get("/api/v1/providers/?page_size=2").json()
    assert [p["id"] for p in first["results"]] == ids[::-1][:2]
    rest = api.get(first["next"]).json()
    assert [p["id"] for p in rest["results"]] == ids[:1]


def test_without_a_key_nothing_is_listed(client, db):
    assert client.get("/api/v1/providers/").status_code == 401
