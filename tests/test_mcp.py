"""The MCP server end to end, through the official SDK's own client: over streamable HTTP at /mcp/ (a live
server, Bearer key) and over stdio (`manage.py ace_mcp` spawned as the client's subprocess). The tools write and
read through the same services as the REST API, which the tests use to check what the tools did."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import make_client
from tests.factories import SessionFactory

ROOT = Path(__file__).resolve().parent.parent
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
            return await client.read_resource(uri)

        return json.loads(self.run(work).contents[0].text)


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
