"""Celery tasks of the strategies: one run, the scheduled sweep of a strategy, and the requeue of lost runs.

Tasks take ids and are safe to run twice (see services/runs.py): `acks_late`, so a worker that dies
mid-run leaves the message to another; retries with exponential backoff on any failure of the run.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from sessions_app.models import Session
from strategies_app.models import RunStatus, Strategy, StrategyRun, Trigger, Watermark
from strategies_app.services.runs import run_enqueue, run_execute, run_failed_announce, run_request, runs_lost
from strategies_app.triggers import enabled_strategies, messages_evaluate, turn_evaluate

logger = logging.getLogger(__name__)

MAX_RETRIES = 4
BACKOFF = 10  # seconds, doubled each retry (10, 20, 40, 80), with jitter


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES, time_limit=300, soft_time_limit=240)
def run_strategy(self, run_id: str) -> str:
    try:
        run = run_execute(run_id)
    except StrategyRun.DoesNotExist:
        logger.warning("strategy run %s no longer exists", run_id)
        return "missing"
    except (Exception, SoftTimeLimitExceeded) as error:  # noqa: BLE001 - the run records it; we retry
        # Only while this execution still held the run: one that was taken for lost (another worker runs it
        # now, which leaves it `running`) must not touch it.
        ours = StrategyRun.objects.filter(pk=run_id).exclude(status=RunStatus.RUNNING)
        if isinstance(error, SoftTimeLimitExceeded):
            ours.update(
                status=RunStatus.FAILED,
                error=f"Timed out after {self.soft_time_limit or 240} s",
                finished_at=timezone.now(),
            )
        if self.request.retries >= MAX_RETRIES:
            run_failed_announce(run_id)
            raise
        countdown = BACKOFF * 2**self.request.retries
        run = ours.first()
        if run is not None:
            ours.update(
                status=RunStatus.QUEUED,
                heartbeat_at=timezone.now(),
                error=f"Attempt {run.attempts} failed: {run.error or error}; retrying in about {countdown} s",
            )
        raise self.retry(exc=error, countdown=countdown) from error
    return run.status


@shared_task(acks_late=True, time_limit=300, soft_time_limit=240)
def sessions_messages_triggers(entries: list[list]) -> int:
    """Evaluate the triggers of newly appended messages, for each [session id, tenant id, message ids] of
    one write (queued by the messages_appended receiver). A session whose evaluation fails is logged and
    the others go on; a lost evaluation costs latency only: the strategy's schedule reads every message it
    has not read. Returns how many sessions were evaluated."""
    done = 0
    strategies: dict[str, list[Strategy]] = {}  # by tenant: a write's sessions are mostly one tenant's
    for session_id, tenant_id, message_ids in entries:
        try:
            if tenant_id not in strategies:
                strategies[tenant_id] = enabled_strategies(tenant_id)
            messages_evaluate(
                session_id=session_id, tenant_id=tenant_id, message_ids=message_ids, strategies=strategies[tenant_id]
            )
        except SoftTimeLimitExceeded:
            raise
        except Exception:  # noqa: BLE001 - one session's failure must not drop the others'
            logger.exception("triggers of session %s failed; the scheduled run will catch up", session_id)
        else:
            done += 1
    return done


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def turn_triggers(session_id: str, tenant_id: str, tool_names: list[str], message_ids: list[str]) -> None:
    """A completed chat turn's triggers (queued by the turn_completed receiver)."""
    turn_evaluate(session_id=session_id, tenant_id=tenant_id, tool_names=tool_names, message_ids=message_ids)


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def messages_triggers(session_id: str, tenant_id: str, message_ids: list[str]) -> None:
    """One session's triggers: what writes queued before sessions_messages_triggers existed (kept so that
    such tasks still waiting in a broker run after an upgrade)."""
    messages_evaluate(session_id=session_id, tenant_id=tenant_id, message_ids=message_ids)


@shared_task(acks_late=True, time_limit=300, soft_time_limit=240)
def strategy_scheduled(strategy_id: str, limit: int = 1000) -> int:
    """The strategy's periodic run (django-celery-beat): queue a run for every recently active session
    with messages the strategy has not read. Returns how many were queued."""
    strategy = Strategy.objects.filter(pk=strategy_id, enabled=True).select_related("tenant").first()
    if strategy is None:
        return 0
    since = timezone.now() - timedelta(days=settings.ACE_STRATEGY_SCHEDULE_LOOKBACK_DAYS)
    read = Watermark.objects.filter(strategy=strategy, session=OuterRef("pk")).values("last_seq")[:1]
    sessions = (
        Session.objects.filter(tenant=strategy.tenant, deleted_at__isnull=True, last_message_at__gte=since)
        .annotate(read=Subquery(read))
        .filter(Q(read__isnull=True, last_seq__gt=0) | Q(last_seq__gt=F("read")))
        .order_by("last_message_at")[:limit]
    )
    queued = 0
    for session in sessions:
        run_request(strategy=strategy, trigger=Trigger.SCHEDULE, session=session, detail="scheduled")
        queued += 1
    return queued


@shared_task(acks_late=True, time_limit=60, soft_time_limit=50)
def runs_requeue() -> int:
    """Periodic (every 15 s): send again the runs whose worker died (silent for ACE_RUN_LOST_AFTER_SECONDS)
    and those a broker outage kept from the queue. Safe: executing a run twice processes nothing twice."""
    count = 0
    for run_id in runs_lost():
        run_enqueue(run_id)
        count += 1
    return count
