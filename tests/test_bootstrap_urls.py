"""The URLs `scripts/up` prints (manage.py ace_bootstrap) are where the web process listens: $ACE_HOST:$ACE_PORT,
as the Procfile binds gunicorn."""

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command


@pytest.mark.parametrize(
    ("host", "port", "printed"),
    [
        ("127.0.0.1", 8000, "http://127.0.0.1:8000"),
        ("127.0.0.1", 9123, "http://127.0.0.1:9123"),
        ("0.0.0.0", 8081, "http://127.0.0.1:8081"),  # all interfaces: reached here at the loopback address
        ("::1", 8082, "http://[::1]:8082"),
    ],
)
def test_the_printed_urls_use_where_the_web_process_listens(db, settings, tmp_path, capsys, host, port, printed):
    settings.ACE_DATA_DIR = tmp_path
    settings.ACE_IMPORT_DIRS = []
    settings.ACE_HOST, settings.ACE_PORT = host, port
    call_command("ace_bootstrap", "--tenant", "ports")
    out = capsys.readouterr().out
    for page in ("/", "/admin/", "/api/docs/"):
        assert f"{printed}{page}\n" in out


def test_the_procfile_binds_the_configured_port_whose_default_the_readme_states():
    procfile = (Path(django_settings.BASE_DIR) / "Procfile").read_text()
    assert "--bind ${ACE_HOST:-127.0.0.1}:${ACE_PORT:-8000}" in procfile
    readme = (Path(django_settings.BASE_DIR) / "README.md").read_text()
    assert "| `ACE_PORT` | `8000` |" in readme
