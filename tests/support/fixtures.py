"""The fixtures many test modules use, registered once for the whole suite by tests/conftest.py
(`pytest_plugins`): a module asks for them by name and defines none of its own."""

from __future__ import annotations

import socket

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.api import TenantClient, make_client
from tests.support.factories import SessionFactory
from tests.support.fake_dns import FakeDNS


@pytest.fixture
def api(db) -> TenantClient:
    """The tenant acme's API client."""
    return make_client("acme")


@pytest.fixture
def other_api(db) -> TenantClient:
    """Another tenant's (globex): what acme must never see."""
    return make_client("globex")


@pytest.fixture
def session(api):
    """A chat session of acme's."""
    return SessionFactory(tenant=api.tenant, name="杭州三日游计划", tool="chat", user_id="xiaoming")


@pytest.fixture
def auditor(django_user_model):
    """A superuser, `auditor`, whose password is `right-password`."""
    return django_user_model.objects.create_superuser("auditor", "auditor@example.com", "right-password")


@pytest.fixture
def staff(client, auditor):
    """Django's test client, logged in to the admin as the auditor."""
    client.force_login(auditor)
    return client


@pytest.fixture
def resolver(monkeypatch) -> FakeDNS:
    """socket.getaddrinfo answering the names a test sets from a table (the others from the system's resolver)."""
    dns = FakeDNS(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    return dns


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


@pytest.fixture
def stand_in():
    """A stand-in OpenAI and Anthropic upstream on loopback, serving for the test (tests/support/stand_in_upstream.py:
    `.openai_base_url`, `.anthropic_base_url`, `.received`, behaviour by the model name or `X-Stand-In`)."""
    from tests.support.stand_in_upstream import StandInUpstream

    with StandInUpstream() as upstream:
        yield upstream


@pytest.fixture
def gateway(transactional_db):
    """The LLM gateway served for real on loopback (tests.support.gateway)."""
    from tests.support.gateway import GatewayServer

    server = GatewayServer()
    yield server
    server.close()
