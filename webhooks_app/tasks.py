"""Celery tasks of the webhooks: one attempt of a delivery, and the sweep that queues lost ones again.

Both are safe to run twice: an attempt claims its delivery with a conditional UPDATE first
(services/deliveries.py), so a duplicate task finds nothing to do.
"""

import time

from celery import shared_task

from webhooks_app.services.deliveries import (
    RETRY_IN_TASK_UP_TO,
    SCHEDULE_DIRECTLY_UP_TO,
    deliveries_due,
    delivery_attempt,
    delivery_enqueue,
)


# The POST's own timeout (ACE_WEBHOOKS_TIMEOUT_SECONDS, bounded to 60 s) is well inside the time limit.
@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def deliver(delivery_id: str) -> str:
    """One attempt. A retry due within RETRY_IN_TASK_UP_TO seconds is made here, after a sleep (only with a
    small ACE_WEBHOOKS_RETRY_BASE_SECONDS); one due within SCHEDULE_DIRECTLY_UP_TO seconds is queued with a
    countdown; a later one is left to the sweep (a long countdown would sit in a worker's memory, or come back
    early from Redis)."""
    result = delivery_attempt(delivery_id)
    while result.outcome == "retry" and result.retry_in <= RETRY_IN_TASK_UP_TO:
        time.sleep(result.retry_in)
        result = delivery_attempt(delivery_id)
    if result.outcome == "retry" and result.retry_in <= SCHEDULE_DIRECTLY_UP_TO:
        delivery_enqueue(delivery_id, countdown=result.retry_in)
    return result.outcome


@shared_task(acks_late=True, time_limit=60, soft_time_limit=50)
def deliveries_sweep() -> int:
    """Periodic (every minute, django-celery-beat): queue the deliveries that are due and not taken."""
    due = deliveries_due()
    for delivery_id in due:
        delivery_enqueue(delivery_id)
    return len(due)
