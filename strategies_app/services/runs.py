"""Strategy runs: asked for by triggers, executed by Celery, safe to repeat.

A run reads a session's messages after the strategy's watermark for that session. The watermark row is
locked (SELECT … FOR UPDATE) for the run's whole transaction — extraction, consolidation, the new watermark
and the run's figures commit together or not at all — so concurrent runs of one strategy on one session
queue behind each other, a retried run starts where the last committed one stopped, and no message is
processed twice or skipped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, Min
from django.utils import timezone

from memory_app.selectors.records import records_related
from platform_kit.tasks import enqueue_or_leave_to_sweep
from sessions_app.models import Message, Session, Turn, TurnStatus
from sessions_app.services.state import state_get
from strategies_app.extractors.base import ExtractionContext, SourceMessage
from strategies_app.extractors.registry import get_extractor
from strategies_app.models import RunRecord, RunStatus, Strategy, StrategyRun, Trigger, Watermark
from strategies_app.services.consolidation import consolidate

logger = logging.getLogger(__name__)


class StrategyDisabled(Exception):
    """A disabled strategy never runs."""


def run_request(
    *,
    strategy: Strategy,
    trigger: str,
    session: Session | None = None,
    user_id: str = "",
    detail: str = "",
    state_changes: dict | None = None,
) -> StrategyRun:
    """Queue a run of the strategy's current version (on commit). A run of the same strategy, session and
    trigger that is still waiting absorbs the request: it will read the new messages anyway."""
    if not strategy.enabled:
        raise StrategyDisabled(f"The strategy {strategy.name!r} is disabled; enable it to run it.")
    if session is not None and not state_changes and trigger != Trigger.MANUAL:
        waiting = StrategyRun.objects.filter(
            strategy=strategy, session=session, trigger=trigger, status=RunStatus.QUEUED, attempts=0
        ).first()
        if waiting is not None:
            return waiting
    version = strategy.versions.get(version=strategy.version)
    run = StrategyRun.objects.create(
        tenant_id=strategy.tenant_id,
        strategy=strategy,
        strategy_version=version,
        trigger=trigger,
        trigger_detail=detail[:255],
        session=session,
        user_id=session.user_id if session is not None else user_id,
        state_changes=state_changes or {},
    )
    transaction.on_commit(lambda: run_enqueue(run.pk))
    return run


def run_enqueue(run_id) -> None:
    """Queue a run without ever failing the write that asked for it: a run a broker outage kept from the
    queue is still `queued` in the database, and runs_requeue sends it again."""
    enqueue_or_leave_to_sweep(
        "strategies_app.tasks.run_strategy", str(run_id), what=f"strategy run {run_id}", sweep="runs_requeue"
    )


@dataclass
class _Progress:
    more: bool = False  # the batch limit left messages for a follow-up run


def run_execute(run_id) -> StrategyRun:
    """Execute a queued run. Re-executing a finished run does nothing; a failed attempt leaves no trace
    but its error on the run (its session transaction rolled back)."""
    run = StrategyRun.objects.select_related("strategy", "strategy_version", "session", "tenant").get(pk=run_id)
    if run.status == RunStatus.SUCCEEDED:
        return run
    if not run.strategy.enabled:
        _finish(run, RunStatus.FAILED, error="The strategy was disabled before the run started; nothing was read.")
        return run
    StrategyRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=timezone.now(), attempts=F("attempts") + 1, error=""
    )
    run.refresh_from_db()
    started = time.perf_counter()
    if run.session is not None:
        sessions = [run.session]
    else:
        sessions = list(Session.objects.filter(tenant=run.tenant, user_id=run.user_id, deleted_at__isnull=True))
    progress = _Progress()
    try:
        for session in sessions:
            _run_session(run, session, progress)
    except Exception as error:
        _finish(run, RunStatus.FAILED, error=f"{type(error).__name__}: {error}", started=started)
        raise
    _finish(run, RunStatus.SUCCEEDED, started=started)
    if progress.more and run.session is not None:
        transaction.on_commit(lambda: _follow_up(run))
    return run


def _follow_up(run: StrategyRun) -> None:
    """The batch limit left unread messages: queue the next run at once (unless disabled meanwhile)."""
    try:
        run_request(strategy=run.strategy, trigger=run.trigger, session=run.session, detail=f"continues {run.pk}")
    except StrategyDisabled:
        logger.info("strategy %s was disabled; the rest of session %s stays unread", run.strategy_id, run.session_id)


def _finish(run: StrategyRun, status: str, *, error: str = "", started: float | None = None) -> None:
    run.status, run.error, run.finished_at = status, error[:4000], timezone.now()
    if started is not None:
        run.duration_ms = round((time.perf_counter() - started) * 1000, 2)
    StrategyRun.objects.filter(pk=run.pk).update(
        status=run.status, error=run.error, finished_at=run.finished_at, duration_ms=run.duration_ms
    )


def _run_session(run: StrategyRun, session: Session, progress: _Progress) -> None:
    version = run.strategy_version
    with transaction.atomic():
        watermark, _ = Watermark.objects.get_or_create(strategy=run.strategy, session=session)
        watermark = Watermark.objects.select_for_update().get(pk=watermark.pk)
        # A streaming turn's assistant placeholder is not final yet: stop before it (the next run reads it).
        unfinished = Turn.objects.filter(session=session, status=TurnStatus.STREAMING).aggregate(
            seq=Min("assistant_message__seq")
        )["seq"]
        pending = Message.objects.filter(session=session, seq__gt=watermark.last_seq)
        if unfinished is not None:
            pending = pending.filter(seq__lt=unfinished)
        rows = list(
            pending.order_by("seq").values("id", "seq", "role", "content", "created_at")[
                : settings.ACE_STRATEGY_BATCH + 1
            ]
        )
        if len(rows) > settings.ACE_STRATEGY_BATCH:
            rows, progress.more = rows[:-1], True
        if not rows and not run.state_changes:
            return
        extractor = get_extractor(version.extractor)
        messages = [
            SourceMessage(
                id=str(r["id"]), seq=r["seq"], role=r["role"], content=r["content"], created_at=r["created_at"]
            )
            for r in rows
        ]
        extraction = extractor.extract(
            ExtractionContext(
                strategy_type=version.type,
                prompt=version.prompt,
                messages=messages,
                existing=records_related(
                    tenant=run.tenant,
                    user_id=session.user_id,
                    type=version.type,
                    first_slot=f"task:{session.pk}" if version.type == "task" else "",
                    limit=settings.ACE_STRATEGY_RELATED,
                ),
                state=state_get(session=session).data,
                state_changes=run.state_changes or None,
                session_id=str(session.pk),
                user_id=session.user_id,
                session_name=session.name,
            )
        )
        # Whatever the extractor (the rules, a model following a custom prompt), a memory that would keep a
        # credential is not written; the run's candidate count still says it was proposed.
        kept = [candidate for candidate in extraction.candidates if not candidate.holds_secret()]
        if len(kept) < len(extraction.candidates):
            logger.info(
                "run %s: %d candidate(s) held a secret and were dropped", run.pk, len(extraction.candidates) - len(kept)
            )
        decisions = consolidate(
            tenant=run.tenant,
            user_id=session.user_id,
            session=session,
            candidates=kept,
            strategy=run.strategy.name,
            strategy_version=version.version,
        )
        if rows:
            watermark.last_seq = rows[-1]["seq"]
        watermark.pending_score = 0.0
        watermark.updated_at = timezone.now()
        watermark.save()
        counts = {
            action: sum(1 for d in decisions if d.action == action)
            for action in ("ADD", "UPDATE", "INVALIDATE", "NOOP")
        }
        run.refresh_from_db()
        run.extractor = extractor.name
        if rows and run.session_id is not None:  # a range means something for one session only
            run.from_seq = rows[0]["seq"] if run.from_seq is None else run.from_seq
            run.to_seq = rows[-1]["seq"]
        run.sessions_processed += 1
        run.messages_processed += len(rows)
        run.candidates += len(extraction.candidates)
        run.added += counts["ADD"]
        run.updated += counts["UPDATE"]
        run.invalidated += counts["INVALIDATE"]
        run.unchanged += counts["NOOP"]
        run.decisions = [*run.decisions, *(d.as_dict() for d in decisions)][-500:]
        run.input_tokens += extraction.input_tokens
        run.output_tokens += extraction.output_tokens
        run.llm_latency_ms += extraction.latency_ms if extractor.calls_model else 0.0
        run.save()
        RunRecord.objects.bulk_create(
            [RunRecord(run=run, record_id=d.record, action=d.action) for d in decisions],
            ignore_conflicts=True,
        )
