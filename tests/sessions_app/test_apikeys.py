import hashlib

from django.core.management import call_command

from sessions_app.models import ApiKey, Tenant
from sessions_app.services.apikeys import apikeys_revoke


def test_command_creates_tenant_and_prints_the_key_last(db, capsys):
    call_command("ace_apikey", "create", "--tenant", "acme-corp")
    lines = capsys.readouterr().out.strip().splitlines()
    key = lines[-1]
    assert key.startswith("ace_")
    stored = ApiKey.objects.get(tenant=Tenant.objects.get(name="acme-corp"))
    assert stored.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key not in (stored.key_hash, stored.prefix)

    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/sessions/").status_code == 200
    stored.refresh_from_db()
    assert stored.last_used_at is not None


def test_a_revoked_key_stops_working(api):
    assert api.get("/api/v1/sessions/").status_code == 200
    assert apikeys_revoke(keys=ApiKey.objects.filter(tenant=api.tenant)) == 1
    assert api.get("/api/v1/sessions/").status_code == 401


def test_a_key_with_the_right_prefix_but_wrong_secret_is_refused(api):
    from rest_framework.test import APIClient

    forged = api.key[:-4] + ("AAAA" if not api.key.endswith("AAAA") else "BBBB")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert client.get("/api/v1/sessions/").status_code == 401


def test_list_and_revoke_commands(api, capsys):
    prefix = ApiKey.objects.get(tenant=api.tenant).prefix
    call_command("ace_apikey", "list", "--tenant", "acme")
    assert prefix in capsys.readouterr().out
    call_command("ace_apikey", "revoke", prefix)
    assert api.get("/api/v1/sessions/").status_code == 401
