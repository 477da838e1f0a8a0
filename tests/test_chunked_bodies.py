"""A request body sent with `Transfer-Encoding: chunked` (no Content-Length) is read whole under gunicorn, as the
Procfile serves the web: Claude Code's OpenTelemetry exporter sends its bodies that way, and Django alone would
read them as empty (an export answered 200 with nothing stored)."""

import http.client
import json

import pytest

from sessions_app.models import Session
from tests.ingest_app.test_otlp_recorded import RECORDED
from tests.support.api import make_client
from tests.support.processes import gunicorn_serving

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gunicorn(settings):
    with gunicorn_serving(ACE_MAX_REQUEST_BYTES=str(64 * 1024)) as port:
        yield port


def _post_chunked(port: int, path: str, chunks: list[bytes], headers: dict) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("POST", path, body=iter(chunks), headers=headers, encode_chunked=True)
    response = connection.getresponse()
    status, body = response.status, response.read()
    connection.close()
    return status, body


def test_chunked_bodies_are_read_whole_under_gunicorn(gunicorn):
    acme = make_client("acme")
    body = (RECORDED / "logs.pb").read_bytes()
    chunks = [body[i : i + 300] for i in range(0, len(body), 300)]  # as Node's client streams it
    headers = {"Authorization": f"Bearer {acme.key}", "Content-Type": "application/x-protobuf"}
    status, _ = _post_chunked(gunicorn, "/v1/logs", chunks, headers)
    assert status == 200
    session = Session.objects.get(tenant=acme.tenant, agent_session_id="e7937e75-cda1-4c1b-8b9f-fed9ceae685d")
    assert (session.requests, session.message_user, session.message_assistant) == (1, 1, 1)

    # The REST API reads chunked JSON the same way.
    created = json.dumps({"user_id": "xiaoming", "name": "chunked"}).encode()
    status, answer = _post_chunked(
        gunicorn,
        "/api/v1/sessions/",
        [created[:10], created[10:]],
        {"Authorization": f"Bearer {acme.key}", "Content-Type": "application/json"},
    )
    assert status == 201, answer
    assert json.loads(answer)["name"] == "chunked"

    # Past the size limit: 413 with what is wrong, and nothing read into memory beyond it.
    status, answer = _post_chunked(gunicorn, "/v1/logs", [b"x" * 40_000, b"x" * 40_000], headers)
    assert status == 413
    assert "larger than 65536 bytes" in json.loads(answer)["detail"]
