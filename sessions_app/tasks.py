from datetime import timedelta

from celery import shared_task
from django.conf import settings

from sessions_app.services.turns import turns_close_abandoned


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def close_abandoned_turns() -> int:
    """Periodic (django-celery-beat, every minute by default): close turns never completed in time."""
    return turns_close_abandoned(older_than=timedelta(seconds=settings.ACE_TURN_TIMEOUT_SECONDS))
