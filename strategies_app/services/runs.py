"""Strategy runs: asked for by triggers, executed by Celery, safe to repeat.

A run reads a session's messages after the strategy's watermark for that session. The watermark row is
locked (SELECT … FOR UPDATE) for the run's whole transaction — extraction, consolidation, the new watermark
and the run's figures commit together or not at all — so concurrent runs of one strategy on one session
queue behind each other, a retried run starts where the last committed one stopped, and no message is
processed twice or skipped.

A worker that dies mid-run is noticed by its silence: while a run executes, a thread beats its
`heartbeat_at` every ACE_RUN_HEARTBEAT_SECONDS, and the sweep (`tasks.runs_requeue`) queues again a running
run whose heartbeat is older than ACE_RUN_LOST_AFTER_SECONDS. Each execution claims the run with a
conditional UPDATE and holds its attempt number as a token: an execution that finds the run in a live
attempt's hands does nothing, and one that lost its claim (its worker only stalled) neither beats nor
finishes the run any more. Either way the watermark lock above keeps every message processed once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Min, Q
from django.utils import timezone

from memory_app.selectors.records import records_related
from memory_app.services import api_timestamp
from platform_kit.tasks import enqueue_or_leave_to_sweep
from sessions_app.models import Message, Session, Turn, TurnStatus
from sessions_app.services.state import state_get
from strategies_app.extractors.base import ExtractionContext, SourceMessage
from strategies_app.extractors.registry import get_extractor
from strategies_app.models import RunRecord, RunStatus, Strategy, StrategyRun, Trigger, Watermark
from strategies_app.services.consolidation import consolidate
from strategies_app.signals import run_failed

logger = logging.getLogger(__name__)


class StrategyDisabled(Exception):
    """A disabled strategy never runs."""


def _speaker(metadata) -> str:
    """The person a message's metadata names as its speaker ("speaker" or "speaker_name"), or ""."""
    if not isinstance(metadata, dict):
        return ""
    for key in ("speaker", "speaker_name"):
        value = metadata.get(key)
        if isinstance(value, str) and 0 < len(value.strip()) <= 60:
            return value.strip()
    return ""


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
    """Execute a queued run. Re-executing a finished run does nothing, nor does executing one that a live
    worker is running; a failed attempt leaves no trace but its error on the run (its session transaction
    rolled back)."""
    run = StrategyRun.objects.select_related("strategy", "strategy_version", "session", "tenant").get(pk=run_id)
    if run.status == RunStatus.SUCCEEDED:
        return run
    if not run.strategy.enabled:
        _finish(run, RunStatus.FAILED, error="The strategy was disabled before the run started; nothing was read.")
        run_failed_announce(run.pk)
        return run
    attempt = run_claim(run)
    if attempt is None:
        logger.info("strategy run %s is running elsewhere (its heartbeat is recent): not started again", run.pk)
        run.refresh_from_db()
        return run
    run.refresh_from_db()
    started = time.perf_counter()
    if run.session is not None:
        sessions = [run.session]
    else:
        sessions = list(Session.objects.filter(tenant=run.tenant, user_id=run.user_id, deleted_at__isnull=True))
    progress = _Progress()
    with _Heartbeat(run.pk, attempt):
        try:
            for session in sessions:
                _run_session(run, session, progress)
        except IntegrityError as error:
            if _erased_meanwhile(run, sessions, started=started, attempt=attempt):
                return run
            _finish(run, RunStatus.FAILED, error=f"{type(error).__name__}: {error}", started=started, attempt=attempt)
            raise
        except Exception as error:
            _finish(run, RunStatus.FAILED, error=f"{type(error).__name__}: {error}", started=started, attempt=attempt)
            raise
    _finish(run, RunStatus.SUCCEEDED, started=started, attempt=attempt)
    if progress.more and run.session is not None:
        transaction.on_commit(lambda: _follow_up(run))
    return run


def _erased_meanwhile(run: StrategyRun, sessions: list[Session], *, started: float, attempt: int) -> bool:
    """Whether a session the run read was deleted while it ran — its user forgotten, the expected race with an
    erasure: what the run wrote referred to it and was rolled back, and there is nothing left to read. Says so in
    one line and on the run, if the erasure left the run (it deletes the runs of the user's sessions)."""
    gone = [session.pk for session in sessions if not Session.objects.filter(pk=session.pk).exists()]
    if not gone:
        return False
    logger.info(
        "strategy run %s: session %s was deleted while it ran (its user forgotten?); nothing kept", run.pk, gone[0]
    )
    error = f"Session {gone[0]} was deleted while the run read it (its user forgotten?): nothing was kept."
    _finish(run, RunStatus.FAILED, error=error, started=started, attempt=attempt)
    return True


def run_claim(run: StrategyRun) -> int | None:
    """Take the run for this execution: it is not finished, and no live worker holds it (not running, or
    silent for longer than ACE_RUN_LOST_AFTER_SECONDS). Returns the attempt number that is this execution's
    token, or None when the run is not to be executed here."""
    now = timezone.now()
    lost = now - timedelta(seconds=settings.ACE_RUN_LOST_AFTER_SECONDS)
    claimed = (
        StrategyRun.objects.filter(pk=run.pk)
        .exclude(status=RunStatus.SUCCEEDED)
        .filter(~Q(status=RunStatus.RUNNING) | Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=lost))
        .update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1, error="")
    )
    if not claimed:
        return None
    return StrategyRun.objects.filter(pk=run.pk).values_list("attempts", flat=True).get()


class _Heartbeat:
    """While a run executes, a thread beats its heartbeat_at (its own database connection, outside the run's
    transaction). It stops beating once another execution has claimed the run."""

    def __init__(self, run_id, attempt: int):
        self.run_id, self.attempt = run_id, attempt
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name=f"heartbeat {run_id}", daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join(timeout=10)

    def _beat(self):
        try:
            while not self.stopped.wait(settings.ACE_RUN_HEARTBEAT_SECONDS):
                try:
                    held = StrategyRun.objects.filter(
                        pk=self.run_id, attempts=self.attempt, status=RunStatus.RUNNING
                    ).update(heartbeat_at=timezone.now())
                except Exception:  # noqa: BLE001 - a missed beat is retried; the run itself goes on
                    logger.warning("heartbeat of strategy run %s failed", self.run_id, exc_info=True)
                    connection.close()
                    continue
                if not held:
                    return  # claimed by another execution (this one was taken for lost), or finished
        finally:
            connection.close()  # this thread's own connection


def _follow_up(run: StrategyRun) -> None:
    """The batch limit left unread messages: queue the next run at once (unless disabled meanwhile)."""
    try:
        run_request(strategy=run.strategy, trigger=run.trigger, session=run.session, detail=f"continues {run.pk}")
    except StrategyDisabled:
        logger.info("strategy %s was disabled; the rest of session %s stays unread", run.strategy_id, run.session_id)


def _finish(
    run: StrategyRun, status: str, *, error: str = "", started: float | None = None, attempt: int | None = None
) -> None:
    """Record the outcome; an execution that lost its claim (`attempt` no longer the run's) records nothing."""
    run.status, run.error, run.finished_at = status, error[:4000], timezone.now()
    if started is not None:
        run.duration_ms = round((time.perf_counter() - started) * 1000, 2)
    runs = StrategyRun.objects.filter(pk=run.pk)
    if attempt is not None:
        runs = runs.filter(attempts=attempt)
    runs.update(status=run.status, error=run.error, finished_at=run.finished_at, duration_ms=run.duration_ms)


def run_failed_announce(run_id) -> None:
    """Tell the listeners (strategies_app.signals.run_failed) that a run failed for good, once its failure is
    committed: the task calls this when the last retry failed."""
    run = StrategyRun.objects.select_related("strategy", "strategy_version").filter(pk=run_id).first()
    if run is None or run.status != RunStatus.FAILED:
        return
    data = {
        "id": str(run.pk),
        "strategy": run.strategy.name,
        "strategy_id": str(run.strategy_id),
        "strategy_version": run.strategy_version.version,
        "trigger": run.trigger,
        "trigger_detail": run.trigger_detail,
        "session": None if run.session_id is None else str(run.session_id),
        "user_id": run.user_id,
        "attempts": run.attempts,
        "error": run.error,
        "queued_at": api_timestamp(run.queued_at),
        "started_at": api_timestamp(run.started_at),
        "finished_at": api_timestamp(run.finished_at),
    }
    transaction.on_commit(lambda: run_failed.send(sender=StrategyRun, tenant_id=run.tenant_id, run_id=run.pk, run=data))


def runs_lost(*, now=None, limit: int = 1000) -> list:
    """Runs to queue again: running ones whose worker went silent (no heartbeat for
    ACE_RUN_LOST_AFTER_SECONDS), and queued ones left waiting ACE_RUN_REQUEUE_QUEUED_SECONDS since they were
    last queued (a broker outage kept them from the queue). Each is marked queued again here, by a
    conditional UPDATE, so of two sweeps only one sends it."""
    now = now or timezone.now()
    lost = now - timedelta(seconds=settings.ACE_RUN_LOST_AFTER_SECONDS)
    waiting = now - timedelta(seconds=settings.ACE_RUN_REQUEUE_QUEUED_SECONDS)
    silent = Q(status=RunStatus.RUNNING) & (
        Q(heartbeat_at__lt=lost) | Q(heartbeat_at__isnull=True, started_at__lt=lost)
    )
    forgotten = Q(status=RunStatus.QUEUED) & (
        Q(heartbeat_at__lt=waiting) | Q(heartbeat_at__isnull=True, queued_at__lt=waiting)
    )
    candidates = list(StrategyRun.objects.filter(silent | forgotten).values_list("pk", "status")[:limit])
    sent = []
    for run_id, status in candidates:
        condition = silent if status == RunStatus.RUNNING else forgotten
        changes = {"status": RunStatus.QUEUED, "heartbeat_at": now}
        if status == RunStatus.RUNNING:
            changes["error"] = "Its worker stopped answering; queued again"
        if StrategyRun.objects.filter(condition, pk=run_id).update(**changes):
            sent.append(run_id)
    return sent


_RUN_FIGURES = [
    "extractor", "from_seq", "to_seq", "sessions_processed", "messages_processed", "candidates", "added", "updated",
    "invalidated", "unchanged", "decisions", "input_tokens", "output_tokens", "llm_latency_ms",
]  # fmt: skip


def _run_session(run: StrategyRun, session: Session, progress: _Progress) -> None:
    version = run.strategy_version
    with transaction.atomic():
        watermark, _ = Watermark.objects.get_or_create(
            strategy=run.strategy, session=session, defaults={"tenant_id": run.tenant_id}
        )
        watermark = Watermark.objects.select_for_update().get(pk=watermark.pk)
        # A streaming turn's assistant placeholder is not final yet: stop before it (the next run reads it).
        unfinished = Turn.objects.filter(session=session, status=TurnStatus.STREAMING).aggregate(
            seq=Min("assistant_message__seq")
        )["seq"]
        pending = Message.objects.filter(session=session, seq__gt=watermark.last_seq)
        if unfinished is not None:
            pending = pending.filter(seq__lt=unfinished)
        rows = list(
            pending.order_by("seq").values("id", "seq", "role", "content", "created_at", "metadata")[
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
                id=str(r["id"]),
                seq=r["seq"],
                role=r["role"],
                content=r["content"],
                created_at=r["created_at"],
                speaker=_speaker(r["metadata"]),
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
        # The figures only: the status and the attempt belong to the claim (another execution may hold it now).
        run.save(update_fields=_RUN_FIGURES)
        RunRecord.objects.bulk_create(
            [RunRecord(run=run, tenant_id=run.tenant_id, record_id=d.record, action=d.action) for d in decisions],
            ignore_conflicts=True,
        )


def user_runs_forget(*, tenant_id, user_id: str) -> dict[str, int]:
    """Delete the runs for the user or over their sessions (their decisions quote the user's messages)."""
    from platform_kit.db import cascade_delete

    sessions = f"SELECT id FROM {Session._meta.db_table} WHERE tenant_id = %s AND user_id = %s"
    return cascade_delete(
        StrategyRun, f"tenant_id = %s AND (user_id = %s OR session_id IN ({sessions}))", [tenant_id, user_id] * 2
    )


def user_forgetting_handler(sender, tenant_id, user_id, **kwargs):
    # Inside the forgetting transaction (sessions_app.services.forget): the counts go into its audit.
    return user_runs_forget(tenant_id=tenant_id, user_id=user_id)
