"""Background work in a test, in-process and on demand: the burst runner (as Sentry's and Zulip's suites do).

Tasks are sent as in production — `delay()`, `apply_async()`, `enqueue_or_leave_to_sweep()`, after the commit that
asked for them — but to an in-memory broker (kombu's `memory://` transport), where they wait. `burst()` then runs
what waits, in this thread, until nothing does: each message as a worker runs it (`celery.worker.request.Request`:
not eager, acknowledged late, retried through the broker, its queue in `delivery_info`), the tasks those tasks
queue included. A task with a countdown runs when it is due (the burst waits for it, as a worker's timer does),
if that is within `within` seconds; a later one stays queued.

So a test sees the order and the transaction boundaries of production without a worker thread to wait for, and
"nothing more happened" is a fact (the queues are empty), not a pause. Tests whose point is the worker or the broker
themselves (a crash, an outage, queues that must not hold each other up) keep the real ones: `celery_worker` in
tests/conftest.py."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from celery.signals import task_postrun
from celery.worker.request import Request

MEMORY_BROKER_URL = "memory://localhost/"


@contextlib.contextmanager
def broker_swapped(url: str, *, result_backend: str | None = None):
    """The Celery app of this process publishes to (and reads from) the broker at `url` while inside."""
    from kombu import pools

    from aceproject.celery import app

    names = ("broker_url", "broker_write_url", "broker_read_url", "broker_transport_options", "result_backend")
    saved = {name: app.conf[name] for name in names}

    def reset_connections():
        pools.reset()  # closes every pooled connection and forgets the pools
        app._pool = None  # a new pool for the new broker
        app.amqp._producer_pool = None  # whose producers held the old pool's connections

    app.conf.update(broker_url=url, broker_write_url=url, broker_read_url=url, broker_transport_options={})
    if result_backend is not None:
        app.conf.update(result_backend=result_backend)
    reset_connections()
    try:
        yield url
    finally:
        app.conf.update(saved)
        reset_connections()


@dataclass
class Ran:
    """A task the burst ran: its name, arguments and final state (SUCCESS, RETRY, FAILURE...)."""

    name: str
    args: tuple
    kwargs: dict
    state: str


@dataclass
class _Held:
    due: float  # time.monotonic() when it may run
    request: Request = field(compare=False)


class Burst:
    """Runs the tasks queued on the in-memory broker; see the module's docstring. Call it: `burst()`."""

    def __init__(self, app):
        self.app = app
        self.connection = app.connection_for_read()
        self.channel = self.connection.default_channel
        self.held: list[_Held] = []  # taken with a countdown not yet due, unacknowledged (a worker's timer)
        self.ran: list[Ran] = []  # everything run so far in this test

    def queued(self) -> list[str]:
        """The names of the tasks waiting (in the queues, or taken and due later), queue by queue."""
        names = []
        for queue in self.app.amqp.queues:
            messages = self.channel._queue_for(queue).queue  # the memory transport's own deque, read here only
            names.extend(message["headers"]["task"] for message in messages)
        return [*names, *(held.request.name for held in self.held)]

    def __call__(self, *, within: float = 5.0, max_tasks: int = 2000) -> list[Ran]:
        """Run every queued task, and the tasks they queue, until none is left that is due within `within`
        seconds from now. Returns what ran in this burst. Raises if more than `max_tasks` ran (a task that queues
        itself forever)."""
        horizon = time.monotonic() + within
        ran: list[Ran] = []

        def record(sender=None, task_id=None, args=None, kwargs=None, state=None, **extra):
            ran.append(Ran(sender.name, tuple(args or ()), dict(kwargs or {}), state))

        task_postrun.connect(record, weak=False)
        try:
            while True:
                request = self._next(horizon)
                if request is None:
                    break
                request.execute()
                assert len(ran) <= max_tasks, f"more than {max_tasks} tasks ran: {[r.name for r in ran[-20:]]}"
        finally:
            task_postrun.disconnect(record)
        self.ran.extend(ran)
        return ran

    def _next(self, horizon: float) -> Request | None:
        """The next task to run: one due from the queues (taken in turn, as a worker consuming them all does), else
        the earliest held one once it is due, if before `horizon`; None when there is nothing more to run."""
        while True:
            for queue in self.app.amqp.queues:
                message = self.channel.basic_get(queue=queue, no_ack=False)
                if message is None:
                    continue
                request = Request(
                    message,
                    on_ack=message.ack_log_error,
                    on_reject=message.reject_log_error,
                    app=self.app,
                    hostname="burst@localhost",
                )
                due = self._due(request)
                if due <= time.monotonic():
                    return request
                self.held.append(_Held(due, request))
                break  # look at the queues again from the first
            else:
                break
        if not self.held:
            return None
        self.held.sort(key=lambda held: held.due)
        if self.held[0].due > horizon:
            return None
        held = self.held.pop(0)
        # Waiting for the countdown the code under test asked for (a worker's timer does the same), not a pause.
        time.sleep(max(0.0, held.due - time.monotonic()))
        return held.request

    @staticmethod
    def _due(request: Request) -> float:
        if request.eta is None:
            return 0.0
        eta = request.eta if request.eta.tzinfo else request.eta.replace(tzinfo=UTC)
        return time.monotonic() + (eta - datetime.now(UTC)).total_seconds()

    def close(self):
        for queue in self.app.amqp.queues:
            self.channel.queue_purge(queue)
        self.held.clear()
        self.connection.release()


@contextlib.contextmanager
def bursting():
    """While inside, this process's tasks go to an empty in-memory broker; yields the Burst that runs them."""
    from aceproject.celery import app

    app.loader.import_default_modules()  # every app's tasks module, as a worker imports them when it starts
    with broker_swapped(MEMORY_BROKER_URL):
        runner = Burst(app)
        for queue in app.amqp.queues:
            runner.channel.queue_declare(queue=queue)
            runner.channel.queue_purge(queue)
        try:
            yield runner
        finally:
            runner.close()
