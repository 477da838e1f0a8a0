"""Health, the OpenAPI schema and its docs, the first-start bootstrap, the embedded database and data folder."""

import json
import os
import stat
import subprocess
import sys

import pytest
import yaml
from django.core.management import call_command
from drf_spectacular.validation import validate_schema

from sessions_app.models import Session, Tenant


def test_healthz_reports_database_and_broker(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    checks = {k: v for k, v in response.json().items() if k not in ("embedder", "errors")}
    assert checks == {"database": "ok", "broker": "ok"}
    assert response.json()["errors"]["server_errors_5xx"] == 0


def test_healthz_reports_the_embedder_without_loading_it(client, db, settings, tmp_path):
    """The embedder this process uses: configured how, loaded or not (never loaded by the probe), what it costs."""
    from memory_app.embedders import get_embedder

    assert client.get("/healthz").json()["embedder"] == {
        "provider": "hash",
        "key": "hash-v1:384",
        "label": "hash (lexical fallback, not semantic)",
        "loaded": True,
        "load_seconds": None,
    }
    settings.ACE_EMBEDDER = "local"
    settings.ACE_EMBEDDER_RUNTIME = "onnx"
    settings.ACE_EMBEDDER_CACHE_DIR = str(tmp_path)  # empty: a probe that loaded would export here
    get_embedder.cache_clear()
    try:
        embedder = client.get("/healthz").json()["embedder"]
        assert (embedder["provider"], embedder["runtime"], embedder["key"]) == (
            "local",
            "onnx",
            "local:all-MiniLM-L6-v2:384",
        )
        assert embedder["loaded"] is False and embedder["load_seconds"] is None
        assert list(tmp_path.iterdir()) == []

        settings.ACE_EMBEDDER_RUNTIME = "tensorflow"
        get_embedder.cache_clear()
        response = client.get("/healthz")
        assert response.status_code == 200  # recall still answers (keywords): not an outage
        assert response.json()["embedder"]["loaded"] is False
        assert response.json()["embedder"]["error"] == "misconfigured: ACE_EMBEDDER_RUNTIME (the server log says how)"
    finally:
        get_embedder.cache_clear()


def test_the_embedded_broker_publishes_without_warnings(caplog):
    # kombu warned "No hostname was supplied" the first time a process published to a URL with no host,
    # which is what `ace_import` printed before its summary.
    from aceproject.celery import app

    with caplog.at_level("WARNING", logger="kombu"), app.connection_for_write() as conn:
        conn.clone().release()  # what the producer pool does when a process first publishes
    assert app.conf.broker_url.startswith("ace-embedded+socket://")  # the default: the embedded broker
    assert [record.getMessage() for record in caplog.records] == []


def test_healthz_names_what_is_down(client, db, settings):
    from aceproject.celery import app

    original = app.conf.broker_url, app.conf.broker_write_url
    app.conf.broker_url = app.conf.broker_write_url = "redis://127.0.0.1:1/0"  # nothing listens there
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url, app.conf.broker_write_url = original
    assert response.status_code == 503
    assert response.json()["broker"] == "down"
    assert response.json()["database"] == "ok"
    assert "broker" in response.json()["detail"]


def test_openapi_schema_is_valid_and_docs_are_served_locally(client, db):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    validate_schema(schema)
    paths = schema["paths"]
    for path in (
        "/api/v1/sessions/",
        "/api/v1/sessions/{id}/messages/",
        "/api/v1/sessions/{id}/stats/",
        "/api/v1/sessions/{id}/state/",
        "/api/v1/sessions/{id}/state/history/",
        "/api/v1/sessions/{id}/end/",
        "/api/v1/sessions/{id}/conversations/",
        "/api/v1/conversations/{id}/",
        "/api/v1/messages/",
        "/api/v1/stats/",
    ):
        assert path in paths, path

    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn" not in html.lower()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html


def test_bootstrap_creates_admin_tenant_key_and_sample_data_once(db, capsys, settings, tmp_path):
    settings.ACE_DATA_DIR = tmp_path
    call_command("ace_bootstrap")
    out = capsys.readouterr().out
    assert "Admin user created: admin / " in out
    key = (tmp_path / "demo_api_key").read_text().strip()
    assert key in out
    demo = Tenant.objects.get(name="demo")
    weather = Session.objects.get(tenant=demo, name__startswith="天气查询")
    assert (weather.requests, weather.messages, weather.conversations) == (4, 6, 2)
    from memory_app.models import Record

    memories = Record.objects.filter(tenant=demo, user_id="xiaoming")
    assert memories.count() == 3
    assert all(record.source_messages.exists() for record in memories)
    count = Session.objects.count()

    call_command("ace_bootstrap")
    assert "exists already" in capsys.readouterr().out
    assert Session.objects.count() == count


def test_embedded_database_memory_follows_the_machine():
    from aceproject.embedded_db import memory_settings

    gib = 1024**3
    assert memory_settings(24 * gib) == {
        "shared_buffers": "4096MB",  # a quarter of memory, at most 4 GB
        "effective_cache_size": "12288MB",
        "maintenance_work_mem": "1536MB",
        "work_mem": "16MB",
    }
    assert memory_settings(2 * gib)["shared_buffers"] == "512MB"
    assert memory_settings(256 * 1024**2)["shared_buffers"] == "128MB"  # never below PostgreSQL's default
    assert memory_settings(24 * gib, shared_buffers_mb=1024)["shared_buffers"] == "1024MB"


def test_the_embedded_server_runs_with_those_settings(db, settings):
    import os

    from django.db import connection

    from aceproject.embedded_db import _memory_bytes, memory_settings

    if "ACE_DATA_DIR" not in settings.DATABASES["default"]:
        pytest.skip("DATABASE_URL points at an external PostgreSQL")
    override = os.environ.get("ACE_DB_SHARED_BUFFERS_MB", "")
    wanted = memory_settings(_memory_bytes(), int(override) if override.isdigit() else None)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_bytes(current_setting('shared_buffers')), pg_size_bytes(%s)", [wanted["shared_buffers"]]
        )
        current, expected = cursor.fetchone()
    assert current == expected


def _run_python(code: str, data_dir) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "CELERY_BROKER_URL", "DATABASE_URL")}
    env.update(ACE_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="aceproject.settings")
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + code],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_reading_the_settings_writes_nothing(tmp_path):
    data_dir = tmp_path / "data"
    _run_python("from django.conf import settings; print(len(settings.INSTALLED_APPS))", data_dir)
    assert not data_dir.exists()  # no key file, no broker folders, no database: nothing was asked for yet


def test_the_secret_key_is_made_on_first_use_and_kept(tmp_path):
    sign = "from django.core import signing; print(signing.Signer().sign('x'))"
    first, again = _run_python(sign, tmp_path), _run_python(sign, tmp_path)
    assert first == again  # the same key in the next process: logins survive a restart
    key_file = tmp_path / "secret_key"
    assert len(key_file.read_text().strip()) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]


COMMAND = "from django.core.management import call_command; call_command"


def test_the_embedded_broker_starts_when_celery_first_connects(tmp_path):
    _run_python("from aceproject.celery import app; print(app.conf.broker_url)", tmp_path)
    assert not (tmp_path / "broker").exists()  # configuring Celery starts nothing
    connect = "from aceproject.celery import app\nwith app.connection_for_write() as c: c.ensure_connection()"
    try:
        _run_python(connect, tmp_path)  # that process has exited: the server outlives it, for the others
        assert (tmp_path / "broker" / "valkey.sock").is_socket()
        assert "running" in _run_python(
            "from django.core.management import call_command; call_command('ace_broker', 'status')", tmp_path
        )
    finally:
        _run_python("from django.core.management import call_command; call_command('ace_broker', 'stop')", tmp_path)
    assert not (tmp_path / "broker" / "valkey.sock").exists()


def test_the_healthz_answer_in_docs_api_md_is_what_healthz_answers(client, db, settings, tmp_path):
    from memory_app.embedders import get_embedder

    settings.ACE_EMBEDDER, settings.ACE_EMBEDDER_RUNTIME = "local", "onnx"  # the default, as documented
    settings.ACE_EMBEDDER_CACHE_DIR = str(tmp_path)
    get_embedder.cache_clear()
    text = (settings.BASE_DIR / "docs" / "api.md").read_text()
    section = text[text.index("## Health") :]
    documented = json.loads(section[section.index("```json\n") + 8 : section.index("\n```", section.index("```json"))])
    try:
        answer = client.get("/healthz").json()
    finally:
        get_embedder.cache_clear()
    assert set(documented) <= set(answer) and set(documented["embedder"]) <= set(answer["embedder"])
    assert (documented["database"], documented["broker"]) == (answer["database"], answer["broker"]) == ("ok", "ok")


@pytest.mark.parametrize(
    ("broker_url", "private"),
    [
        ("redis+socket:///srv/ace-private/broker/valkey.sock", "/srv/ace-private"),
        ("redis://db-internal.corp.example:1/0", "db-internal.corp.example"),
        ("redis://127.0.0.1:1/0", "127.0.0.1"),
    ],
)
def test_healthz_says_what_is_down_in_generic_words_and_logs_the_details(client, db, broker_url, private, caplog):
    """The answer is public: no socket path, host or port in it; the log has them."""
    from aceproject.celery import app

    original = app.conf.broker_url, app.conf.broker_write_url
    app.conf.broker_url = app.conf.broker_write_url = broker_url
    try:
        with caplog.at_level("WARNING", logger="aceproject.health"):
            response = client.get("/healthz")
    finally:
        app.conf.broker_url, app.conf.broker_write_url = original
    assert response.status_code == 503 and response.json()["broker"] == "down"
    assert private not in response.content.decode()
    assert response.json()["reasons"]["broker"].startswith(("the broker ", "the broker's "))
    assert any("broker" in record.getMessage() for record in caplog.records)
