"""Beat runs on every host: two real beat processes on one database and one broker send each periodic task once,
one of them leading and the other standing by; a leader that loses its lock connection stops sending, and when
the leader is killed the other takes over within ACE_BEAT_STANDBY_SECONDS (platform_kit.beat)."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from platform_kit.beat import BEAT_LOCK_KEY
from tests.conftest import TEST_BROKER_URL
from tests.support.processes import ROOT, process_env
from tests.support.waiting import wait_for

PROBE_QUEUE = "beat_probe"
EVERY = 1.0  # seconds between runs of the probe task
STANDBY_SECONDS = 0.5


class Beat:
    """One `celery -A aceproject beat`, as the Procfile runs it, its log in a file."""

    def __init__(self, name: str, log_dir):
        self.name = name
        self.log = log_dir / f"{name}.log"
        env = process_env(CELERY_BROKER_URL=TEST_BROKER_URL, ACE_BEAT_STANDBY_SECONDS=str(STANDBY_SECONDS))
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "aceproject", "beat", "--loglevel", "INFO"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.log.read_text()

    def leading(self) -> bool:
        """Its last word on the lock was that it leads."""
        lines = [line for line in self.text().splitlines() if "Beat: leader" in line or "Beat: lost" in line]
        return bool(lines) and "Beat: leader" in lines[-1]

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Arrivals:
    """When each probe task reached the broker: a thread watches its queue's length (every 20 ms) from the start."""

    def __init__(self, broker: redis.Redis):
        self.broker = broker
        self.times: list[float] = []
        self._seen = broker.llen(PROBE_QUEUE)  # already there: no time of arrival to speak of
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while not self._stopped.wait(0.02):
            length = self.broker.llen(PROBE_QUEUE)
            self.times += [time.monotonic()] * (length - self._seen)
            self._seen = max(self._seen, length)

    def stop(self):
        self._stopped.set()
        self._thread.join(timeout=5)

    def since(self, start: float) -> list[float]:
        return [t for t in self.times if t >= start]

    def assert_sent_once_per_interval(self):
        sent = list(self.times)
        gaps = [round(b - a, 2) for a, b in itertools.pairwise(sent)]
        assert all(gap >= EVERY * 0.6 for gap in gaps), f"a run sent twice: gaps {gaps}"
        assert len(sent) <= (sent[-1] - sent[0]) / EVERY + 2, f"{len(sent)} runs: {gaps}"


def _lock_holder_pid() -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %s::oid AND objsubid = 1",
            [BEAT_LOCK_KEY],
        )
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.fixture
def probe(transactional_db):
    """The only enabled periodic task: one run a second, sent to a queue of its own that no worker reads."""
    PeriodicTask.objects.update(enabled=False)
    every = IntervalSchedule.objects.create(every=int(EVERY), period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="beat probe", task="tests.beat_probe", interval=every, queue=PROBE_QUEUE)
    PeriodicTasks.update_changed()
    broker = redis.Redis.from_url(TEST_BROKER_URL)
    broker.delete(PROBE_QUEUE)
    yield broker
    broker.delete(PROBE_QUEUE)


def test_two_beats_send_each_run_once_and_the_standby_takes_over_from_a_dead_leader(probe, tmp_path):
    beats = [Beat("a", tmp_path), Beat("b", tmp_path)]
    arrivals = Arrivals(probe)
    try:
        # One leads, the other stands by.
        assert wait_for(lambda: any(beat.leading() for beat in beats), 60), "\n".join(b.text() for b in beats)
        assert wait_for(lambda: all("Beat: standby" in b.text() or b.leading() for b in beats), 30)
        leader = next(beat for beat in beats if beat.leading())
        standby = next(beat for beat in beats if beat is not leader)
        assert "Beat: standby" in standby.text() and "Beat: leader" not in standby.text()

        # Both running: each run is sent once.
        start = time.monotonic()
        assert wait_for(lambda: len(arrivals.since(start)) >= 5, 30), "the leader sends nothing"
        arrivals.assert_sent_once_per_interval()

        # The leader's lock session ends under it (a database restart, a proxy dropping it): it stops sending,
        # and whichever beat takes the lock next sends on, still once per run.
        holder = _lock_holder_pid()
        assert holder
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [holder])
        assert wait_for(lambda: "Beat: lost the lock" in leader.text(), 15), leader.text()[-3000:]
        assert wait_for(lambda: _lock_holder_pid() not in (None, holder), 15)
        mark = time.monotonic()
        assert wait_for(lambda: len(arrivals.since(mark)) >= 3, 30), "nobody sends after the lock was lost"
        arrivals.assert_sent_once_per_interval()

        # The leader is killed (the kernel's OOM killer, a host gone): the standby takes over within
        # ACE_BEAT_STANDBY_SECONDS, and what the dead leader sent is not sent again.
        assert wait_for(lambda: sum(beat.leading() for beat in beats) == 1, 15)
        leader = next(beat for beat in beats if beat.leading())
        standby = next(beat for beat in beats if beat is not leader)
        taken_over = standby.text().count("Beat: leader")
        killed = time.monotonic()
        leader.process.send_signal(signal.SIGKILL)
        leader.process.wait(timeout=10)
        assert wait_for(lambda: standby.text().count("Beat: leader") > taken_over, STANDBY_SECONDS + 10), (
            standby.text()[-3000:]
        )
        assert wait_for(lambda: len(arrivals.since(killed)) >= 3, 30), "the standby did not take over"
        first = arrivals.since(killed)[0] - killed
        assert first < STANDBY_SECONDS + EVERY + 5, f"first run {first:.1f} s after the kill"
        arrivals.assert_sent_once_per_interval()
    finally:
        arrivals.stop()
        for beat in beats:
            beat.stop()
