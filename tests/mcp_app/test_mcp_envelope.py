"""A JSON-RPC request whose id is an object, an array, a boolean, a fraction or null is an Invalid Request
(-32600, answered with id null), over HTTP and over stdio; the SDK alone took it for a notification and
answered nothing. Requests with a string or an integer id are served as before."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.api import make_client
from tests.support.processes import process_env

ROOT = Path(__file__).resolve().parent.parent.parent
BAD_IDS = [{"a": 1}, [1], True, None, 1.5]
INITIALIZE = {
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _post(client, key: str, body) -> object:
    return client.post(
        "/mcp/",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )


@pytest.mark.parametrize("bad_id", BAD_IDS, ids=["object", "array", "boolean", "null", "fraction"])
def test_http_answers_an_unreadable_id_with_invalid_request(client, transactional_db, bad_id):
    acme = make_client("acme")
    answer = _post(client, acme.key, {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"})
    assert answer.status_code == 400
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32600 and "id must be a string or an integer" in body["error"]["message"]


def test_http_still_serves_string_and_integer_ids(client, transactional_db):
    acme = make_client("acme")
    for good_id in (7, "seven"):
        answer = _post(client, acme.key, {"jsonrpc": "2.0", "id": good_id, "method": "tools/list"})
        assert answer.status_code == 200, answer.content
        assert answer.json()["id"] == good_id and answer.json()["result"]["tools"]


def _line(process: subprocess.Popen, deadline: float) -> dict:
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            assert line, f"ace_mcp ended: {process.stderr.read() if process.poll() is not None else ''}"
            return json.loads(line)
    raise AssertionError("no answer from ace_mcp within the deadline")


def test_stdio_answers_an_unreadable_id_with_invalid_request_and_goes_on(transactional_db):
    acme = make_client("acme")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "ace_mcp"],
        cwd=ROOT,
        env=process_env(ACE_API_KEY=acme.key),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        for bad_id in BAD_IDS:
            process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"}) + "\n")
            process.stdin.flush()
            answer = _line(process, deadline)
            assert answer["id"] is None and answer["error"]["code"] == -32600, answer
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, **INITIALIZE}) + "\n")
        process.stdin.flush()
        initialized = _line(process, deadline)
        assert initialized["id"] == 1 and initialized["result"]["serverInfo"], initialized
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
