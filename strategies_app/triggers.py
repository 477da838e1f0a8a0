"""Triggers: the signals of sessions_app (sent after commit) that ask for strategy runs. New messages are
evaluated by a task (the receiver only queues it); completed turns and state changes right away.

- tool-call completion: a `toolResult` message arrives, or a turn with tool calls completes;
- task stage change: a state key the strategy watches changes value;
- confidence threshold: the scorer rates each new message; one at or above `message_threshold`, or the
  unread messages' scores adding up to `accumulated_threshold`, starts a run;
- schedule and manual runs start elsewhere (tasks.strategy_scheduled, the API and the admin).
"""

from __future__ import annotations

import contextlib
import logging

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Value, When
from django.db.models.functions import Substr

from platform_kit.tasks import enqueue_or_leave_to_sweep
from sessions_app.models import Message, Session
from strategies_app.models import Strategy, Trigger, Watermark
from strategies_app.services.runs import run_request

logger = logging.getLogger(__name__)

SCORED_CHARS = 2000  # the scorer rates a message by its start


def enabled_strategies(tenant_id) -> list[Strategy]:
    return list(Strategy.objects.filter(tenant_id=tenant_id, enabled=True))


def _add_pending_score(strategy: Strategy, session_id, amount: float) -> float:
    """Add to the strategy's unread score of the session (creating its watermark); the new total."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Watermark._meta.db_table} (strategy_id, session_id, tenant_id, last_seq, pending_score,"
            " updated_at) VALUES (%s, %s, %s, 0, %s, now()) ON CONFLICT (strategy_id, session_id, tenant_id) "
            "DO UPDATE SET pending_score = EXCLUDED.pending_score + "
            f"{Watermark._meta.db_table}.pending_score RETURNING pending_score",
            [strategy.pk, session_id, strategy.tenant_id, amount],
        )
        return cursor.fetchone()[0]


def _on_messages(*, tenant_id, session_id, messages: list[dict], strategies: list[Strategy] | None = None) -> None:
    strategies = enabled_strategies(tenant_id) if strategies is None else strategies
    if not strategies or not messages:
        return
    session = Session.objects.get(pk=session_id)
    tool_results = [m for m in messages if m["role"] == "toolResult"]
    scores = None
    for strategy in strategies:
        if strategy.on_tool_result and tool_results:
            run_request(
                strategy=strategy,
                trigger=Trigger.TOOL_RESULT,
                session=session,
                detail=f"toolResult message seq {tool_results[-1]['seq']}",
            )
            continue
        if strategy.message_threshold is None and strategy.accumulated_threshold is None:
            continue
        if scores is None:
            from strategies_app.extractors.rules import score

            scores = [(score(m["head"] or "", m["role"]), m["seq"]) for m in messages]
        best, best_seq = max(scores)
        if strategy.message_threshold is not None and best >= strategy.message_threshold:
            run_request(
                strategy=strategy,
                trigger=Trigger.THRESHOLD,
                session=session,
                detail=f"message seq {best_seq} scored {best:.2f} ≥ {strategy.message_threshold:g}",
            )
        elif strategy.accumulated_threshold is not None:
            total = _add_pending_score(strategy, session_id, sum(s for s, _ in scores))
            if total >= strategy.accumulated_threshold:
                run_request(
                    strategy=strategy,
                    trigger=Trigger.THRESHOLD,
                    session=session,
                    detail=f"unread messages scored {total:.2f} ≥ {strategy.accumulated_threshold:g}",
                )


@contextlib.contextmanager
def session_may_vanish(session_id, what: str):
    """Around a trigger's transaction: its session may be deleted meanwhile — its user forgotten
    (`POST /api/v1/users/{user_id}/forget/`) between the write that sent the signal and the runs this queues. That
    race is expected: the trigger's reads find no session, or its inserts (a run, a watermark) refer to a
    session gone by their commit. Either way there is nothing left to run: one line says so, with no traceback.
    Any other failure, or the same one while the session still exists, is raised."""
    try:
        yield
    except (IntegrityError, Session.DoesNotExist):
        if Session.objects.filter(pk=session_id).exists():
            raise
        logger.info("%s: session %s was deleted meanwhile (its user forgotten?); nothing to run", what, session_id)


def _guarded(handler):
    """A trigger never fails the write that sent the signal (it has committed): log, and let the
    schedule pick the messages up."""

    def receiver(sender, **kwargs):
        try:
            with session_may_vanish(kwargs.get("session_id"), f"strategy trigger {handler.__name__}"):
                with transaction.atomic():
                    handler(**kwargs)
        except Exception:  # noqa: BLE001
            logger.exception("strategy trigger %s failed; the scheduled run will catch up", handler.__name__)

    receiver.__name__ = handler.__name__
    return receiver


def _scored_rows(message_ids) -> list[dict]:
    """role, seq and the start of the content (what the scorer reads): a tool's output, often most of the
    bytes, is never read back — the scorer rates tool messages by role alone."""
    rows = Message.objects.filter(pk__in=message_ids)
    head = Case(When(role__in=["user", "assistant"], then=Substr("content", 1, SCORED_CHARS)), default=Value(""))
    return list(rows.annotate(head=head).values("role", "seq", "head").order_by("seq"))


# Sessions per trigger task queued after a write (an import's batch holds up to a few hundred).
TRIGGER_TASK_SESSIONS = 50


def messages_appended_trigger(sender, *, appended, **kwargs):
    """Receiver: scoring reads the new messages back and may queue runs, so it happens in the worker
    (tasks.sessions_messages_triggers), never in the write — an import or a bulk append does not wait."""
    entries = [
        [str(entry.session_id), str(entry.tenant_id), [str(pk) for pk in entry.message_ids]]
        for entry in appended
        if entry.message_ids
    ]
    for start in range(0, len(entries), TRIGGER_TASK_SESSIONS):
        part = entries[start : start + TRIGGER_TASK_SESSIONS]
        enqueue_or_leave_to_sweep(
            "strategies_app.tasks.sessions_messages_triggers",
            part,
            what=f"triggers for {len(part)} sessions",
            sweep="each strategy's scheduled run",
        )


def messages_evaluate(*, session_id, tenant_id, message_ids, strategies: list[Strategy] | None = None) -> None:
    """What new messages start: tool-result and threshold triggers (tasks.sessions_messages_triggers, which
    passes the tenant's enabled `strategies` once for all the sessions of a write). Nothing is read back
    when the tenant has no strategy enabled."""
    strategies = enabled_strategies(tenant_id) if strategies is None else strategies
    if not strategies:
        return
    with session_may_vanish(session_id, "triggers of new messages"), transaction.atomic():
        _on_messages(
            tenant_id=tenant_id, session_id=session_id, messages=_scored_rows(message_ids), strategies=strategies
        )


def turn_completed_trigger(sender, *, turn_id, session_id, tenant_id, tool_names, message_ids, **kwargs):
    """Receiver: like new messages, a completed turn is evaluated by a task (tasks.turn_triggers), so the
    completion's request reads nothing back for it."""
    enqueue_or_leave_to_sweep(
        "strategies_app.tasks.turn_triggers",
        str(session_id),
        str(tenant_id),
        list(tool_names),
        [str(pk) for pk in message_ids],
        what=f"triggers of turn {turn_id}",
        sweep="each strategy's scheduled run",
    )


def turn_evaluate(*, session_id, tenant_id, tool_names, message_ids) -> None:
    """What a completed turn starts: a tool-result run when it called tools, else the threshold triggers on
    its question and its answer's final text (a turn's messages are evaluated when it ends, not at its start)."""
    strategies = enabled_strategies(tenant_id)
    if not strategies:
        return
    with session_may_vanish(session_id, "triggers of a completed turn"), transaction.atomic():
        if tool_names:
            session = Session.objects.get(pk=session_id)
            for strategy in strategies:
                if strategy.on_tool_result:
                    run_request(
                        strategy=strategy,
                        trigger=Trigger.TOOL_RESULT,
                        session=session,
                        detail=f"turn completed with tool calls: {', '.join(tool_names)[:200]}",
                    )
            return
        rows = _scored_rows(message_ids)
        _on_messages(tenant_id=tenant_id, session_id=session_id, messages=rows, strategies=strategies)


@_guarded
def state_changed_trigger(*, session_id, tenant_id, previous, data, **kwargs):
    session = None
    for strategy in enabled_strategies(tenant_id):
        changes = {
            key: [previous.get(key), data.get(key)]
            for key in strategy.on_state_keys
            if previous.get(key) != data.get(key)
        }
        if not changes:
            continue
        session = session or Session.objects.get(pk=session_id)
        run_request(
            strategy=strategy,
            trigger=Trigger.STATE_CHANGE,
            session=session,
            detail=", ".join(f"{k}: {v[0]!r} → {v[1]!r}" for k, v in changes.items())[:255],
            state_changes=changes,
        )


def tenant_created(sender, instance, created, raw=False, **kwargs):
    """A new tenant gets the three built-in strategies."""
    if created and not raw:
        from strategies_app.services.strategies import builtin_strategies_ensure

        builtin_strategies_ensure(tenant=instance)
