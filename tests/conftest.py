"""The suite's settings for every test, and the test broker. The shared helpers and fixtures live in tests/support/
(its fixtures are registered here, once)."""

import contextlib
import http.server

import pytest

pytest_plugins = ["tests.support.fixtures"]

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


TEST_BROKER_URL = __import__("os").environ.get("CELERY_TEST_BROKER_URL", "redis://127.0.0.1:6379/15")


@contextlib.contextmanager
def on_test_broker():
    """This process publishes to the test broker (Redis at CELERY_TEST_BROKER_URL) while inside."""
    from aceproject.celery import app

    names = ("broker_url", "broker_write_url", "broker_read_url", "broker_transport_options")
    saved = {name: app.conf[name] for name in names}

    def reset_connections():
        from kombu import pools

        pools.reset()  # closes every pooled connection and forgets the pools
        app._pool = None  # a new pool for the new broker
        app.amqp._producer_pool = None  # whose producers held the old pool's connections

    url = TEST_BROKER_URL
    app.conf.update(
        broker_url=url, broker_write_url=url, broker_read_url=url, broker_transport_options={}, result_backend=url
    )
    reset_connections()
    try:
        yield url
    finally:
        app.conf.update(saved)
        reset_connections()


@pytest.fixture
def celery_worker(transactional_db):
    """A real Celery worker (in a thread of this process, so it uses the test database) on a real broker:
    Redis at CELERY_TEST_BROKER_URL (default redis://127.0.0.1:6379/15), consuming every queue. Tests wait
    for a task's effect."""
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
