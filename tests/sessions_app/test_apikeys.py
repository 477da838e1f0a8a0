import hashlib
from types import SimpleNamespace

from django.core.management import call_command

from sessions_app.models import ApiKey, Tenant
from sessions_app.services import apikeys
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


def _key_queries(queries) -> list[str]:
    return [q["sql"] for q in queries if "sessions_app_apikey" in q["sql"] and q["sql"].startswith("SELECT")]


def test_a_key_check_is_kept_for_a_few_seconds_and_a_revocation_elsewhere_lands_within_them(api, settings, monkeypatch):
    """Another server revoking the key (here: a bare UPDATE, which this process hears nothing of) is obeyed
    once this process's check of the key is older than ACE_API_KEY_CACHE_SECONDS."""
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.ACE_API_KEY_CACHE_SECONDS = 1.0
    assert api.get("/api/v1/sessions/").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/v1/sessions/").status_code == 200
    assert _key_queries(queries.captured_queries) == []  # the key was not read again

    with connection.cursor() as cursor:
        cursor.execute("UPDATE sessions_app_apikey SET revoked_at = now() WHERE tenant_id = %s", [api.tenant.pk])
    assert api.get("/api/v1/sessions/").status_code == 200  # still trusted for up to a second
    later = time.monotonic() + 1.1  # the clock the check is kept by, moved on past the second
    monkeypatch.setattr(apikeys, "time", SimpleNamespace(monotonic=lambda: later))
    assert api.get("/api/v1/sessions/").status_code == 401


def test_a_key_deleted_or_revoked_in_this_process_stops_working_at_once(api, settings):
    settings.ACE_API_KEY_CACHE_SECONDS = 3600.0
    assert api.get("/api/v1/sessions/").status_code == 200
    ApiKey.objects.get(tenant=api.tenant).delete()
    assert api.get("/api/v1/sessions/").status_code == 401


def test_without_the_cache_every_call_checks_the_key(api, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.ACE_API_KEY_CACHE_SECONDS = 0
    assert api.get("/api/v1/sessions/").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/v1/sessions/").status_code == 200
    assert len(_key_queries(queries.captured_queries)) == 1
