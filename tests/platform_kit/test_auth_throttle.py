"""Guessing is throttled per client address, for every process (the count is in the database): unknown API keys
(REST, MCP over HTTP, OTLP) past ACE_API_KEY_FAILURE_LIMIT a minute get 429 with Retry-After; wrong admin
passwords past ACE_LOGIN_ADDRESS_FAILURE_LIMIT from one address lock that address whatever the user names.
A neighbour's good key keeps working; other addresses are not touched."""

import json
import time

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from platform_kit.auth_throttle import API_WINDOW_SECONDS, _window, api_keys_unblock
from platform_kit.models import AuthFailureWindow
from sessions_app.services.apikeys import apikeys_forget

GUESSER, NEIGHBOUR_NAT, ELSEWHERE = "203.0.113.7", "203.0.113.7", "198.51.100.9"


@pytest.fixture(autouse=True)
def _one_window():
    """The failures are counted per window of a minute, aligned to the clock: a test that counts a few dozen of
    them starts in a window with time left, so its count is not cut in two by the turn of a minute."""
    _, left = _window(API_WINDOW_SECONDS)
    if left < 15:
        time.sleep(left + 0.1)


def guess(number: int, address: str = GUESSER, path: str = "/api/v1/sessions/"):
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer ace_{number:012x}_{'x' * 32}")
    return client.get(path)


def test_unknown_keys_past_the_limit_get_429_with_retry_after_from_every_process(api, settings):
    assert settings.ACE_API_KEY_FAILURE_LIMIT == 20
    statuses = [guess(n).status_code for n in range(20)]
    assert statuses == [401] * 20
    throttled = guess(20)
    assert throttled.status_code == 429
    assert 1 <= int(throttled["Retry-After"]) <= 60
    assert "Too many unknown API keys from this address" in throttled.json()["detail"]
    assert AuthFailureWindow.objects.get(scope="api", address=GUESSER).failures == 21

    # Another process has never seen this address: its first guess is counted, and refused as well.
    api_keys_unblock()
    assert guess(21).status_code == 429
    # Another address guesses as before.
    assert guess(22, address=ELSEWHERE).status_code == 401


def test_a_neighbours_good_key_keeps_working_and_waits_at_most_the_minute(api):
    neighbour = APIClient(REMOTE_ADDR=NEIGHBOUR_NAT)
    neighbour.credentials(HTTP_AUTHORIZATION=f"Bearer {api.key}")
    assert neighbour.get("/api/v1/sessions/").status_code == 200  # accepted a moment ago by this process
    for n in range(21):
        guess(n)
    assert neighbour.get("/api/v1/sessions/").status_code == 200
    apikeys_forget()  # a process that has not accepted the key lately: the address waits out the minute
    waiting = neighbour.get("/api/v1/sessions/")
    assert waiting.status_code == 429 and int(waiting["Retry-After"]) <= 60


def test_mcp_and_otlp_count_and_throttle_the_same_way(api):
    for n in range(20):
        guess(n)
    mcp = APIClient(REMOTE_ADDR=GUESSER).post(
        "/mcp/",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_AUTHORIZATION="Bearer ace_000000000099_nope",
    )
    assert mcp.status_code == 429 and int(mcp["Retry-After"]) >= 1
    otlp = APIClient(REMOTE_ADDR=GUESSER).post(
        "/v1/logs",
        data=b"{}",
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer ace_000000000098_nope",
    )
    assert otlp.status_code == 429 and int(otlp["Retry-After"]) >= 1


def test_the_limit_can_be_turned_off(api, settings):
    settings.ACE_API_KEY_FAILURE_LIMIT = 0
    assert {guess(n).status_code for n in range(25)} == {401}
    assert not AuthFailureWindow.objects.exists()


LOGIN = reverse("admin:login")


def login(username: str, password: str, address: str = GUESSER):
    client = APIClient(REMOTE_ADDR=address, enforce_csrf_checks=False)
    return client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})


def test_spraying_user_names_from_one_address_locks_that_address(auditor, settings):
    assert settings.ACE_LOGIN_ADDRESS_FAILURE_LIMIT == 30
    settings.ACE_LOGIN_ADDRESS_FAILURE_LIMIT = 8  # each wrong password costs a hash: keep the test quick
    statuses = {login(f"user{n}", "wrong").status_code for n in range(8)}  # each name well under axes' 5
    assert statuses == {200}
    assert login("user8", "wrong").status_code == 429
    assert login("auditor", "right-password").status_code == 429  # the whole address waits out the cool-off
    assert login("auditor", "right-password", address=ELSEWHERE).status_code == 302
