from datetime import timedelta

from celery import shared_task
from django.conf import settings

from sessions_app.search import messages_index, messages_unindexed
from sessions_app.services.budget_alerts import budget_alert_send, budget_alerts_pending
from sessions_app.services.turns import turns_close_abandoned


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def close_abandoned_turns() -> int:
    """Periodic (django-celery-beat, every minute by default): close turns never completed in time."""
    return turns_close_abandoned(older_than=timedelta(seconds=settings.ACE_TURN_TIMEOUT_SECONDS))


@shared_task(acks_late=True, time_limit=300, soft_time_limit=240)
def index_messages(message_ids: list[str]) -> int:
    """Build the search vectors of long messages after their write (see sessions_app.search)."""
    return messages_index(message_ids)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=540)
def index_pending_messages(limit: int = 20_000) -> int:
    """Periodic (every minute): index long messages whose task never ran (a broker outage, a lost worker)."""
    return messages_index(messages_unindexed(limit))


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def send_budget_alert(crossing_id: str) -> dict:
    """A budget crossing's alerts by email, Feishu and DingTalk (each channel sent once; see budget_alerts)."""
    return budget_alert_send(crossing_id=crossing_id)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=540)
def send_pending_budget_alerts() -> int:
    """Periodic (every 5 minutes): send again the alerts of the last day's crossings that did not go out."""
    pending = budget_alerts_pending()
    for crossing_id in pending:
        send_budget_alert.delay(str(crossing_id))
    return len(pending)
