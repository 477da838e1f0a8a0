"""Provider keys at rest: `ace_providers new-key` and `ace_providers rotate` (key A, then "B,A", rotate, then B
alone decrypts every key), a key no configured key decrypts named and the others rotated."""

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.test import override_settings

from gateway_app import secrets
from gateway_app.models import Provider
from gateway_app.services.providers import provider_create
from tests.support.factories import TenantFactory

KEY_A, KEY_B, KEY_C = Fernet.generate_key().decode(), Fernet.generate_key().decode(), Fernet.generate_key().decode()


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ace_providers", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def new_provider(tenant, name, api_key):
    return provider_create(
        tenant=tenant, name=name, kind="openai", base_url="https://api.deepseek.com/v1", api_key=api_key
    )


def test_new_key_prints_a_key_fernet_takes():
    out, _ = run("new-key")
    key = out.strip()
    assert len(out.splitlines()) == 1 and Fernet(key).decrypt(Fernet(key).encrypt(b"x")) == b"x"
    assert run("new-key")[0].strip() != key


def test_rotation_moves_every_key_to_the_first_key(db):
    tenant = TenantFactory(name="acme")
    with override_settings(ACE_SECRETS_KEYS=KEY_A):
        first = new_provider(tenant, "deepseek", "sk-deepseek-0001")
        second = new_provider(tenant, "kimi", "sk-kimi-0002")
        Provider.objects.create(tenant=tenant, name="no-key", kind="openai", base_url="https://example.com/v1")
    with override_settings(ACE_SECRETS_KEYS=f"{KEY_B}, {KEY_A}"):  # the new key first, the old one still there
        assert Provider.objects.get(pk=first.pk).api_key == "sk-deepseek-0001"  # read before rotating
        out, err = run("rotate")
        assert "Re-encrypted 2 provider key(s) with the first of the 2 keys in ACE_SECRETS_KEYS." in out
        assert err == ""
    with override_settings(ACE_SECRETS_KEYS=KEY_B):  # the old key dropped
        assert Provider.objects.get(pk=first.pk).api_key == "sk-deepseek-0001"
        assert Provider.objects.get(pk=second.pk).api_key == "sk-kimi-0002"
        assert Provider.objects.get(name="no-key").api_key == ""
    with override_settings(ACE_SECRETS_KEYS=KEY_A):
        with pytest.raises(secrets.SecretUnreadable):
            Provider.objects.get(pk=first.pk).api_key  # noqa: B018 - A alone no longer reads it


def test_a_key_no_configured_key_decrypts_is_named_and_the_others_are_rotated(db):
    tenant = TenantFactory(name="acme")
    with override_settings(ACE_SECRETS_KEYS=KEY_C):
        lost = new_provider(tenant, "glm", "sk-glm-0003")
    with override_settings(ACE_SECRETS_KEYS=KEY_A):
        kept = new_provider(tenant, "deepseek", "sk-deepseek-0001")
    with override_settings(ACE_SECRETS_KEYS=f"{KEY_B},{KEY_A}"):
        out, err = io.StringIO(), io.StringIO()
        with pytest.raises(CommandError, match="1 provider key") as refused:
            call_command("ace_providers", "rotate", stdout=out, stderr=err)
        assert refused.value.returncode == 3
        assert "Re-encrypted 1 provider key(s)" in out.getvalue()
        assert (
            f"'glm' (tenant 'acme', id {lost.pk})" in err.getvalue()
            and "enter the provider's API key" in err.getvalue()
        )
    with override_settings(ACE_SECRETS_KEYS=KEY_B):
        assert Provider.objects.get(pk=kept.pk).api_key == "sk-deepseek-0001"
    with override_settings(ACE_SECRETS_KEYS=KEY_C):
        assert Provider.objects.get(pk=lost.pk).api_key == "sk-glm-0003"  # left as it was


def test_without_the_setting_the_key_comes_from_secret_key(db):
    tenant = TenantFactory(name="acme")
    with override_settings(ACE_SECRETS_KEYS="", SECRET_KEY="one-secret-key-" * 4):
        provider = new_provider(tenant, "deepseek", "sk-deepseek-0001")
        out, _ = run("rotate")
        assert "with the key derived from SECRET_KEY (ACE_SECRETS_KEYS is unset)" in out
        assert Provider.objects.get(pk=provider.pk).api_key == "sk-deepseek-0001"
    with override_settings(ACE_SECRETS_KEYS="", SECRET_KEY="another-secret-key-" * 4):
        with pytest.raises(secrets.SecretUnreadable):
            Provider.objects.get(pk=provider.pk).api_key  # noqa: B018


def test_a_malformed_setting_is_a_system_check_error():
    from gateway_app.checks import secrets_keys

    with override_settings(ACE_SECRETS_KEYS=f"{KEY_A},not-a-key"):
        (error,) = secrets_keys()
        assert error.id == "gateway_app.E001" and "32 url-safe base64-encoded bytes" in error.msg
    with override_settings(ACE_SECRETS_KEYS=f"{KEY_A},{KEY_B}"):
        assert secrets_keys() == []


def test_setting_the_keys_for_the_first_time_keeps_what_the_derived_key_encrypted(db):
    tenant = TenantFactory(name="acme")
    with override_settings(ACE_SECRETS_KEYS="", SECRET_KEY="one-secret-key-" * 4):
        provider = new_provider(tenant, "deepseek", "sk-deepseek-0001")
        derived = run("derived-key")[0].strip()
    with override_settings(ACE_SECRETS_KEYS=f"{KEY_B},{derived}", SECRET_KEY="one-secret-key-" * 4):
        assert "Re-encrypted 1 provider key(s)" in run("rotate")[0]
    with override_settings(ACE_SECRETS_KEYS=KEY_B, SECRET_KEY="a-new-secret-key-" * 4):  # SECRET_KEY free to change
        assert Provider.objects.get(pk=provider.pk).api_key == "sk-deepseek-0001"
