"""The base of every Celery task (retried, not failed, while the database is unreachable), queuing follow-up
work after a write without ever failing the write, and doing small queued tasks in batches."""

import contextlib
import logging
import random

import celery
from celery import current_app

from platform_kit.outages import database_unavailable

logger = logging.getLogger(__name__)

# A task that finds the database unreachable is sent again after 2, 4, 8, ... seconds, then every minute,
# for about an hour; the periodic sweeps catch up with anything still undone after that.
OUTAGE_RETRY_FIRST_SECONDS = 2
OUTAGE_RETRY_MAX_SECONDS = 60
OUTAGE_MAX_RETRIES = 64


class Task(celery.Task):
    """Every task of the project (aceproject.celery makes it the app's task class).

    A task that fails because the database cannot be reached (stopped, restarting, out of connections) is
    not a failed task: it is retried with backoff. The retry is a new message published before the one being
    run is acknowledged (`acks_late`), so nothing is dropped. Retries share the task's count
    (`request.retries`) with the task's own."""

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except celery.exceptions.Retry:
            raise
        except Exception as error:
            reason = database_unavailable(error)
            request = self.request
            if reason is None or request.called_directly or request.is_eager:
                raise
            countdown = min(OUTAGE_RETRY_MAX_SECONDS, OUTAGE_RETRY_FIRST_SECONDS * 2 ** min(request.retries, 10))
            countdown += random.uniform(0, countdown / 4)  # noqa: S311 - jitter, not a secret
            logger.warning(
                "%s[%s]: the database is unavailable (%s); retrying in %.0f s", self.name, request.id, reason, countdown
            )
            raise self.retry(exc=error, countdown=countdown, max_retries=OUTAGE_MAX_RETRIES) from error


def enqueue_or_leave_to_sweep(task, *args, what: str, sweep: str, countdown: float | None = None) -> bool:
    """`task.delay(*args)` (after `countdown` seconds if given), but a broker that refuses (down, full,
    misconfigured) only logs a warning: the data the work is about is committed, and `sweep` — the periodic task
    that finds such work still undone — does it later. `what` says what was not queued, for the log. False when
    the broker refused.

    `task` is a Celery task or a task's name: a service that a task module imports queues that module's tasks
    by name, so the two never import each other."""
    try:
        if isinstance(task, str):
            task = current_app.signature(task)
        task.apply_async(args, countdown=countdown)
    except Exception:  # noqa: BLE001 - any broker failure
        logger.warning("could not queue %s; %s will catch up", what, sweep, exc_info=True)
        return False
    return True


@contextlib.contextmanager
def queued_siblings(task, *, limit: int):
    """Inside a task whose single argument is a list of ids: take up to `limit` more ids from the tasks of the
    same name waiting next in its queue, so that a backlog of small tasks (a few ids each, one per write) is
    done in a few large batches. Yields the extra ids. The tasks taken are acknowledged when the block
    succeeds and put back in the queue when it raises; until then the broker holds them as unacknowledged,
    so a worker that dies meanwhile loses none (Redis hands them out again; the sweeps catch up).

    Stops at the first waiting task of another name or with a countdown, which stays where it is."""
    queue = (task.request.delivery_info or {}).get("routing_key")
    if limit <= 0 or not queue or task.request.is_eager:
        yield []
        return
    taken, ids = [], []
    with task.app.connection_for_read() as conn:
        try:
            channel = conn.default_channel
            while len(ids) < limit:
                message = channel.basic_get(queue=queue, no_ack=False)
                if message is None:
                    break
                body = message.decode()
                args = body[0] if isinstance(body, list | tuple) and body else []
                if message.headers.get("task") != task.name or message.headers.get("eta") or len(args) != 1:
                    message.requeue()
                    break
                taken.append(message)
                ids.extend(args[0])
        except Exception:  # noqa: BLE001 - the broker failed: do this task's own ids only
            logger.warning("could not take waiting %s tasks from %s", task.name, queue, exc_info=True)
            for message in taken:
                message.requeue()
            taken, ids = [], []
        try:
            yield ids
        except BaseException:
            for message in taken:
                message.requeue()
            raise
        for message in taken:
            message.ack()
