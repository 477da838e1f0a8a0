"""The MCP server end to end, through the official SDK's own client: over streamable HTTP at /mcp/ (a live
server, Bearer key) and over stdio (`manage.py ace_mcp` spawned as the client's subprocess). The tools write and
read through the same services as the REST API, which the tests use to check what the tools did."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.memory_app import bulk_rows
from tests.support.api import make_client
from tests.support.database import table_renamed
from tests.support.factories import SessionFactory
from tests.support.processes import process_env

ROOT = Path(__file__).resolve().parent.parent.parent
TOOLS = {"remember", "recall", "forget", "context", "usage"}


class Mcp:
    """The SDK's client, connected anew for each use (one MCP connection each, closed after)."""

    def __init__(
        self,
        *,
        url: str | None = None,
        key: str | None = None,
        stdio: StdioServerParameters | None = None,
        mode: str = "auto",
    ):
        self.url, self.key, self.stdio, self.mode = url, key, stdio, mode

    def run(self, work):
        async def main():
            if self.stdio is not None:
                async with Client(self.stdio, mode=self.mode) as client:
                    return await work(client)
            headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
                transport = streamable_http_client(f"{self.url}/mcp/", http_client=http)
                async with Client(transport, mode=self.mode) as client:
                    return await work(client)

        return anyio.run(main)

    def tools(self) -> dict:
        async def work(client):
            return (await client.list_tools()).tools

        return {tool.name: tool for tool in self.run(work)}

    def call(self, tool: str, arguments: dict):
        async def work(client):
            return await client.call_tool(tool, arguments)

        return self.run(work)

    def read(self, uri: str) -> dict:
        async def work(client):
            try:
                return await client.read_resource(uri)
            except MCPError as error:  # raised here, outside the client's task group
                return error

        read = self.run(work)
        if isinstance(read, MCPError):
            raise read
        return json.loads(read.contents[0].text)


def answer(result) -> dict:
    """A successful tool result's JSON (the text block and the structured content agree)."""
    assert not result.is_error, result.content[0].text
    data = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


def error_text(result) -> str:
    assert result.is_error
    return result.content[0].text


@pytest.fixture
def ace(live_server, transactional_db):
    """Two tenants on a live server: acme with a session (messages, state), globex with nothing."""
    acme, globex = make_client("acme"), make_client("globex")
    session = SessionFactory(tenant=acme.tenant, name="杭州三日游计划", tool="chat", user_id="xiaoming")
    posted = acme.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        [
            {"role": "user", "content": "I'm planning three days in Hangzhou", "created_at": "2026-03-01T09:15:00Z"},
            {
                "role": "assistant",
                "content": "West Lake first, then Lingyin temple.",
                "auth_type": "k",
                "model": "qwen-max",
                "input_tokens": 120,
                "output_tokens": 30,
                "created_at": "2026-03-01T09:15:02Z",
            },
        ],
        format="json",
    )
    assert posted.status_code == 201
    assert acme.put(f"/api/v1/sessions/{session.pk}/state/", {"city": "Hangzhou"}, format="json").status_code == 200
    return {"url": live_server.url, "acme": acme, "globex": globex, "session": session}


def test_tools_over_http_remember_recall_forget(ace):
    acme, session = ace["acme"], ace["session"]

    mcp = Mcp(url=ace["url"], key=acme.key)
    tools = mcp.tools()
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description) > 200  # written for a model: when to call it, what comes back
    assert "before answering" in tools["recall"].description
    assert tools["remember"].input_schema["required"] == ["content", "user_id"]

    stored = answer(
        mcp.call(
            "remember",
            {
                "content": "Prefers window seats on long flights",
                "user_id": "xiaoming",
                "type": "profile",
                "session": str(session.pk),
            },
        )
    )
    record = stored["record"]
    assert stored["created"] is True
    assert record["valid"] is True and record["type"] == "profile"
    assert record["source_session_ids"] == [str(session.pk)]
    via_api = acme.get(f"/api/v1/records/{record['id']}/").json()
    assert via_api["content"] == "Prefers window seats on long flights"
    assert acme.get(f"/api/v1/records/{record['id']}/history/").json()["results"][0]["actor"] == "mcp"

    found = answer(mcp.call("recall", {"query": "window seat flights", "user_id": "xiaoming"}))
    assert found["results"][0]["id"] == record["id"]
    assert found["results"][0]["kind"] == "record"
    api_found = acme.post("/api/v1/recall/", {"query": "window seat flights", "user_id": "xiaoming"}, format="json")
    assert [hit["id"] for hit in found["results"]] == [hit["id"] for hit in api_found.json()["results"]]

    forgotten = answer(mcp.call("forget", {"record_id": record["id"], "reason": "user now prefers the aisle"}))
    assert forgotten["record"]["valid"] is False
    assert forgotten["record"]["invalidated_reason"] == "user now prefers the aisle"
    again = answer(mcp.call("recall", {"query": "window seat flights", "user_id": "xiaoming"}))
    assert record["id"] not in [hit["id"] for hit in again["results"]]
    kept = acme.get(f"/api/v1/records/{record['id']}/")
    assert kept.status_code == 200 and kept.json()["valid"] is False  # kept for audit
    assert "kept for audit" in error_text(mcp.call("forget", {"record_id": record["id"]}))


def test_context_usage_and_state_with_the_initialize_handshake(ace):
    """mode="legacy": the initialize handshake of the 2025 protocol, as Claude Code and Qwen Code speak it."""
    acme, session = ace["acme"], ace["session"]
    mcp = Mcp(url=ace["url"], key=acme.key, mode="legacy")
    answer(mcp.call("remember", {"content": "Travels with a vegetarian partner", "user_id": "xiaoming"}))

    block = answer(mcp.call("context", {"session": str(session.pk), "query": "vegetarian food in Hangzhou"}))
    assert block["state"] == {"city": "Hangzhou"} and block["state_version"] == 1
    assert "Travels with a vegetarian partner" in block["prompt"]
    assert "## Where this session stands (state v1)" in block["prompt"]
    api_block = acme.get(f"/api/v1/sessions/{session.pk}/context/", {"query": "vegetarian food in Hangzhou"}).json()
    assert block["prompt"] == api_block["prompt"]

    window = {"since": "2026-03-01T00:00:00Z", "until": "2026-03-03T00:00:00Z", "group_by": "model"}
    used = answer(mcp.call("usage", window))
    api_used = acme.get("/api/v1/stats/", window).json()
    assert used["totals"] == api_used["totals"]
    assert used["results"] == api_used["results"]
    assert used["totals"]["input_tokens"] == 120 and used["totals"]["requests"] == 1
    assert "qwen-max" in [row["key"] for row in used["results"]]

    state = mcp.read(f"ace://sessions/{session.pk}/state")
    assert state == acme.get(f"/api/v1/sessions/{session.pk}/state/").json()
    assert state["version"] == 1 and state["data"] == {"city": "Hangzhou"}
    acme.patch(f"/api/v1/sessions/{session.pk}/state/", {"day": 2}, format="json")
    history = mcp.read(f"ace://sessions/{session.pk}/state/history")
    assert [(v["version"], v["data"]) for v in history["results"]] == [
        (2, {"city": "Hangzhou", "day": 2}),
        (1, {"city": "Hangzhou"}),
    ]


def test_usage_shows_a_users_plan_windows(ace):
    """window 'blocks': the user's 5-hour blocks with the percent of their plan, as GET /api/v1/usage/blocks/;
    window 'weekly': their weeks, as GET /api/v1/usage/weekly/."""
    acme = ace["acme"]
    assert acme.post("/api/v1/plans/", {"preset": "pro"}, format="json").status_code == 201
    mcp = Mcp(url=ace["url"], key=acme.key)
    query = {"user_id": "xiaoming", "since": "2026-03-01T00:00:00Z", "until": "2026-03-02T00:00:00Z"}
    blocks = answer(mcp.call("usage", {**query, "window": "blocks"}))
    api_blocks = acme.get("/api/v1/usage/blocks/", query).json()
    assert {**blocks, "now": None} == {**api_blocks, "now": None}
    [block] = blocks["results"]
    assert (block["start_time"], block["end_time"]) == ("2026-03-01T09:00:00.000000Z", "2026-03-01T14:00:00.000000Z")
    assert block["plan_usage"]["tokens"] == 150 and block["plan_usage"]["token_limit"] == 19_000
    weekly = answer(mcp.call("usage", {**query, "window": "weekly"}))
    assert [(week["week"], week["input_tokens"]) for week in weekly["results"]] == [("2026-03-01", 120)]
    assert "window: use one of blocks, weekly" in error_text(mcp.call("usage", {**query, "window": "monthly"}))
    assert "user_id" in error_text(mcp.call("usage", {"window": "blocks"}))


def test_another_tenants_objects_are_not_found(ace):
    acme, globex, session = ace["acme"], ace["globex"], ace["session"]
    owner, intruder = Mcp(url=ace["url"], key=acme.key), Mcp(url=ace["url"], key=globex.key)
    record = answer(owner.call("remember", {"content": "Allergic to peanuts", "user_id": "xiaoming"}))["record"]
    nowhere = str(uuid.uuid4())

    found = answer(intruder.call("recall", {"query": "peanuts allergy", "user_id": "xiaoming"}))
    assert found["results"] == []
    for tool, arguments, missing in [
        ("recall", {"query": "peanuts", "user_id": "xiaoming", "session": "{id}"}, "Session {id} not found."),
        ("context", {"session": "{id}"}, "Session {id} not found."),
        ("forget", {"record_id": "{id}"}, "Record {id} not found."),
        ("remember", {"content": "x", "user_id": "xiaoming", "session": "{id}"}, "Session {id} not found."),
    ]:
        theirs = session.pk if "record_id" not in arguments else record["id"]
        for target in (str(theirs), nowhere):
            filled = {key: value.replace("{id}", target) for key, value in arguments.items()}
            assert missing.replace("{id}", target) in error_text(intruder.call(tool, filled))
    with pytest.raises(MCPError, match="not found"):
        intruder.read(f"ace://sessions/{session.pk}/state")

    usage = answer(intruder.call("usage", {"since": "2026-03-01T00:00:00Z", "until": "2026-03-03T00:00:00Z"}))
    assert usage["results"] == [] and usage["totals"]["messages"] == 0 and usage["totals"]["input_tokens"] == 0
    assert acme.get(f"/api/v1/records/{record['id']}/").json()["valid"] is True  # the intruder's forget did nothing


def test_bad_arguments_are_tool_errors_that_say_what_to_fix(ace):
    acme, session = ace["acme"], ace["session"]
    mcp = Mcp(url=ace["url"], key=acme.key)
    cases = [
        (
            "recall",
            {"query": "x", "user_id": "u", "top_k": 500},
            "top_k: Ensure this value is less than or equal to 100",
        ),
        ("recall", {"query": "x", "user_id": "u", "since": "last week"}, "since: Datetime has wrong format"),
        ("context", {"session": "not-a-uuid"}, "session: Must be a valid UUID"),
        ("context", {"session": str(session.pk), "top_k": 0}, "top_k: Ensure this value is greater than or equal to 1"),
        ("usage", {"group_by": "week"}, 'group_by: "week" is not a valid choice'),
        ("usage", {"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "until: Must be after"),
        ("remember", {"content": "x", "user_id": "u", "type": "hobby"}, '"hobby" is not a record type. Use one of'),
        ("remember", {"content": "x", "user_id": "u", "confidence": 3}, "confidence: Ensure this value is less"),
        ("forget", {"record_id": "42"}, "record_id: Must be a valid UUID"),
    ]
    for tool, arguments, expected in cases:
        assert expected in error_text(mcp.call(tool, arguments)), (tool, arguments)
    assert acme.get("/api/v1/records/").json()["results"] == []  # nothing half-written


def test_tool_errors_say_which_tool_failed_and_what_to_do(ace):
    """Never the SDK's bare "Error executing tool recall": the tool, then what is wrong in words a model can act
    on: the argument to fix, the object not found, or (for a crash) the request id it is logged under."""
    mcp = Mcp(url=ace["url"], key=ace["acme"].key)
    cases = [
        ("recall", {"query": "x"}, "recall failed: user_id is required. Fix the arguments and call again."),
        ("recall", {"user_id": "u"}, "recall failed: query is required. Fix the arguments and call again."),
        ("recall", {"query": "x", "user_id": "u", "top_k": "many"}, "recall failed: top_k: Input should be a valid"),
        ("forget", {}, "forget failed: record_id is required."),
        ("context", {"session": str(uuid.UUID(int=7))}, f"context failed: Session {uuid.UUID(int=7)} not found."),
        ("usage", {"group_by": "week"}, 'usage failed: Invalid input. group_by: "week" is not a valid choice'),
    ]
    for tool, arguments, expected in cases:
        text = error_text(mcp.call(tool, arguments))
        assert text.startswith(expected), (tool, arguments, text)
        assert "Error executing tool" not in text and "pydantic" not in text


def test_a_tool_that_crashes_names_the_request_id_it_is_logged_under(ace, caplog):
    """An unexpected failure (here the messages' vector table gone, as in a half-applied migration) tells the
    model what failed and the request id; the server logs the traceback under that id."""
    mcp = Mcp(url=ace["url"], key=ace["acme"].key)
    with table_renamed("memory_app_messageembedding"), caplog.at_level(logging.ERROR):
        text = error_text(mcp.call("recall", {"query": "West Lake", "user_id": "xiaoming"}))
    assert text.startswith("recall failed: an unexpected error in Open ACE (request id ")
    assert "try again" in text and "Error executing tool" not in text
    request_id = re.search(r"request id ([0-9a-f]{32})", text).group(1)
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback, under the id the model was given
    assert "memory_app_messageembedding" in str(logged[0].exc_info[1])
    assert answer(mcp.call("recall", {"query": "West Lake", "user_id": "xiaoming"}))["results"]  # back once fixed


def test_recall_of_a_user_with_3000_messages(ace):
    """Past ACE_RECALL_EXACT_UP_TO (2,000) message vectors the shortlist ranks them; it used to fail."""
    acme = ace["acme"]
    bulk_rows.vector_index_skipped()
    bulk_rows.chat_messages(acme.tenant, "heavy", [bulk_rows.sentence(n) for n in range(3000)])
    query = {"query": "Which tea house in Kyoto did I visit with my sister?", "user_id": "heavy"}
    found = answer(Mcp(url=ace["url"], key=acme.key).call("recall", query))
    assert "tea house in Kyoto with my sister" in found["results"][0]["text"]
    via_api = acme.post("/api/v1/recall/", query, format="json").json()
    assert [hit["id"] for hit in found["results"]] == [hit["id"] for hit in via_api["results"]]


def _post(url: str, body, **headers):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **headers}
    return httpx2.post(url, content=json.dumps(body), headers=headers, timeout=30)


def test_http_needs_a_valid_key_and_answers_only_post(ace):
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    missing = _post(f"{ace['url']}/mcp/", listing)
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer <api key>" in missing.json()["detail"]
    wrong = _post(f"{ace['url']}/mcp/", listing, Authorization="Bearer ace_0123456789ab_nope")
    assert wrong.status_code == 401 and wrong.json()["detail"] == "Unknown or revoked API key."
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's client cannot even connect without a key
        Mcp(url=ace["url"], key=None).tools()
    assert refused.group_contains(MCPError, depth=None)

    key = {"Authorization": f"Bearer {ace['acme'].key}"}
    for path in ("/mcp/", "/mcp"):  # a plain JSON-RPC POST, no handshake: the server keeps no session
        listed = _post(f"{ace['url']}{path}", listing, **key)
        assert listed.status_code == 200, listed.text
        assert {tool["name"] for tool in listed.json()["result"]["tools"]} == TOOLS
        assert "mcp-session-id" not in listed.headers
        assert listed.headers["X-Content-Type-Options"] == "nosniff"  # through Django's middleware
    for method in ("GET", "DELETE"):
        refused = httpx2.request(method, f"{ace['url']}/mcp/", headers={"Accept": "text/event-stream", **key})
        assert refused.status_code == 405 and refused.headers["Allow"] == "POST"
    broken = httpx2.post(
        f"{ace['url']}/mcp/",
        content=b"{not json",
        headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **key},
    )
    assert 400 <= broken.status_code < 500


def _stdio_env(key: str) -> dict:
    return process_env(ACE_API_KEY=key)


def test_tools_over_stdio(transactional_db):
    acme = make_client("acme")
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "ace_mcp"], env=_stdio_env(acme.key), cwd=str(ROOT)
    )
    mcp = Mcp(stdio=params)
    tools = mcp.tools()
    assert set(tools) == TOOLS

    async def round_trip(client):
        stored = await client.call_tool(
            "remember", {"content": "Runs 10 km every Sunday", "user_id": "alice", "type": "profile"}
        )
        found = await client.call_tool("recall", {"query": "running on Sunday", "user_id": "alice"})
        return answer(stored), answer(found)

    stored, found = mcp.run(round_trip)
    assert stored["created"] is True
    assert found["results"][0]["id"] == stored["record"]["id"]
    via_api = acme.get(f"/api/v1/records/{stored['record']['id']}/").json()
    assert via_api["content"] == "Runs 10 km every Sunday" and via_api["user_id"] == "alice"
    assert make_client("globex").get(f"/api/v1/records/{stored['record']['id']}/").status_code == 404


@pytest.mark.parametrize("key", ["", "ace_0123456789ab_unknown"])
def test_stdio_refuses_to_start_without_a_valid_key(transactional_db, key):
    done = subprocess.run(
        [sys.executable, "manage.py", "ace_mcp"],
        cwd=ROOT,
        env=_stdio_env(key),
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stdout == ""  # stdout carries only the protocol
    assert len(done.stderr.strip().splitlines()) == 1
    assert "ACE_API_KEY" in done.stderr
