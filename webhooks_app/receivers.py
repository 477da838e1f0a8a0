"""The other apps' signals, turned into webhook events. Each receiver runs after the sender's transaction
committed: a failure here is logged and never reaches the write that sent the signal (already committed)."""

import functools
import logging

from webhooks_app.events import Event
from webhooks_app.services.deliveries import events_publish, user_deliveries_forget

logger = logging.getLogger(__name__)


def _never_raises(receiver):
    @functools.wraps(receiver)
    def wrapper(*args, **kwargs):
        try:
            receiver(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the event is lost, the committed write must not fail
            logger.exception("webhook event from %s not published", receiver.__name__)

    return wrapper


@_never_raises
def record_changed_receiver(sender, *, tenant_id, change, record, actor="", reason="", **kwargs):
    events_publish(
        tenant_id=tenant_id, event=f"record.{change}", data={"record": record, "actor": actor, "reason": reason}
    )


@_never_raises
def run_failed_receiver(sender, *, tenant_id, run, **kwargs):
    events_publish(tenant_id=tenant_id, event=Event.STRATEGY_RUN_FAILED, data={"run": run})


@_never_raises
def import_finished_receiver(sender, *, tenant_id, origin, summary, source_id=None, **kwargs):
    data = {"origin": origin, "source": None if source_id is None else str(source_id), "summary": summary}
    events_publish(tenant_id=tenant_id, event=Event.IMPORT_FINISHED, data=data)


@_never_raises
def budget_crossed_receiver(sender, *, tenant_id, budget_id, threshold, payload, **kwargs):
    data = {**payload, "budget_id": str(budget_id), "threshold": threshold}
    events_publish(tenant_id=tenant_id, event=Event.BUDGET_CROSSED, data=data)


def user_forgetting_receiver(sender, *, tenant_id, user_id, **kwargs):
    # Inside the forgetting transaction: a failure aborts the forget, and the counts go into its audit.
    return user_deliveries_forget(tenant_id=tenant_id, user_id=user_id)
