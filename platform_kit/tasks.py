"""Queuing follow-up work after a write, without ever failing the write."""

import logging

from celery import current_app

logger = logging.getLogger(__name__)


def enqueue_or_leave_to_sweep(task, *args, what: str, sweep: str) -> bool:
    """`task.delay(*args)`, but a broker that refuses (down, full, misconfigured) only logs a warning: the data
    the work is about is committed, and `sweep` — the periodic task that finds such work still undone — does
    it later. `what` says what was not queued, for the log. False when the broker refused.

    `task` is a Celery task or a task's name: a service that a task module imports queues that module's tasks
    by name, so the two never import each other."""
    try:
        if isinstance(task, str):
            task = current_app.signature(task)
        task.delay(*args)
    except Exception:  # noqa: BLE001 - any broker failure
        logger.warning("could not queue %s; %s will catch up", what, sweep, exc_info=True)
        return False
    return True
