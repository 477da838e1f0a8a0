"""Secrets never reach the database: every write path of the sessions app redacts before it stores — the
messages API (content, tool calls, metadata, attachments), chat turns, session metadata, state, and the
importers (a real Claude Code log). Read back through the API and from the rows themselves."""

import json
from pathlib import Path

from ingest_app.models import ImportedFile
from ingest_app.pipeline import import_path
from sessions_app.models import Message, Session, StateVersion
from tests.support.agent_logs import DATA

CLAUDE = Path("claude_code/.claude/projects/-home-dev-weather/5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11.jsonl")

OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
SECRETS = (OPENAI_KEY, AWS_SECRET, BEARER.split()[1], "hunter2", "s3cr3t-db", "p4ss-phrase", "cr3ds", "k-123456")


def assert_no_secret(*values):
    text = json.dumps(values, ensure_ascii=False, default=str)
    leaked = [secret for secret in SECRETS if secret in text]
    assert leaked == [], f"{leaked} in {text[:2000]}"


def stored_rows(session) -> list[dict]:
    return list(
        Message.objects.filter(session=session)
        .order_by("seq")
        .values("content", "thinking", "tool_calls", "metadata", "attachments")
    )


def test_posted_messages_are_redacted_in_content_tool_calls_and_metadata(api, session):
    messages = [
        {"role": "user", "content": f"my OpenAI key is {OPENAI_KEY} and my password is hunter2"},
        {
            "role": "assistant",
            "content": "",
            "input_tokens": 120,
            "output_tokens": 30,
            "tool_calls": [
                {
                    "id": "c1",
                    "name": "http",
                    "arguments": {
                        "url": "https://api.example.com",
                        "headers": [{"name": "Authorization", "value": BEARER}, {"name": "Accept", "value": "json"}],
                        "env": {"aws_secret_access_key": AWS_SECRET, "db_pass": "s3cr3t-db"},
                        "max_tokens": 256,
                    },
                },
                # Arguments as OpenAI sends them: a JSON string, here after a newline and encoded twice.
                {
                    "id": "c2",
                    "name": "vault",
                    "arguments": "\n " + json.dumps(json.dumps({"passphrase": "p4ss-phrase"})),
                },
            ],
        },
        {
            "role": "toolResult",
            "tool_name": "http",
            "content": "connected to postgres://app:s3cr3t-db@db:5432/app\nAuthorization: " + BEARER,
            "metadata": {"request": {"credentials": {"user": "app", "password": "cr3ds"}}, "status": 200},
        },
    ]
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", messages, format="json")
    assert response.status_code == 201, response.content

    listed = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert_no_secret(listed, stored_rows(session))
    user, assistant, tool = stored_rows(session)
    assert user["content"] == "my OpenAI key is [REDACTED] and my password is [REDACTED]"
    arguments = assistant["tool_calls"][0]["arguments"]
    assert arguments["headers"] == [
        {"name": "Authorization", "value": "[REDACTED]"},
        {"name": "Accept", "value": "json"},
    ]
    assert arguments["env"] == {"aws_secret_access_key": "[REDACTED]", "db_pass": "[REDACTED]"}
    assert arguments["max_tokens"] == 256 and arguments["url"] == "https://api.example.com"
    assert json.loads(json.loads(assistant["tool_calls"][1]["arguments"])) == {"passphrase": "[REDACTED]"}
    assert "postgres://app:[REDACTED]@db:5432/app" in tool["content"]
    assert "Authorization: Bearer [REDACTED]" in tool["content"]
    assert tool["metadata"] == {
        "request": {"credentials": {"user": "[REDACTED]", "password": "[REDACTED]"}},
        "status": 200,
    }
    # the counts are untouched, and so is the session's usage
    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert (stats["input_tokens"], stats["output_tokens"], stats["messages"]) == (120, 30, 3)


def test_a_message_repeated_with_its_secret_is_the_same_message(api, session):
    item = {"role": "user", "content": "token: ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2, "external_id": "m-1"}
    url = f"/api/v1/sessions/{session.pk}/messages/"
    assert api.post(url, [item], format="json").status_code == 201
    assert api.post(url, [item], format="json").status_code in (200, 201)
    assert Message.objects.filter(session=session).count() == 1
    assert Message.objects.get(session=session).content == "token: [REDACTED]"


def test_chat_turns_are_redacted_at_every_step(api, session):
    started = api.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"content": "the db password is hunter2", "attachments": [{"name": "X-API-Key", "value": "k-123456"}]},
        format="json",
    ).json()
    turn = started["turn"]
    api.post(f"/api/v1/turns/{turn}/system-ready/", {"system_prompt": f"key={OPENAI_KEY}"}, format="json")
    assert api.patch(f"/api/v1/turns/{turn}/", {"content": f"using {OPENAI_KEY}"}, format="json").status_code == 200
    assert "[REDACTED]" in Message.objects.get(pk=started["assistant_message"]["id"]).content
    done = api.post(
        f"/api/v1/turns/{turn}/complete/",
        {
            "content": "Connected with postgres://app:s3cr3t-db@db/app",
            "thinking": f"the user gave {OPENAI_KEY}",
            "model": "m",
            "finish_reason": "stop",
            "input_tokens": 10,
            "output_tokens": 5,
            "elapsed_ms": 900,
            "tool_calls": [{"id": "t1", "name": "db", "arguments": {"dsn": "postgres://app:s3cr3t-db@db/app"}}],
        },
        format="json",
    )
    assert done.status_code == 200, done.content
    assert_no_secret(api.get(f"/api/v1/turns/{turn}/").json(), stored_rows(session))
    user = Message.objects.get(pk=started["user_message"]["id"])
    assert (user.content, user.thinking) == ("the db password is [REDACTED]", "key=[REDACTED]")


def test_session_name_and_metadata_are_redacted(api):
    created = api.post(
        "/api/v1/sessions/",
        {
            "name": f"debug {OPENAI_KEY}",
            "user_id": "xiaoming",
            "metadata": {"env": {"DB_PASS": "s3cr3t-db", "region": "eu"}},
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    session = Session.objects.get(pk=created.json()["id"])
    assert session.name == "debug [REDACTED]"
    assert session.metadata == {"env": {"DB_PASS": "[REDACTED]", "region": "eu"}}
    changed = api.patch(f"/api/v1/sessions/{session.pk}/", {"metadata": {"cookie": "sid=k-123456"}}, format="json")
    assert changed.status_code == 200
    assert_no_secret(changed.json(), Session.objects.filter(pk=session.pk).values("name", "metadata")[0])


def test_state_values_under_secret_keys_and_secret_looking_values_are_redacted(api, session):
    url = f"/api/v1/sessions/{session.pk}/state/"
    put = api.put(url, {"db": {"host": "db", "password": "hunter2"}, "stage": "deploy"}, format="json")
    assert put.status_code == 200, put.content
    body = json.dumps({"note": f"use {OPENAI_KEY}", "budget_tokens": 5000})
    patched = api.generic("PATCH", url, body, content_type="application/merge-patch+json")
    assert patched.status_code == 200, patched.content
    state = api.get(url).json()
    assert state["data"] == {
        "db": {"host": "db", "password": "[REDACTED]"},
        "stage": "deploy",
        "note": "use [REDACTED]",
        "budget_tokens": 5000,
    }
    assert_no_secret(list(StateVersion.objects.filter(session=session).values("data")))
    # the same secret again is no change: no new version
    again = api.put(url, state["data"] | {"db": {"host": "db", "password": "hunter2"}}, format="json").json()
    assert again["version"] == state["version"]


def test_an_imported_log_is_redacted_tool_inputs_and_results_included(api, tmp_path):
    lines = (DATA / CLAUDE).read_bytes().split(b"\n")
    for index, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the sample's deliberately broken lines stay as they are
        content = record.get("message", {}).get("content") if isinstance(record, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use" and block.get("name") == "WebFetch":
                block["input"]["headers"] = [["Authorization", BEARER]]
                block["input"]["env"] = {"AWS_SECRET_ACCESS_KEY": AWS_SECRET}
            if block.get("type") == "tool_result" and block.get("tool_use_id") == "toolu_01Fetch":
                block["content"] = f"晴 25°C (fetched with api_key={OPENAI_KEY})"
        lines[index] = json.dumps(record, ensure_ascii=False).encode()
    path = tmp_path / CLAUDE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join(lines))

    summary = import_path(tenant=api.tenant, path=path)
    assert summary.messages > 0
    session = Session.objects.get(tenant=api.tenant)
    rows = stored_rows(session)
    assert_no_secret(rows, list(ImportedFile.objects.values("carry")))
    fetch = next(row for row in rows if row["tool_calls"] and "WebFetch" in json.dumps(row["tool_calls"]))
    assert "[REDACTED]" in json.dumps(fetch["tool_calls"])
    assert any(row["content"] == "晴 25°C (fetched with api_key=[REDACTED])" for row in rows)
    # a second import of the grown file changes nothing that was stored redacted
    assert import_path(tenant=api.tenant, path=path).messages == 0
