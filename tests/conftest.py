"""The suite's settings for every test, and the test broker. The shared helpers and fixtures live in tests/support/
(its fixtures are registered here, once)."""

import http.server

import pytest

pytest_plugins = ["tests.support.fixtures"]

from tests.support.parallel import pytest_xdist_setupnodes, real_broker_url  # noqa: E402, F401 - a hook, for pytest

# Test servers answer at once: Django's live server and the fakes built on http.server write a response's headers
# and body in two sends, and with Nagle's algorithm on, the body waited for the client's delayed ACK of the headers
# (about 40 ms a response on Linux): tests/test_api_fuzz.py, thousands of requests, took 278 s instead of 52 s.
http.server.BaseHTTPRequestHandler.disable_nagle_algorithm = True


@pytest.fixture(autouse=True)
def _hash_embedder(settings):
    """The fast lexical embedder for the suite (the local model has tests of its own in test_embedders.py)."""
    settings.ACE_EMBEDDER = "hash"
    settings.ACE_EMBEDDER_DIMENSIONS = None


@pytest.fixture(autouse=True)
def _no_throttled_address():
    """Each test starts with no address over the failed-key limit in this process (the counts themselves are
    rows, rolled back with the test's transaction)."""
    from platform_kit.auth_throttle import api_keys_unblock

    api_keys_unblock()


@pytest.fixture(autouse=True)
def _outbound_to_loopback_fakes(settings):
    """The suite's fake receivers, bots and OpenAI-compatible endpoints listen on 127.0.0.1: the operator's
    allow-list lets them through (tests of the policy itself set their own, tests/platform_kit/test_outbound.py)."""
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1,::1"


TEST_BROKER_URL = real_broker_url()  # CELERY_TEST_BROKER_URL, one database per xdist worker (tests/support/parallel.py)


def on_test_broker():
    """This process publishes to the test broker (Redis at CELERY_TEST_BROKER_URL) while inside."""
    from tests.support.burst import broker_swapped

    return broker_swapped(TEST_BROKER_URL, result_backend=TEST_BROKER_URL)


@pytest.fixture
def burst(transactional_db):
    """The tasks this test queues wait in memory; `burst()` runs them here, as a worker would, until none is left
    (tests/support/burst.py). Transactional: tasks are queued on commit, and run in transactions of their own."""
    from tests.support.burst import bursting

    with bursting() as runner:
        yield runner


@pytest.fixture
def celery_worker(transactional_db):
    """A real Celery worker (in a thread of this process, so it uses the test database) on a real broker:
    Redis at TEST_BROKER_URL, consuming every queue. Tests wait for a task's effect. For the tests whose point is
    the worker or the broker; the others run their tasks with `burst` (tests/support/burst.py)."""
    from celery.contrib.testing.worker import start_worker
    from celery.signals import task_postrun
    from django.db import connection

    from aceproject.celery import app

    def close_connection(**kwargs):
        connection.close()  # the worker thread's own connection: left open, it would block test DB teardown

    task_postrun.connect(close_connection, weak=False)
    try:
        with on_test_broker(), start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10) as worker:
            yield worker
    finally:
        task_postrun.disconnect(close_connection)
