"""Celery tasks of the webhooks (the `webhooks` queue, its own worker: a slow receiver never holds up other work):
a delivery turn, and the sweep that queues the turns a broker outage or a dead worker lost.

Both are safe to run twice: a turn claims its delivery with a conditional UPDATE first (services/claims.py), so
a duplicate finds nothing to do.
"""

from celery import shared_task

from webhooks_app.services.deliveries import deliveries_sweep_turns, delivery_turn


# The POST's own timeout (ACE_WEBHOOKS_TIMEOUT_SECONDS, bounded to 60 s) is well inside the time limit.
@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def deliver(delivery_id: str | None = None) -> str:
    """One turn: an attempt of the delivery whose turn it is — the tenant served least recently among those below
    ACE_WEBHOOKS_TENANT_CONCURRENCY attempts at once, not necessarily `delivery_id` (the delivery whose creation,
    retry or probe queued this turn, kept for the log)."""
    return delivery_turn().outcome


@shared_task(acks_late=True, time_limit=60, soft_time_limit=50)
def deliveries_sweep() -> int:
    """Periodic (every minute, django-celery-beat): queue the turns owed to deliveries that are due and not taken."""
    return deliveries_sweep_turns()
