"""The database going away: clients get 503 with Retry-After (never a 500), the embedded server is started
again by whoever finds it down, nothing acknowledged is lost, and a task that could not run is retried.

These tests stop the suite's own embedded server (the tests' database lives on it) and rely on the service
to bring it back; each one makes sure it is up again before it ends."""

import json
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.db import connection, connections

from aceproject.embedded_db import embedded_database_state, stop_embedded_database
from memory_app.models import Record
from sessions_app.models import Message, Session
from tests.support.api import make_client
from tests.support.factories import SessionFactory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(bool(settings.DATABASE_URL), reason="stops the embedded PostgreSQL")


def _postmaster_pid() -> int | None:
    pid_file = settings.ACE_DATA_DIR / "pg" / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


@pytest.fixture
def database_comes_back():
    """Whatever a test does to the server, the suite's database is up again after it."""
    yield
    connections.close_all()
    deadline = time.monotonic() + 30
    while True:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return
        except Exception:
            assert time.monotonic() < deadline, "the embedded PostgreSQL did not come back"
            time.sleep(0.5)


def _when_reachable(query):
    """`query()` from this test's own thread, which has no request or task around it to drop a connection
    the outage broke, nor to wait out the few seconds before this process may start the server again."""
    from django.db import OperationalError

    deadline = time.monotonic() + 30
    while True:
        try:
            return query()
        except OperationalError:
            connections.close_all()
            assert time.monotonic() < deadline, "the database did not come back"
            time.sleep(0.5)


@contextmanager
def database_unreachable():
    """This process's connections point at a socket nothing listens on: the server is up, but out of
    reach (as behind a network fault), so starting it again cannot help."""
    connections.close_all()
    saved = connection.settings_dict["PORT"]
    connection.settings_dict["PORT"] = "1"  # the server listens on .s.PGSQL.5432 only
    try:
        yield
    finally:
        connection.settings_dict["PORT"] = saved
        connections.close_all()


def _assert_unavailable(response):
    assert response.status_code == 503, response.content
    assert int(response["Retry-After"]) > 0
    body = response.json()
    assert set(body) >= {"detail", "errors"}
    assert "database is unavailable" in body["detail"]
    return body


def test_an_unreachable_database_is_a_503_with_retry_after_for_the_api_the_admin_and_health(
    transactional_db, client, admin_user, database_comes_back
):
    api = make_client("outage-api")
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    client.force_login(admin_user)
    with database_unreachable():
        _assert_unavailable(api.get("/api/v1/sessions/"))
        _assert_unavailable(
            api.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "你好"}, format="json")
        )
        _assert_unavailable(client.get("/admin/"))
        _assert_unavailable(client.get("/admin/sessions_app/session/"))
        health = client.get("/healthz")
        assert health.status_code == 503
        assert int(health["Retry-After"]) > 0
        assert health.json()["database"] == "down"
        assert health.json()["reasons"]["database"] == "the database server is not running"
        assert "database (the database server is not running)" in health.json()["detail"]
    # Reachable again: the next request reconnects by itself.
    assert api.get("/api/v1/sessions/").status_code == 200
    health = client.get("/healthz").json()
    assert {k: v for k, v in health.items() if k not in ("embedder", "errors")} == {"database": "ok", "broker": "ok"}
    assert health["errors"]["server_errors_5xx"] == 0  # the outage's 503s said when to retry: not server errors


def _post(url: str, key: str, body) -> tuple[int, str | None]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get("Retry-After")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Retry-After")


def test_stopping_the_database_under_traffic_loses_nothing_acknowledged_and_it_comes_back_by_itself(
    live_server, database_comes_back
):
    api = make_client("outage-traffic")
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    url = f"{live_server.url}/api/v1/sessions/{session.pk}/messages/"
    results: list[tuple[float, str, int, str | None]] = []  # (sent at, content, status, Retry-After)
    stop = threading.Event()

    def client(number: int):
        sent = 0
        while not stop.is_set():
            content = f"client {number} message {sent}"
            started = time.monotonic()
            status, retry_after = _post(url, api.key, {"role": "user", "content": content})
            results.append((started, content, status, retry_after))
            sent += 1
            if status == 503:
                time.sleep(0.2)  # a client that honours Retry-After, shortened

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()

    def acknowledged_since(moment: float) -> int:
        return sum(1 for sent, _, status, _ in list(results) if status == 201 and sent > moment)

    try:
        assert wait_for(lambda: acknowledged_since(0) >= 8)  # traffic under way: acknowledged writes to keep
        pid_before = _postmaster_pid()
        assert stop_embedded_database(settings.ACE_DATA_DIR)
        stopped_at = time.monotonic()  # down: what is sent from now on finds no server
        # Nothing in this test starts it again: the live server's requests must.
        assert wait_for(lambda: acknowledged_since(stopped_at), 20), "the service did not recover by itself"
        recovered_at = min(sent for sent, _, status, _ in list(results) if status == 201 and sent > stopped_at)
        assert wait_for(lambda: acknowledged_since(recovered_at) >= 8)  # and it goes on serving
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=90)

    statuses = [status for _, _, status, _ in results]
    assert set(statuses) <= {201, 503}, sorted(set(statuses))
    assert all(retry_after and int(retry_after) > 0 for _, _, status, retry_after in results if status == 503)
    assert recovered_at - stopped_at < 10
    assert embedded_database_state(settings.ACE_DATA_DIR) == "ready"
    assert _postmaster_pid() != pid_before  # a new server, started by the service itself
    acknowledged = [content for _, content, status, _ in results if status == 201]
    assert len([sent for sent, _, status, _ in results if status == 201 and sent > recovered_at]) > 0
    rows = _when_reachable(lambda: list(Message.objects.filter(session=session).values_list("content", "seq")))
    stored = [content for content, _ in rows]
    assert set(acknowledged) <= set(stored)  # every acknowledged write is there
    assert len(stored) == len(set(stored))  # and none twice
    # The counters are exact: no gap or repeat in the sequence a write that failed half-way would leave.
    assert sorted(seq for _, seq in rows) == list(range(1, len(rows) + 1))
    assert Session.objects.get(pk=session.pk).last_seq == len(rows)
    print(  # the figures, with -s
        f"\n{len(results)} requests: {statuses.count(201)} × 201, {statuses.count(503)} × 503; "
        f"first 201 {recovered_at - stopped_at:.1f} s after the stop"
    )


def test_a_task_that_finds_the_database_unreachable_is_retried_and_runs_when_it_is_back(
    celery_worker, database_comes_back, monkeypatch
):
    from celery.signals import task_retry

    import platform_kit.tasks
    from memory_app.tasks import embed_records

    # No delay: a retry with a countdown becomes an ETA message, and an in-thread test worker started after
    # another one in the same process never fires ETA timers (the production backoff is 2, 4, 8 ... s).
    monkeypatch.setattr(platform_kit.tasks, "OUTAGE_RETRY_FIRST_SECONDS", 0)
    api = make_client("outage-task")
    record = Record.objects.create(tenant=api.tenant, user_id="xiaoming", type="profile", content="喜欢博物馆")
    retries = []

    def on_retry(sender=None, reason=None, **kwargs):
        retries.append(str(reason))

    task_retry.connect(on_retry, weak=False)
    try:
        with database_unreachable():  # the worker runs in this process: out of its reach too
            embed_records.delay([str(record.pk)])
            assert wait_for(lambda: len(retries) >= 2), "the task was not retried"
        assert wait_for(lambda: Record.objects.filter(pk=record.pk).exclude(embedding_key="").exists()), (
            "the retried task did not run"
        )
    finally:
        task_retry.disconnect(on_retry)
    assert all("connect" in reason for reason in retries), retries


def test_a_worker_that_finds_the_embedded_database_stopped_starts_it_and_runs_its_tasks(
    celery_worker, database_comes_back
):
    from memory_app.tasks import embed_records

    api = make_client("outage-worker")
    records = [
        Record.objects.create(tenant=api.tenant, user_id="xiaoming", type="profile", content=f"喜欢博物馆 {n}")
        for n in range(3)
    ]
    pid_before = _postmaster_pid()
    assert stop_embedded_database(settings.ACE_DATA_DIR)
    connections.close_all()  # this test's own, cut off by the stop (a request or task closes its own)
    for record in records:
        embed_records.delay([str(record.pk)])
    # Nothing here touches the database until the worker has had the time to start it again.
    assert wait_for(lambda: embedded_database_state(settings.ACE_DATA_DIR) == "ready"), (
        "the worker did not start the database"
    )
    assert _postmaster_pid() != pid_before
    assert wait_for(lambda: not Record.objects.filter(pk__in=[r.pk for r in records], embedding_key="").exists()), (
        "the tasks did not run"
    )
