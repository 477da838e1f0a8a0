"""Big imports run in forked worker processes: the same sessions, counts, offsets and summary as one process,
failures surface in the caller, and the work they queue (search indexing) reaches a real worker.

The processes need committed data they can see, so these tests use a transactional database."""

import pytest

from ingest_app.pipeline import batch, import_path, run
from sessions_app.models import ImportedFile, Message, Session
from sessions_app.search import messages_index
from sessions_app.selectors.recount import session_count_drift
from tests.conftest import make_client
from tests.ingest_app.test_imports import (
    CLAUDE,
    CLAUDE_AGENT,
    CLAUDE_STREAMING,
    COUNTERS,
    OPENCLAW,
    QWEN,
    SEED,
    copy,
    stats,
)
from tests.waiting import wait_for

LOGS = (CLAUDE, CLAUDE_AGENT, CLAUDE_STREAMING, QWEN, OPENCLAW, SEED)


@pytest.fixture
def in_processes(settings, monkeypatch):
    """Every import with more than one group of files forks two workers; the calls are counted."""
    settings.ACE_IMPORT_WORKERS = 2
    monkeypatch.setattr(run, "PARALLEL_MIN_BYTES", 0)
    calls = []
    real = run.ImportRun._in_processes

    def counted(self, groups, workers):
        calls.append(workers)
        return real(self, groups, workers)

    monkeypatch.setattr(run.ImportRun, "_in_processes", counted)
    return calls


def tree(root):
    for relative in LOGS:
        copy(relative, root)
    return root


def by_session(api) -> dict:
    return {
        (s.tool, s.agent_session_id): (stats(api, s), s.name, s.project, s.user_id)
        for s in Session.objects.filter(tenant=api.tenant)
    }


def offsets(api) -> dict:
    prefix = len(str(api.root))
    return {r.path[prefix:]: (r.offset, r.messages_imported) for r in ImportedFile.objects.filter(tenant=api.tenant)}


def test_worker_processes_import_what_one_process_imports(transactional_db, in_processes, settings, tmp_path):
    serial, parallel = make_client("serial"), make_client("parallel")
    serial.root, parallel.root = tmp_path / "a", tmp_path / "b"
    settings.ACE_IMPORT_WORKERS = 1
    one = import_path(tenant=serial.tenant, path=tree(serial.root))
    assert in_processes == []
    settings.ACE_IMPORT_WORKERS = 2
    two = import_path(tenant=parallel.tenant, path=tree(parallel.root))
    assert in_processes == [2]

    assert one.line() == two.line() and one.messages > 0
    assert [f.path.removeprefix(str(parallel.root)) for f in two.files] == [
        f.path.removeprefix(str(serial.root)) for f in one.files
    ]
    assert by_session(parallel) == by_session(serial) and len(by_session(parallel)) == 5
    assert offsets(parallel) == offsets(serial)
    for session in Session.objects.filter(tenant=parallel.tenant):
        assert session_count_drift(session=session) == {}
    # The sub-agent joined the round of its parent that spawned it, in the worker that read both.
    parent = Session.objects.get(tenant=parallel.tenant, tool="claude-code", agent_session_id__startswith="5f0c")
    spawner = Message.objects.get(session=parent, metadata__spawned_agent_id="a1b2c3d")
    subagent = Message.objects.filter(session=parent, metadata__subagent=True)
    assert set(subagent.values_list("conversation", flat=True)) == {spawner.conversation_id}

    again = import_path(tenant=parallel.tenant, path=parallel.root)
    assert (again.files_unchanged, again.messages) == (len(LOGS), 0)


def test_a_worker_process_that_fails_fails_the_import_and_what_it_did_not_commit_is_read_next_time(
    transactional_db, in_processes, monkeypatch, tmp_path
):
    api = make_client("failing")
    real = batch.messages_append_to_sessions

    def failing(*, appends, **kwargs):
        if any(session.tool == "qwen-code" for session, _ in appends):
            raise RuntimeError("the database went away")
        return real(appends=appends, **kwargs)

    monkeypatch.setattr(batch, "messages_append_to_sessions", failing)
    with pytest.raises(RuntimeError, match="the database went away"):
        import_path(tenant=api.tenant, path=tree(tmp_path))
    assert in_processes == [2]
    assert not Session.objects.filter(tenant=api.tenant, tool="qwen-code").exists()

    monkeypatch.setattr(batch, "messages_append_to_sessions", real)
    import_path(tenant=api.tenant, path=tmp_path)
    qwen = Session.objects.get(tenant=api.tenant, tool="qwen-code")
    assert {name: stats(api, qwen)[name] for name in COUNTERS}["messages"] > 0
    for session in Session.objects.filter(tenant=api.tenant):
        assert session_count_drift(session=session) == {}


def test_what_worker_processes_queue_reaches_the_worker(celery_worker, in_processes, tmp_path):
    api = make_client("indexed")
    import_path(tenant=api.tenant, path=tree(tmp_path))
    assert in_processes == [2]
    imported = Message.objects.filter(tenant=api.tenant)
    # The indexing tasks the worker processes queued after their commits fill every search vector.
    assert wait_for(lambda: not imported.filter(search_vector__isnull=True).exists(), 30)
    assert messages_index(imported.values_list("pk", flat=True)) == 0
    found = api.get("/api/v1/messages/", {"q": "Hangzhou", "page_size": 100}).json()["results"]
    assert {m["id"] for m in found} == {
        str(pk) for pk in imported.filter(content__icontains="hangzhou").values_list("pk", flat=True)
    }
    assert len(found) >= 3


def test_the_callers_connection_and_its_locks_outlive_the_worker_processes(transactional_db, in_processes, tmp_path):
    from django.db import connection

    from ingest_app.pipeline import import_source_scan
    from sessions_app.models import ImportSource

    api = make_client("scanner")
    source = ImportSource.objects.create(tenant=api.tenant, path=str(tree(tmp_path)))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    summary = import_source_scan(source=source)
    assert in_processes == [2] and summary.messages > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] == backend  # the scan's connection (holding the source's lock) was kept
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 0  # and the lock was released at the end, on that connection


def test_the_collector_in_a_celery_pool_process_imports_with_worker_processes_too(
    transactional_db, in_processes, tmp_path
):
    import billiard
    from django.db import connections

    from ingest_app.pipeline import import_source_scan
    from sessions_app.models import ImportSource

    direct, pooled = make_client("direct"), make_client("pool")
    direct.root, pooled.root = tmp_path / "a", tmp_path / "b"
    import_path(tenant=direct.tenant, path=tree(direct.root))
    assert in_processes == [2]
    in_processes.clear()
    source = ImportSource.objects.create(tenant=pooled.tenant, path=str(tree(pooled.root)))

    # Celery's prefork pool runs a task in a daemonic billiard process, where multiprocessing refuses to
    # start processes ("daemonic processes are not allowed to have children"): the scan runs in one such.
    context = billiard.get_context("fork")
    answers = context.Queue()

    def pool_process():
        import multiprocessing

        for conn in connections.all(initialized_only=True):
            conn.connection = None  # the test's connection stays the test's
        try:
            summary = import_source_scan(source=source)
            answers.put((multiprocessing.current_process().daemon, list(in_processes), summary.line()))
        except BaseException as error:  # noqa: BLE001 - shown by the assertion below
            answers.put((None, None, repr(error)))
        finally:
            connections.close_all()

    process = context.Process(target=pool_process, daemon=True)
    process.start()
    daemonic, calls, line = answers.get(timeout=120)
    process.join(timeout=30)
    assert (daemonic, calls) == (True, [2]), line
    assert by_session(pooled) == by_session(direct) and offsets(pooled) == offsets(direct)
    assert line.startswith(f"imported {len(LOGS)} files")
