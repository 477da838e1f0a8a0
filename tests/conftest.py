import contextlib
import http.server
import socket

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.test import APIClient

from sessions_app.models import Tenant
from tests.factories import SessionFactory, api_key_for
from tests.fake_dns import FakeDNS
from tests.parallel import pytest_xdist_setupnodes, real_broker_url  # noqa: F401 - a hook, for pytest

# Test servers answer at once: Django's live server and the fakes built on http.server write a response's headers
# and body in two sends, and with Nagle's algorithm on, the body waited for the client's delayed ACK of the headers
# (about 40 ms a response on Linux): tests/test_api_fuzz.py, thousands of requests, took 278 s instead of 52 s.
http.server.BaseHTTPRequestHandler.disable_nagle_algorithm = True


class TenantClient(APIClient):
    """An API client that acts for one tenant."""

    def __init__(self, tenant: Tenant, key: str):
        super().__init__()
        self.tenant = tenant
        self.key = key
        self.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")


def make_client(name: str) -> TenantClient:
    key = api_key_for(name)
    return TenantClient(Tenant.objects.get(name=name), key)


@contextlib.contextmanager
def table_renamed(table: str):
    """The table is missing while inside (renamed, then back): an unexpected failure of a real request, as in a
    half-applied migration. For live-server and transactional tests (the rename is committed)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")


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


@pytest.fixture
def resolver(monkeypatch) -> FakeDNS:
    """socket.getaddrinfo answering the names a test sets from a table (the others from the system's resolver)."""
    dns = FakeDNS(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    return dns


@pytest.fixture
def api(db) -> TenantClient:
    return make_client("acme")


@pytest.fixture
def other_api(db) -> TenantClient:
    return make_client("globex")


@pytest.fixture
def session(api):
    return SessionFactory(tenant=api.tenant, name="杭州三日游计划", tool="chat", user_id="xiaoming")


TEST_BROKER_URL = real_broker_url()  # CELERY_TEST_BROKER_URL, one database per xdist worker (tests/parallel.py)


def on_test_broker():
    """This process publishes to the test broker (Redis at CELERY_TEST_BROKER_URL) while inside."""
    from tests.burst import broker_swapped

    return broker_swapped(TEST_BROKER_URL, result_backend=TEST_BROKER_URL)


@pytest.fixture
def burst(transactional_db):
    """The tasks this test queues wait in memory; `burst()` runs them here, as a worker would, until none is left
    (tests/burst.py). Transactional: tasks are queued on commit, and run in transactions of their own."""
    from tests.burst import bursting

    with bursting() as runner:
        yield runner


@pytest.fixture
def celery_worker(transactional_db):
    """A real Celery worker (in a thread of this process, so it uses the test database) on a real broker:
    Redis at TEST_BROKER_URL, consuming every queue. Tests wait for a task's effect. For the tests whose point is
    the worker or the broker; the others run their tasks with `burst` (tests/burst.py)."""
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


# The global provider can be set only once per process: keep the exporter we attached to it here.
_holder: dict[str, InMemorySpanExporter] = {}


@pytest.fixture(scope="session")
def _exporter() -> InMemorySpanExporter:
    if "exporter" not in _holder:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _holder["exporter"] = exporter
    return _holder["exporter"]


@pytest.fixture
def spans(_exporter: InMemorySpanExporter):
    """Returns a callable giving the spans finished since the test started, by name."""
    _exporter.clear()

    def finished() -> dict[str, ReadableSpan]:
        return {span.name: span for span in _exporter.get_finished_spans()}

    return finished
