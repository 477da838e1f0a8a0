"""A run whose worker dies is taken up again within a minute, and no message is ever processed twice: the
running run beats a heartbeat, the sweep (runs_requeue) queues again a silent one, and each execution claims
the run with an attempt token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings
from django.db import connection

from memory_app.models import Record
from sessions_app.services.messages import messages_append
from strategies_app.models import RunRecord, RunStatus, Strategy, StrategyRun, Trigger, Watermark
from strategies_app.services.runs import run_execute, run_request
from strategies_app.tasks import runs_requeue
from tests.conftest import TEST_BROKER_URL, on_test_broker
from tests.support.fake_llm import FakeLLM
from tests.support.waiting import wait_for

PROJECT = Path(__file__).resolve().parents[2]


def llm_profile(tenant) -> Strategy:
    Strategy.objects.filter(tenant=tenant).exclude(name="user-profile").update(enabled=False)
    strategy = Strategy.objects.get(tenant=tenant, name="user-profile")
    Strategy.objects.filter(pk=strategy.pk).update(message_threshold=None, accumulated_threshold=None, extractor="llm")
    strategy.refresh_from_db()
    return strategy


def slow_first_answer(llm: FakeLLM, seconds: float, started: threading.Event):
    """The first request hangs (the worker is killed meanwhile, or taken for lost); later ones answer."""
    answer = llm.default_reply

    def reply(body):
        if len(llm.requests) == 1:
            started.set()
            time.sleep(seconds)
        return answer(body)

    return reply


def test_a_run_that_a_live_worker_holds_is_not_started_again(api, session, settings):
    settings.ACE_LLM_BASE_URL = ""
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
    from django.utils import timezone

    StrategyRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, attempts=1, heartbeat_at=timezone.now())
    again = run_execute(run.pk)
    assert (again.status, again.attempts) == (RunStatus.RUNNING, 1)  # left to the live worker
    assert runs_requeue() == 0  # its heartbeat is fresh: not lost


@pytest.mark.django_db(transaction=True)
def test_a_stalled_worker_taken_for_lost_processes_nothing_twice(api, session, settings):
    """The first execution stalls in the LLM call past ACE_RUN_LOST_AFTER_SECONDS (alive, but silent: its
    heartbeat is slower than that here); the sweep queues the run again and a second execution claims it.
    The first one still commits its range; the second reads only what came after; the run's outcome is
    written once, by the attempt that holds it."""
    settings.ACE_RUN_HEARTBEAT_SECONDS, settings.ACE_RUN_LOST_AFTER_SECONDS = 60, 1
    started = threading.Event()
    with FakeLLM() as llm, on_test_broker():
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = llm.base_url, "fake"
        llm.remember = {"window seats": {"content": "Prefers window seats", "about": "preference:seat"}}
        llm.reply = slow_first_answer(llm, 3, started)
        strategy = llm_profile(api.tenant)
        messages_append(
            tenant=api.tenant,
            session_id=session.pk,
            items=[{"role": "user", "content": t} for t in ("Hello.", "I prefer window seats.", "Thanks.")],
        )
        run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)

        def first():
            try:
                run_execute(run.pk)
            finally:
                connection.close()

        thread = threading.Thread(target=first)
        thread.start()
        assert started.wait(10)
        # Silent longer than ACE_RUN_LOST_AFTER_SECONDS: taken for lost, queued again (the test worker is not running).
        assert wait_for(lambda: runs_requeue() == 1, 10)
        assert StrategyRun.objects.get(pk=run.pk).status == RunStatus.QUEUED
        second = run_execute(run.pk)  # waits for the first one's watermark lock, then reads what is left
        thread.join(20)
        import redis

        redis.Redis.from_url(TEST_BROKER_URL).delete("strategies")  # the requeued task: nobody consumes it here
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.attempts == 2
    assert run.messages_processed == 3 and (run.from_seq, run.to_seq) == (1, 3)
    assert second.pk == run.pk
    assert len(llm.requests) == 1  # the second execution found nothing left to read
    assert Record.objects.filter(tenant=api.tenant, valid=True).count() == 1
    assert RunRecord.objects.filter(run=run, action="ADD").count() == 1
    assert Watermark.objects.get(strategy=strategy, session=session).last_seq == 3


def _worker_env(llm: FakeLLM) -> dict:
    db = connection.settings_dict  # the test database, which the worker must use too
    auth = quote(db["USER"], safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else "")
    if db["HOST"].startswith("/"):  # a Unix socket (the embedded server)
        url = f"postgres://{auth}@/{quote(db['NAME'], safe='')}?host={quote(db['HOST'], safe='/')}"
    else:
        port = f":{db['PORT']}" if db.get("PORT") else ""
        url = f"postgres://{auth}@{db['HOST']}{port}/{quote(db['NAME'], safe='')}"
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "aceproject.settings",
        "ACE_DATA_DIR": str(django_settings.ACE_DATA_DIR),
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": TEST_BROKER_URL,
        "ACE_LLM_BASE_URL": llm.base_url,
        "ACE_LLM_MODEL": "fake",
        "ACE_OUTBOUND_ALLOW": "127.0.0.1,::1",  # the fake LLM listens on loopback (the outbound policy)
        "ACE_EMBEDDER": "hash",
        "ACE_RUN_HEARTBEAT_SECONDS": "1",
        "ACE_RUN_LOST_AFTER_SECONDS": "4",
    }


def _start_worker(env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "aceproject", "worker", "-P", "solo", "-Q", "strategies",
         "-l", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_worker_is_killed_is_finished_by_another_within_a_minute(api, session, settings):
    import redis

    redis.Redis.from_url(TEST_BROKER_URL).delete("strategies", "unacked", "unacked_index")
    settings.ACE_RUN_HEARTBEAT_SECONDS, settings.ACE_RUN_LOST_AFTER_SECONDS = 1, 4  # as the workers have them
    started = threading.Event()
    with FakeLLM() as llm, on_test_broker():
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = llm.base_url, "fake"
        llm.remember = {"aisle seats": {"content": "Prefers aisle seats", "about": "preference:seat"}}
        llm.reply = slow_first_answer(llm, 30, started)
        strategy = llm_profile(api.tenant)
        messages_append(
            tenant=api.tenant,
            session_id=session.pk,
            items=[{"role": "user", "content": t} for t in ("Hi.", "I prefer aisle seats.", "Bye.")],
        )
        env = _worker_env(llm)
        first = _start_worker(env)
        second = None
        try:
            run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
            assert started.wait(60), "the first worker never called the LLM"
            assert wait_for(lambda: StrategyRun.objects.get(pk=run.pk).status == RunStatus.RUNNING, 10)
            os.killpg(first.pid, signal.SIGKILL)  # mid-run: its transaction dies with its connection
            first.wait(10)
            killed = time.monotonic()
            second = _start_worker(env)

            def finished():
                runs_requeue()  # what beat does every 15 s
                return StrategyRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED

            assert wait_for(finished, 60), StrategyRun.objects.get(pk=run.pk).error
            taken_up_after = time.monotonic() - killed
        finally:
            for worker in (first, second):
                if worker is not None and worker.poll() is None:
                    os.killpg(worker.pid, signal.SIGTERM)
                    worker.wait(20)
            # The killed worker's task, which the broker would hand out again after its visibility timeout.
            redis.Redis.from_url(TEST_BROKER_URL).delete("strategies", "unacked", "unacked_index")
    run.refresh_from_db()
    assert taken_up_after < 60
    assert run.attempts == 2 and run.messages_processed == 3 and (run.from_seq, run.to_seq) == (1, 3)
    assert "stopped answering" not in run.error
    assert len(llm.requests) == 2  # the killed attempt's call, then the one that finished
    assert Record.objects.filter(tenant=api.tenant, valid=True).count() == 1
    assert RunRecord.objects.filter(run=run).count() == 1
    assert Watermark.objects.get(strategy=strategy, session=session).last_seq == 3
