"""Many machines, one place: the push client (ingest_app/push_client.py, also scripts/ace-push.py) against a
real server (pytest-django's live_server) with real API keys, the upload endpoint's append semantics, and
sessions, stats and the admin by machine.

The logs are copies of the importers' samples (tests/agent_logs.py: real record shapes), dated an hour back so
that every import reads them through (no response waits for the file to go idle).
"""

from __future__ import annotations

import ast
import io
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from ingest_app import push_client, push_rules
from ingest_app.api.imports import clean_relative_path
from ingest_app.importers import registry
from ingest_app.importers.detect import is_log_name
from ingest_app.models import ImportedFile
from ingest_app.pipeline import import_path, local_machine
from sessions_app.models import Message, Session, Tenant
from sessions_app.schema import MACHINE_PATTERN
from sessions_app.selectors.recount import rollup_drift
from tests.ingest_app.test_imports import COUNTERS
from tests.support.agent_logs import DATA
from tests.support.api import TenantClient
from tests.support.factories import api_key_for
from tests.support.http import FakeServer

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ace-push.py"
QWEN = Path("qwen_code/.qwen/projects/-home-dev-weather/chats/8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12.jsonl")
QWEN_NAME = ".qwen/projects/-home-dev-weather/chats/8e6b3f2a-51c4-4d7e-a9b0-c2d4e6f80a12.jsonl"


def copy_logs(home: Path) -> Path:
    """A machine's home: a copy of the sample logs (garbage included), an hour old."""
    shutil.copytree(DATA, home)
    past = time.time() - 3600
    for path in home.rglob("*"):
        os.utime(path, (past, past))
    return home


def line_start(data: bytes, line: int) -> int:
    offset = 0
    for _ in range(line - 1):
        offset = data.index(b"\n", offset) + 1
    return offset


def options(server: str, key: str, machine: str, paths, state: Path, **extra) -> push_client.Options:
    return push_client.Options(
        server=server, key=key, machine=machine, paths=[str(p) for p in paths], state_dir=state, **extra
    )


def push(opts, **kwargs) -> push_client.PushResult:
    return push_client.push_once(opts, log_name=is_log_name, sleep=lambda seconds: None, **kwargs)


def counters(body: dict) -> dict:
    return {name: body[name] for name in COUNTERS}


@pytest.fixture
def ace(live_server, transactional_db, settings, tmp_path):
    """A live server keeping uploads under tmp_path, a tenant's API client and key, another tenant's."""
    settings.ACE_DATA_DIR = tmp_path / "server"
    key = api_key_for("acme")
    other_key = api_key_for("globex")
    return {
        "url": live_server.url,
        "key": key,
        "api": TenantClient(Tenant.objects.get(name="acme"), key),
        "other_key": other_key,
        "other_api": TenantClient(Tenant.objects.get(name="globex"), other_key),
    }


def local_totals(tmp_path: Path, machine: str) -> dict:
    """The counters of the same logs imported locally (`import_path`) into a tenant of their own."""
    tenant = Tenant.objects.create(name=f"local-{machine}")
    import_path(tenant=tenant, path=copy_logs(tmp_path / f"local-{machine}"), machine=machine)
    client = TenantClient(tenant, api_key_for(tenant.name))
    return counters(client.get("/api/v1/stats/", {"group_by": "machine"}).json()["totals"])


# -- the client's copies of the server's rules ----------------------------------------------------------


NAMES = [
    "/home/dev/.claude/projects/-home-dev-app/5f0c2a9e.jsonl",
    "/home/dev/.claude/projects/-home-dev-app/5f0c2a9e/subagents/agent-a1.jsonl",
    "/home/dev/.claude/projects/-home-dev-app/5f0c2a9e/subagents/agent-a1.meta.json",
    "/home/dev/.qwen/projects/-home-dev-app/chats/8e6b.jsonl",
    "/home/dev/.openclaw/agents/main/sessions/0f3a.jsonl",
    "/home/dev/.openclaw/agents/main/sessions/sessions.json",
    "/home/dev/.codex/sessions/2025/09/10/rollout-2025-09-10T10-00-00-abc.jsonl",
    "/home/dev/notes.txt",
    "/home/dev/settings.json",
    "/home/dev/.claude/settings.json",
    "backup/x.jsonl",
    "x.jsonl.bak",
    "/h/.openclaw/agents/main/sessions/0f3a.jsonl.reset.2026-02-01T10-00-00.000Z",
    "/h/.openclaw/agents/main/sessions/0f3a.jsonl.deleted.2026-02-01T10-00-00.000Z",
    "/h/.openclaw/agents/main/sessions/0f3a.jsonl.reset.2026-02-01T10-00-00.000Z.zst",
    "/h/.openclaw/agents/main/sessions/0f3a.checkpoint.c0ffee12-3456-4789-8abc-def012345678.jsonl",
    "/h/.openclaw/agents/main/sessions/0f3a.trajectory.jsonl",
    "/h/elsewhere/0f3a.trajectory.jsonl",
    "/h/.gemini/tmp/5a1b/chats/session-2025-09-10T10-00-abc.json",
    "/h/.gemini/tmp/5a1b/chats/session-2025-09-10T10-00-abc.jsonl",
    "/h/.qwen/tmp/5a1b/chats/session-1.json",
    "/h/.gemini/settings.json",
    "/h/.gemini/tmp/5a1b/logs.json",
]


def test_the_clients_tool_layouts_are_written_from_the_registry():
    """The push client is one standalone file: its copy of the tools' layouts is written from the registry
    (`manage.py ace_push_rules`), and this fails when they drift."""
    assert push_rules.written() == push_rules.render(), "run manage.py ace_push_rules"
    rules = registry.push_rules()
    assert {name: getattr(push_client, name) for name in rules} == rules
    assert {"~/.claude/projects", "~/.codex/sessions"} <= set(rules["DEFAULT_PATHS"])
    drifted = push_rules.PUSH_CLIENT.read_text(encoding="utf-8").replace('    "~/.codex/sessions",\n', "", 1)
    assert push_rules.written(drifted) != push_rules.render()
    out = io.StringIO()
    call_command("ace_push_rules", "--check", stdout=out)
    assert "are the registry's" in out.getvalue()


@pytest.mark.parametrize("name", NAMES)
def test_the_clients_log_name_rules_agree_with_the_servers(name):
    assert push_client.is_log_name(name) == is_log_name(name)


def test_the_clients_machine_and_path_rules_are_the_servers():
    assert push_client.MACHINE_PATTERN == MACHINE_PATTERN
    assert local_machine() == push_client.default_machine_name()
    root = Path("/srv/backup")
    for path in [
        "/srv/backup/old laptop/.claude/projects/-home-dev-a b/s:1.jsonl",
        "/srv/backup/seed/weather openclaw.jsonl",
    ]:
        name = push_client.upload_name(Path(path), root)
        assert clean_relative_path(name) == name
    assert push_client.upload_name(Path("/srv/backup/old laptop/.claude/projects/p/s.jsonl"), root) == (
        ".claude/projects/p/s.jsonl"
    )


def test_the_script_needs_only_the_standard_library():
    tree = ast.parse(SCRIPT.read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported - set(sys.stdlib_module_names) == {"__future__"} - set(sys.stdlib_module_names)
    ran = subprocess.run([sys.executable, "-I", str(SCRIPT), "--help"], capture_output=True, text=True, cwd="/")
    assert ran.returncode == 0 and "--once" in ran.stdout


# -- against a live server --------------------------------------------------------------------------------


def test_two_machines_push_the_same_tree_and_the_stats_by_machine_are_exact(ace, tmp_path):
    laptop, desktop = copy_logs(tmp_path / "laptop"), copy_logs(tmp_path / "desktop")
    for machine, home in (("laptop", laptop), ("desktop", desktop)):
        result = push(options(ace["url"], ace["key"], machine, [home], tmp_path / f"state-{machine}"))
        assert result.exit_code == 0, result
        logs = [path for path in home.rglob("*") if path.is_file() and is_log_name(path)]
        assert len(logs) == 25
        assert result.files_sent == len(logs) - 2  # the two files of no known tool are refused, not sent again
        assert result.bytes_sent == sum(path.stat().st_size for path in logs)  # each byte once
    expected = local_totals(tmp_path, "here")
    assert expected["requests"] > 0
    body = ace["api"].get("/api/v1/stats/", {"group_by": "machine"}).json()
    by_machine = {row["key"]: counters(row) for row in body["results"]}
    assert by_machine == {"laptop": expected, "desktop": expected}
    assert counters(body["totals"]) == {name: 2 * value for name, value in expected.items()}
    only_laptop = ace["api"].get("/api/v1/stats/", {"group_by": "tool", "machine": "laptop"}).json()
    assert counters(only_laptop["totals"]) == expected
    # Same agent session ids on two machines: two sessions each, never merged.
    sessions = Session.objects.filter(tenant=ace["api"].tenant)
    local = Session.objects.filter(tenant__name="local-here").count()
    assert sessions.filter(machine="laptop").count() == sessions.filter(machine="desktop").count() == local
    listed = ace["api"].get("/api/v1/sessions/", {"machine": "desktop"}).json()["results"]
    assert len(listed) == local and {s["machine"] for s in listed} == {"desktop"}
    # Roll-ups keyed by machine recount exactly.
    assert rollup_drift(tenant=ace["api"].tenant) == {"hourly": [], "daily": [], "session_model": []}
    call_command("ace_recount", "--rollups", stdout=io.StringIO())

    again = push(options(ace["url"], ace["key"], "laptop", [laptop], tmp_path / "state-laptop"))
    assert (again.exit_code, again.files_sent, again.bytes_sent) == (0, 0, 0)


def test_a_grown_file_sends_only_its_new_bytes(ace, tmp_path):
    home = tmp_path / "home"
    log = home / QWEN_NAME
    log.parent.mkdir(parents=True)
    data = (DATA / QWEN).read_bytes()
    cut = line_start(data, 10)
    log.write_bytes(data[:cut])
    opts = options(ace["url"], ace["key"], "laptop", [home / ".qwen/projects"], tmp_path / "state")
    first = push(opts)
    assert (first.exit_code, first.bytes_sent) == (0, cut)

    with log.open("ab") as handle:
        handle.write(data[cut:])
    past = time.time() - 3600
    os.utime(log, (past, past))
    second = push(opts)
    assert (second.exit_code, second.files_sent, second.bytes_sent) == (0, 1, len(data) - cut)
    held = ace["api"].get("/api/v1/imports/files/", {"machine": "laptop"}).json()["results"]
    assert [(f["path"], f["stored_bytes"]) for f in held] == [(QWEN_NAME, len(data))]
    session = Session.objects.get(tenant=ace["api"].tenant)
    assert session.machine == "laptop"

    reference = Tenant.objects.create(name="reference")
    whole = tmp_path / "whole" / QWEN_NAME
    whole.parent.mkdir(parents=True)
    whole.write_bytes(data)
    os.utime(whole, (past, past))
    import_path(tenant=reference, path=whole)
    assert counters(ace["api"].get(f"/api/v1/sessions/{session.pk}/stats/").json()) == counters(
        TenantClient(reference, api_key_for("reference")).get("/api/v1/stats/").json()["totals"]
    )

    # A replaced file (same size or more, another head) is sent whole, replacing the server's copy.
    log.write_bytes(data.replace(b"weather", b"WEATHER", 1))
    replaced = push(opts)
    assert (replaced.exit_code, replaced.bytes_sent) == (0, len(data))


def losing_proxy(target: str, lose: int) -> FakeServer:
    """An HTTP proxy in front of the live server that forwards a request and then, for the first `lose` uploads,
    hangs up instead of answering: the server stored the upload, the client never hears of it."""

    def forward(request):
        body = request.body if request.method == "POST" else None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        try:
            with urllib.request.urlopen(urllib.request.Request(target + request.path, body, headers)) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        if body is not None and proxy.lost < lose:
            proxy.lost += 1
            return None
        return status, payload

    proxy = FakeServer(forward)
    proxy.lost = 0
    return proxy


def test_a_lost_response_then_a_rerun_stores_nothing_twice(ace, tmp_path):
    home = copy_logs(tmp_path / "home")
    expected = local_totals(tmp_path, "x")
    proxy = losing_proxy(ace["url"], lose=1)
    try:
        lost = push(options(proxy.url, ace["key"], "laptop", [home], tmp_path / "state", retries=0))
    finally:
        proxy.close()
    assert (lost.exit_code, proxy.lost) == (push_client.EXIT_UNREACHABLE, 1)
    assert ImportedFile.objects.filter(tenant=ace["api"].tenant).exists()  # the server did store the upload

    held = ace["api"].get("/api/v1/imports/files/", {"machine": "laptop", "page_size": 100}).json()["results"]
    assert held
    rerun = push(options(ace["url"], ace["key"], "laptop", [home], tmp_path / "state"))
    assert rerun.exit_code == 0
    # The server said what it holds: only the files it does not hold are sent (those of the requests after the
    # lost one; the two files of no known tool are refused again, which is not a send).
    names = {f["path"] for f in held}
    logs = [path for path in home.rglob("*") if path.is_file() and is_log_name(path)]
    missing = [path for path in logs if push_client.upload_name(path, home) not in names]
    assert rerun.bytes_sent == sum(path.stat().st_size for path in missing if path.parent.name != "unknown") > 0
    assert counters(ace["api"].get("/api/v1/stats/", {"machine": "laptop"}).json()["totals"]) == expected
    assert Message.objects.filter(session__tenant=ace["api"].tenant).count() == expected["messages"]


def test_a_retry_after_a_lost_response_resends_bytes_the_server_compares_and_skips(ace, tmp_path):
    home = copy_logs(tmp_path / "home")
    expected = local_totals(tmp_path, "x")
    proxy = losing_proxy(ace["url"], lose=1)
    try:
        result = push(options(proxy.url, ace["key"], "laptop", [home], tmp_path / "state", retries=2))
    finally:
        proxy.close()
    assert (result.exit_code, proxy.lost) == (0, 1)
    assert counters(ace["api"].get("/api/v1/stats/", {"machine": "laptop"}).json()["totals"]) == expected
    stored = tmp_path / "server" / "uploads" / str(ace["api"].tenant.pk) / "~machines" / "laptop" / QWEN_NAME
    assert stored.read_bytes() == (home / QWEN).read_bytes()  # each byte once


def test_a_server_that_is_down_then_back_loses_nothing(ace, tmp_path):
    home = copy_logs(tmp_path / "home")
    expected = local_totals(tmp_path, "x")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: connection refused
        waits = []
        result = push_client.push_once(
            options(down, ace["key"], "laptop", [home], tmp_path / "state", retries=3), sleep=waits.append
        )
    assert result.exit_code == push_client.EXIT_UNREACHABLE and result.bytes_sent == 0
    assert len(waits) == 3 and 1 <= waits[0] <= 1.5 and 2 <= waits[1] <= 3 and 4 <= waits[2] <= 6  # backoff
    back = push(options(ace["url"], ace["key"], "laptop", [home], tmp_path / "state"))
    assert back.exit_code == 0
    assert counters(ace["api"].get("/api/v1/stats/", {"machine": "laptop"}).json()["totals"]) == expected


def test_once_exit_codes_of_the_standalone_script_and_the_command(ace, tmp_path):
    home = copy_logs(tmp_path / "home")

    def script(*args):
        command = [sys.executable, "-I", str(SCRIPT), "--once", "--state-dir", str(tmp_path / "state"), *args]
        return subprocess.run(command, capture_output=True, text=True, cwd="/", timeout=120)

    sent = script("--server", ace["url"], "--key", ace["key"], "--machine", "laptop", str(home))
    assert sent.returncode == 0, sent.stderr
    assert f"sent {QWEN_NAME}: bytes 0-{(home / QWEN).stat().st_size}" in sent.stderr
    assert script("--server", ace["url"], "--key", "ace_wrong", str(home)).returncode == push_client.EXIT_AUTH
    refused = script("--server", "http://127.0.0.1:9", "--key", ace["key"], "--retries", "0", str(home))
    assert refused.returncode == push_client.EXIT_UNREACHABLE
    bad = script("--server", ace["url"], "--key", ace["key"], "--machine", "a/b", str(home))
    assert bad.returncode == push_client.EXIT_USAGE and "--machine" in bad.stderr

    out = io.StringIO()
    call_command(
        "ace_push", "--server", ace["url"], "--key", ace["key"], "--machine", "desk", "--once",
        "--state-dir", str(tmp_path / "state2"), str(home), stdout=out,
    )  # fmt: skip
    assert f"sent {QWEN_NAME}" in out.getvalue()
    with pytest.raises(CommandError) as failed:
        call_command(
            "ace_push", "--server", ace["url"], "--key", "ace_wrong", "--once",
            "--state-dir", str(tmp_path / "state3"), str(home), stdout=io.StringIO(),
        )  # fmt: skip
    assert failed.value.returncode == push_client.EXIT_AUTH


def test_another_tenants_key_sees_nothing_of_the_pushed_files(ace, tmp_path):
    home = copy_logs(tmp_path / "home")
    assert push(options(ace["url"], ace["key"], "laptop", [home], tmp_path / "state")).exit_code == 0
    other = ace["other_api"]
    assert other.get("/api/v1/imports/files/", {"machine": "laptop"}).json()["results"] == []
    assert other.get("/api/v1/stats/", {"group_by": "machine"}).json()["results"] == []
    mine = Session.objects.filter(tenant=ace["api"].tenant).first()
    assert other.get(f"/api/v1/sessions/{mine.pk}/").status_code == 404
    # Their own push of the same files is theirs alone: every byte sent, their own sessions.
    theirs = push(options(ace["url"], ace["other_key"], "laptop", [home], tmp_path / "state-other"))
    assert theirs.exit_code == 0 and theirs.bytes_sent > 0
    assert Session.objects.filter(tenant=other.tenant, machine="laptop").count() == (
        Session.objects.filter(tenant=ace["api"].tenant, machine="laptop").count()
    )


def test_files_the_server_will_not_take_are_remembered_and_the_others_sent(ace, tmp_path):
    home = copy_logs(tmp_path / "home")
    (home / "notes.txt").write_text("not a log\n")
    opts = options(ace["url"], ace["key"], "laptop", [home], tmp_path / "state")
    everything = push_client.push_once(opts, log_name=lambda path: True, sleep=lambda seconds: None)
    files = [path for path in home.rglob("*") if path.is_file()]
    logs = [path for path in files if is_log_name(path) and path.parent.name != "unknown"]
    assert everything.exit_code == 0 and everything.files_sent == len(logs) == 23
    state = push_client.State(push_client.state_path(opts.state_dir, opts.server, opts.machine))
    refused = {Path(path).name for path, entry in state.files.items() if entry["refused"]}
    assert refused == {path.name for path in files if path not in logs}
    assert {"notes.txt", "agent-a1b2c3d.meta.json", "garbage.jsonl", "other-tool.jsonl"} <= refused
    again = push_client.push_once(opts, log_name=lambda path: True, sleep=lambda seconds: None)
    assert (again.exit_code, again.bytes_sent) == (0, 0)


def test_a_whole_document_log_goes_whole_and_uncut(tmp_path):
    document = tmp_path / ".gemini" / "tmp" / "5a1b" / "chats" / "session-1.json"
    document.parent.mkdir(parents=True)
    document.write_bytes(b'{"messages": [' + b'{"type": "user", "content": "hi"},' * 500 + b"{}]}")
    log = tmp_path / "a.jsonl"
    log.write_bytes(b"{}\n" * 5000)
    found = {f.name: f for f in push_client.find_logs([str(tmp_path)], push_client.is_log_name)}
    doc = found[".gemini/tmp/5a1b/chats/session-1.json"]
    held = {"stored_bytes": 100, "head_sha256": push_client.file_head_sha256(document, 100)}
    assert push_client._resume_offset(doc, held) is None  # changed: sent whole, replacing the server's copy
    assert push_client._resume_offset(found[f"{tmp_path.name}/a.jsonl"], None) == 0
    jsonl = found[f"{tmp_path.name}/a.jsonl"]
    todo = {jsonl.name: (jsonl, None), doc.name: (doc, None)}
    parts = push_client._next_request(todo, max_bytes=1000)
    assert [(p.name, len(p.data)) for p in parts] == [(jsonl.name, 1000)]  # a log is cut; the document waits
    todo.pop(jsonl.name)
    parts = push_client._next_request(todo, max_bytes=1000)
    assert [(p.name, len(p.data)) for p in parts] == [(doc.name, document.stat().st_size)]  # alone, whole


def test_random_uploads_never_fail_the_server(ace, tmp_path):
    """Fuzz: random offsets, machines, paths and bytes; every answer is 201, 400 or 409, and what the server
    holds of a file is always a prefix of it or a whole part that was sent."""
    import random

    rng = random.Random(15)
    data = (DATA / QWEN).read_bytes()
    api = ace["api"]
    for _ in range(40):
        offset = rng.choice([0, 1, len(data) // 3, len(data), len(data) + 5, -3, rng.randrange(len(data))])
        end = rng.randrange(max(offset, 0), len(data) + 1) if offset <= len(data) else offset + 3
        content = data[max(offset, 0) : end]
        if rng.random() < 0.2:
            content = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        fields = {
            "paths": rng.choice([[QWEN_NAME], ["../x.jsonl"], [QWEN_NAME + "\x00"], ["a" * 300 + ".jsonl"]]),
            "machine": rng.choice(["laptop", "", "bad name", "x" * 120]),
        }
        if rng.random() < 0.8:
            fields["offsets"] = [rng.choice([offset, str(offset), "nan"])]
        handle = io.BytesIO(content)
        handle.name = "part.jsonl"
        response = api.post("/api/v1/imports/", {"files": [handle], **fields}, format="multipart")
        assert response.status_code in (201, 400, 409), response.content[:300]
    stored = tmp_path / "server" / "uploads" / str(api.tenant.pk) / "~machines" / "laptop" / QWEN_NAME
    if stored.exists():
        held = stored.read_bytes()
        assert data.startswith(held) or len(held) < 40, len(held)


def test_small_requests_cut_files_and_still_count_each_byte_once(ace, tmp_path):
    home = copy_logs(tmp_path / "home")
    expected = local_totals(tmp_path, "x")
    result = push(options(ace["url"], ace["key"], "laptop", [home], tmp_path / "state", max_bytes=2000))
    assert result.exit_code == 0
    held = ace["api"].get("/api/v1/imports/files/", {"machine": "laptop", "page_size": 100}).json()["results"]
    logs = [path for path in home.rglob("*") if path.is_file() and is_log_name(path)]
    # Every byte of every log the server takes is held once; no byte was sent twice (the parts of the two files
    # of no known tool sent before they were refused are all that is sent and not held).
    assert sum(f["stored_bytes"] for f in held) == sum(p.stat().st_size for p in logs if p.parent.name != "unknown")
    assert result.bytes_sent <= sum(path.stat().st_size for path in logs)
    assert counters(ace["api"].get("/api/v1/stats/", {"machine": "laptop"}).json()["totals"]) == expected
    stored = tmp_path / "server" / "uploads" / str(ace["api"].tenant.pk) / "~machines" / "laptop" / QWEN_NAME
    assert stored.read_bytes() == (home / QWEN).read_bytes()


def test_a_damaged_state_file_is_read_as_empty_and_rewritten_whole(tmp_path):
    path = push_client.state_path(tmp_path, "https://ace.example.com", "laptop")
    path.parent.mkdir(parents=True, exist_ok=True)
    for damaged in ('{"version": 1, "files": {"/a.jsonl": 7}}', '{"version": 1, "fil', "\x00\x01"):
        path.write_text(damaged)
        state = push_client.State(path)
        log = tmp_path / "a.jsonl"
        log.write_text("{}\n")
        assert not state.unchanged(log, log.stat())
        state.acknowledge(log, "a.jsonl", log.stat())
        state.save()
        assert push_client.State(path).unchanged(log, log.stat())
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".state-")] == []  # no temporary left


def test_two_pushes_of_one_machine_at_once_store_each_byte_once(ace, tmp_path):
    home = copy_logs(tmp_path / "home")
    expected = local_totals(tmp_path, "x")
    results = []

    def run(state):
        results.append(push(options(ace["url"], ace["key"], "laptop", [home], tmp_path / state)))

    threads = [threading.Thread(target=run, args=(f"state-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [r.exit_code for r in results] == [0, 0]
    assert counters(ace["api"].get("/api/v1/stats/", {"machine": "laptop"}).json()["totals"]) == expected
    stored = tmp_path / "server" / "uploads" / str(ace["api"].tenant.pk) / "~machines" / "laptop" / QWEN_NAME
    assert stored.read_bytes() == (home / QWEN).read_bytes()
