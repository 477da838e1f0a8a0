"""For tests that run one of the project's own processes (ace_mcp, gunicorn) against the test database."""

import os
from pathlib import Path
from urllib.parse import quote

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    """The test database, for a process of its own (the embedded server listens on a socket directory)."""
    params = connection.get_connection_params()
    user, password = quote(params.get("user") or "", safe=""), quote(params.get("password") or "", safe="")
    host, port, name = params.get("host") or "", params.get("port") or "", params["dbname"]
    if host.startswith("/"):
        return f"postgres://{user}:{password}@/{name}?host={quote(host)}" + (f"&port={port}" if port else "")
    return f"postgres://{user}:{password}@{host}:{port}/{name}"


def process_env(**extra: str) -> dict:
    """The environment of such a process: the test database, the suite's embedder (conftest), no preloading."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "ACE_EMBEDDER": "hash",  # the suite's embedder, so every process shares one vector space
        "ACE_EMBEDDER_PRELOAD": "false",
        "PYTHONPATH": str(ROOT),
        **extra,
    }
