"""Two hosts on one PostgreSQL and one broker (docs/operations.md, "Many hosts"; CONTRACT "Many hosts").

Each host is the Procfile's processes (web, gateway, worker, webhooks, embedder, beat) with its own
ACE_DATA_DIR, ports and node names; the database is a PostgreSQL server of its own on a TCP port (the embedded
package's binaries, pgvector included), reached directly or through PgBouncer in transaction mode; the broker is
Redis or RabbitMQ. Whatever a client does through one host must hold through the other: keys, one session written
through both, an upload begun on one and continued on the other, an export made on one and downloaded from the
other, recall of what the other stored, a webhook and a budget alert delivered once, a key revoked on one refused
on the other within ACE_API_KEY_CACHE_SECONDS.

These tests talk to the hosts only over HTTP and `manage.py` (no Django of this process touches their database).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2 as httpx
import pytest
import redis

from tests.support.hosts import Host, PgBouncer, TcpPostgres, server_folder
from tests.support.parallel import real_broker_url

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = (
    ROOT / "ingest_app/importers/claude_code/samples/.claude/projects/-home-dev-weather/"
    "5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11.jsonl"
)
UPLOAD_PATH = ".claude/projects/-home-dev-weather/5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11.jsonl"
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672//"
KEY_CACHE_SECONDS = 5  # ACE_API_KEY_CACHE_SECONDS' default: how long another host may still accept a revoked key


class Receiver:
    """A webhook receiver on loopback: every POST body it got, by event."""

    def __init__(self):
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append((self.headers.get("X-ACE-Event") or "", json.loads(body or b"{}")))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self, name: str) -> list[dict]:
        return [body for event, body in self.received if event == name or body.get("event") == name]

    def close(self):
        self.server.shutdown()


def eventually(check, timeout: float = 60.0, what: str = ""):
    """check()'s first truthy value within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.25)


def _missing(broker: str, path: str) -> str:
    """What this machine lacks for a configuration ("" when nothing)."""
    if path == "pgbouncer" and not (shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists()):
        return "PgBouncer is not installed (apt-get install pgbouncer)"
    if broker == "rabbitmq":
        try:
            socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
        except OSError:
            return "RabbitMQ does not answer on 127.0.0.1:5672"
    return ""


def _broker(kind: str) -> str:
    if kind == "redis":
        url = real_broker_url()  # this test process's own Redis database, emptied first
        redis.Redis.from_url(url).flushdb()
        return url
    return RABBITMQ_URL


@pytest.fixture(params=[("redis", "direct"), ("rabbitmq", "pgbouncer")], ids=["redis-direct", "rabbitmq-pgbouncer"])
def hosts(request):
    """Two hosts (every Procfile process each, beat included) on one database and one broker; yields (host1, host2,
    server, pooler)."""
    broker, path = request.param
    missing = _missing(broker, path)
    if missing:
        if os.environ.get("ACE_REQUIRE_MANY_HOSTS"):  # CI installs both (.ci/run)
            pytest.fail(missing)
        pytest.skip(missing)
    folder = server_folder("ace-many-hosts-")
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    with TcpPostgres(folder / "postgres") as server:
        direct = server.create_database("ace")
        env = {
            "DATABASE_URL": direct,
            "CELERY_BROKER_URL": _broker(broker),
            "SECRET_KEY": "many-hosts-test-secret-key-shared-by-every-host-0123456789",
            "ACE_OUTBOUND_ALLOW": "127.0.0.1,::1",
        }
        with contextlib.nullcontext() if path == "direct" else PgBouncer(folder / "pgbouncer", server, "ace") as pooler:
            with Host("setup", env=env, roles=()) as setup:
                setup.manage("migrate", "--no-input")  # migrations go to the server directly, never through a pooler
                if broker == "rabbitmq":  # tasks left in its queues by an earlier run
                    setup.manage("shell", "-c", "from aceproject.celery import app; app.control.purge()")
            if pooler is not None:
                env = {**env, "DATABASE_URL": pooler.url(), "ACE_DB_PREPARED": "false"}
            roles = ("web", "gateway", "worker", "webhooks", "embedder", "beat")
            with Host("host1", env=env, roles=roles) as one, Host("host2", env=env, roles=roles) as two:
                one.wait_ready()
                two.wait_ready()
                yield one, two, server, pooler


def client(host: Host, key: str) -> httpx.Client:
    return httpx.Client(base_url=host.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def new_key(host: Host, tenant: str) -> tuple[str, str]:
    """(key, prefix) of a new key of `tenant`, made with `ace_apikey create` on `host`."""
    output = host.manage("ace_apikey", "create", "--tenant", tenant).strip().splitlines()
    prefix = output[0].split("Created API key ", 1)[1].split(" ", 1)[0]
    return output[-1], prefix


def test_what_a_client_does_through_one_host_holds_through_the_other(hosts):
    one, two, server, pooler = hosts
    key, prefix = new_key(one, "many")
    a, b = client(one, key), client(two, key)

    # Beat runs on both: one leads and sends the periodic tasks, the other stands by (platform_kit.beat).
    eventually(lambda: sum("Beat: leader" in h.log("beat") for h in (one, two)) == 1, what="one beat leads")
    eventually(lambda: sum("Beat: standby" in h.log("beat") for h in (one, two)) == 1, what="the other stands by")

    # A key made on one host works on the other.
    assert b.get("/api/v1/sessions/").status_code == 200

    # One session written through both hosts at once: every message stored once, seq without gaps, counters exact.
    session = a.post("/api/v1/sessions/", json={"user_id": "ana", "name": "both hosts"}).json()["id"]
    batches = [
        [
            {
                "role": "assistant" if i % 2 else "user",
                "content": f"message {n}.{i}",
                "external_id": f"m-{n}-{i}",
                "input_tokens": 10 + i,
                "output_tokens": 3,
            }
            for i in range(5)
        ]
        for n in range(40)
    ]
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(
                lambda nb: (a if nb[0] % 2 else b).post(f"/api/v1/sessions/{session}/messages/", json=nb[1]),
                enumerate(batches),
            )
        )
    assert [answer.status_code for answer in answers] == [201] * 40
    messages = []
    page = f"/api/v1/sessions/{session}/messages/?page_size=100"
    while page:
        body = a.get(page).json()
        messages += body["results"]
        page = body["next"]
    assert [m["seq"] for m in messages] == list(range(1, 201))
    assert sorted(m["external_id"] for m in messages) == sorted(m["external_id"] for batch in batches for m in batch)
    stats = b.get(f"/api/v1/sessions/{session}/stats/").json()
    assert stats["messages"] == 200 and stats["input_tokens"] == 40 * sum(10 + i for i in range(5))

    # An upload begun on one host and continued on the other counts as the whole file uploaded to one host.
    data = SAMPLE.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    first = a.post(
        "/api/v1/imports/",
        files={"files": ("log.jsonl", data[:cut])},
        data={"paths": UPLOAD_PATH, "machine": "laptop", "offsets": "0"},
    )
    assert first.status_code == 201, first.text
    rest = b.post(
        "/api/v1/imports/",
        files={"files": ("log.jsonl", data[cut:])},
        data={"paths": UPLOAD_PATH, "machine": "laptop", "offsets": str(cut)},
    )
    assert rest.status_code == 201, rest.text
    whole_key, _ = new_key(two, "many-whole")
    whole = client(two, whole_key)
    assert (
        whole.post(
            "/api/v1/imports/", files={"files": ("log.jsonl", data)}, data={"paths": UPLOAD_PATH, "machine": "laptop"}
        ).status_code
        == 201
    )
    split_sessions = a.get("/api/v1/sessions/?tool=claude-code").json()["results"]
    whole_sessions = whole.get("/api/v1/sessions/?tool=claude-code").json()["results"]
    assert len(split_sessions) == len(whole_sessions) == 1
    split_stats = b.get(f"/api/v1/sessions/{split_sessions[0]['id']}/stats/").json()
    assert split_stats == whole.get(f"/api/v1/sessions/{whole_sessions[0]['id']}/stats/").json()
    assert split_stats["messages"] > 0

    # Recall on one host of a record the other stored (its vector made by either host's embedder).
    record = a.post(
        "/api/v1/records/", json={"user_id": "ana", "type": "fact", "content": "Ana prefers green tea at night"}
    )
    assert record.status_code == 201, record.text

    def recalled():
        answer = b.post("/api/v1/recall/", json={"query": "what tea does Ana like", "user_id": "ana"}).json()
        return record.json()["id"] in [hit["id"] for hit in answer["results"]]

    eventually(recalled, what="recall on host2 of host1's record")

    # A tenant export requested on one host, made by any worker, downloaded from the other.
    export = a.post("/api/v1/exports/").json()["id"]
    eventually(
        lambda: b.get(f"/api/v1/exports/{export}/").json()["status"] == "succeeded", 120, what="the export succeeds"
    )
    download = b.get(f"/api/v1/exports/{export}/download/")
    assert download.status_code == 200, download.text
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(download.content)).read("manifest.json"))
    assert manifest["tenant"] == "many" and manifest["files"]["messages.jsonl"] == 200 + split_stats["messages"]

    # A webhook ping and a budget alert are delivered once, whichever host's worker took them.
    receiver = Receiver()
    try:
        hook = a.post(
            "/api/v1/webhooks/", json={"url": receiver.url, "events": ["budget.crossed"], "description": "both"}
        )
        assert hook.status_code == 201, hook.text
        assert b.post(f"/api/v1/webhooks/{hook.json()['id']}/test/").status_code in (200, 202)
        budget = b.post(
            "/api/v1/budgets/", json={"name": "tokens", "limit": 100_000, "thresholds": [50], "unit": "tokens"}
        )
        assert budget.status_code == 201, budget.text
        big = [{"role": "assistant", "content": "a long answer", "input_tokens": 60_000, "output_tokens": 1}]
        assert a.post(f"/api/v1/sessions/{session}/messages/", json=big).status_code == 201
        eventually(lambda: receiver.events("ping") and receiver.events("budget.crossed"), what="ping and alert")
        time.sleep(3)  # a second delivery, if any, would come by now (both hosts' webhook workers are idle)
        assert len(receiver.events("ping")) == 1
        assert len(receiver.events("budget.crossed")) == 1
    finally:
        receiver.close()

    # A key revoked (by `manage.py` on host1: a process of its own) is refused by every web process of both hosts
    # within the keys' cache time: each may have checked it up to ACE_API_KEY_CACHE_SECONDS before.
    assert b.get("/api/v1/sessions/").status_code == 200  # host2 has the key in its cache
    one.manage("ace_apikey", "revoke", prefix)
    revoked_at = time.monotonic()
    for host, name in ((b, "host2"), (a, "host1")):
        eventually(lambda h=host: h.get("/api/v1/sessions/").status_code == 401, KEY_CACHE_SECONDS + 5, what=name)
    assert time.monotonic() - revoked_at <= KEY_CACHE_SECONDS + 2

    # Through the pooler, the database server sees the pool's connections, not one per process and thread.
    if pooler is not None:
        assert server.backends("ace") <= pooler.pool_size + 1
