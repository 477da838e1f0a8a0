"""The suite in parallel (pytest-xdist: `scripts/test` runs `-n 2`). Each xdist worker is a run of its own, as two
runs with different ACE_TEST_DATA_DIRs would be: its data folder is a subfolder of the suite's, ACE_DATA_DIR/gw0,
ACE_DATA_DIR/gw1, ..., so it has its own embedded PostgreSQL (a test that stops the server stops only its worker's),
its own embedded broker, uploads and exports (pytest-django adds the worker to the test database's name too); the
tests that keep a real worker use a Redis database of their own (the test broker's, plus the worker's number); the
servers the tests start listen on free ports. Without -n, nothing changes."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

REDIS_DATABASES = 16  # Redis's default number of databases


def worker_number() -> int | None:
    """This process's xdist worker (gw0 is 0), or None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") else None


def real_broker_url() -> str:
    """Redis at CELERY_TEST_BROKER_URL (default redis://127.0.0.1:6379/15); xdist worker gwN uses the database N
    after it (wrapping around), so that two workers' real Celery workers never take each other's tasks."""
    url = os.environ.get("CELERY_TEST_BROKER_URL", "redis://127.0.0.1:6379/15")
    number = worker_number()
    if not number:
        return url
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(database + number) % REDIS_DATABASES}"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    """Before the workers start: each one's ACE_DATA_DIR, in its environment (the settings read it when they load,
    before any conftest)."""
    import execnet
    from django.conf import settings

    base = Path(settings.ACE_DATA_DIR).resolve()
    for number, spec in enumerate(specs):  # gw0, gw1, ... here (xdist's own names for them may differ)
        specs[number] = execnet.XSpec(f"{spec}//env:ACE_DATA_DIR={base / f'gw{number}'}")
