"""A server error is answered with the request id it is logged under, and counted on /healthz for every process
(the count is kept in the database), without turning /healthz into a 503."""

import logging
import re

from django.test import Client

from tests.support.api import make_client
from tests.support.database import table_renamed

QUERY = {"query": "West Lake", "user_id": "xiaoming"}


def test_a_server_error_names_its_request_id_and_is_counted_on_healthz(transactional_db, caplog):
    """Served as in production (autocommit, no test transaction around the request)."""
    api = make_client("acme")
    before = Client().get("/healthz").json()["errors"]
    assert before["server_errors_5xx"] == 0 and before["last"] is None
    # (a real, unexpected failure: the vector table missing, as in a half-applied migration)

    api.raise_request_exception = False
    with table_renamed("memory_app_messageembedding"), caplog.at_level(logging.ERROR):
        failed = api.post("/api/v1/recall/", QUERY, format="json")
        again = api.post("/api/v1/recall/", QUERY, format="json")
    assert failed.status_code == 500
    request_id = failed["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id)
    body = failed.json()
    assert body["request_id"] == request_id and f"request id {request_id}" in body["detail"]
    assert "memory_app_messageembedding" not in body["detail"]  # the cause stays on the server
    logged = [r for r in caplog.records if r.name == "django.request" and request_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback, under the id the client was given

    assert again.status_code == 500 and again["X-Request-ID"] != request_id

    health = Client().get("/healthz")
    assert health.status_code == 200, health.content  # past errors are reported, not a reason to go out of service
    errors = health.json()["errors"]
    assert errors["server_errors_5xx"] == 2
    assert errors["last"]["request_id"] == again["X-Request-ID"]
    assert errors["last"]["path"] == "/api/v1/recall/" and errors["last"]["status"] == 500
    assert errors["since"] <= errors["last"]["at"]


def test_client_errors_are_not_counted(api):
    assert api.post("/api/v1/recall/", {"query": "x"}, format="json").status_code == 400
    assert api.get("/api/v1/sessions/not-a-uuid/").status_code == 404
    assert Client().get("/healthz").json()["errors"]["server_errors_5xx"] == 0


def test_every_answer_has_a_request_id_and_a_clients_own_is_kept(api):
    mine = api.get("/api/v1/sessions/", HTTP_X_REQUEST_ID="chat-app:42")
    assert mine["X-Request-ID"] == "chat-app:42"
    odd = api.get("/api/v1/sessions/", HTTP_X_REQUEST_ID="no spaces or <tags> please")
    assert re.fullmatch(r"[0-9a-f]{32}", odd["X-Request-ID"])
    assert re.fullmatch(r"[0-9a-f]{32}", Client().get("/healthz")["X-Request-ID"])
    assert api.get("/api/v1/sessions/")["X-Request-ID"] != api.get("/api/v1/sessions/")["X-Request-ID"]
