"""The ledger write: one unit of work for every way usage enters the ledger — messages (`POST …/messages/`), a
chat turn's start and its completion (or its close as abandoned), an import batch, OpenTelemetry events, and
the gateway to come. `write(change)` reads top to bottom as its steps; each is a small function below, and
`change` (a `Change`: `services.messages.MessagesAppend`, `services.turns.TurnStart`, `TurnFinish`) is the
way's own part of each step.

1. **validate** — what the way brings, before any lock: secrets redacted (its shape was checked before, by
   the API's serializers, an importer's parser or the OTLP decoder).
2. **lock** — the session rows, `SELECT … FOR UPDATE` (the turn's row too, for a completion); for the ways a
   used-up budget refuses, with whether a hard-limit budget of the tenant is used up, read in the same
   statement (`lock_session`, `turns.TurnStart.lock`). Imports and OTLP lock (or create)
   the sessions they find themselves, in their own transaction, and hand them over locked. What the lock
   shows may end the write here: a repeated turn start or completion writes nothing.
3. **write rows** — the way's rows, as data-modifying clauses of the one statement (messages, conversations,
   requests, a turn, other apps' bookkeeping of it); a bulk write sends its new rows by `COPY` first.
4. **counters and roll-ups** — the sessions' and conversations' counters (clauses of the way), the hourly and
   daily roll-ups and the sessions' usage by model (`rollups.rollup_clauses`).
5. **budgets** — the hard limit first (`budgets.hard_limit_check`), as soon as the rows are locked, for every
   way in: a used-up hard-limit budget covering the write refuses it (`BudgetUsedUp`, a 429) when the way is
   one that `REFUSED_WHEN_USED_UP` names, before anything is written. Then the covering budgets' periods,
   added to in the same statement (`budgets.usage_clause`). Steps 3 to 5 go to PostgreSQL as ONE statement
   (`_send`); after it, the thresholds it crossed are recorded and the budgets it used up marked blocked
   (`budgets.usage_evaluate`).
6. **side effects on commit** — the in-memory rows brought up to what was stored; signals, search indexing,
   alerts and traces registered with `transaction.on_commit`.

Statements per call (tests assert them: test_turns, test_messages_api, test_ledger): an API append of a few
messages, a turn's start or its completion is BEGIN, the lock, the one statement, COMMIT (and one query naming
the budget when a hard-limit budget of the tenant is used up). An import or OTLP batch, in its caller's
transaction: the loads of what its items refer to (stored external ids, conversations, requests: one query each,
none for new sessions), the COPYs of its new rows (an import's always, more than `messages.INLINE_ROWS` rows
otherwise), and the one statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from platform_kit.db import PREPARED_MAX_PARAMS, Clause, prepared_cursor, together
from sessions_app.models import Budget, Session, Tenant
from sessions_app.services.budgets import hard_limit_check, usage_clause, usage_evaluate
from sessions_app.services.rollups import rollup_clauses


class Way(StrEnum):
    """How a write enters the ledger."""

    MESSAGES = "messages"  # POST /api/v1/sessions/{id}/messages/ (`messages_append`)
    TURN_START = "turn_start"  # POST /api/v1/sessions/{id}/turns/
    TURN_COMPLETE = "turn_complete"  # a turn's completion, or its close as abandoned
    IMPORT = "import"  # log files (`ingest_app.pipeline.batch`)
    OTLP = "otlp"  # OpenTelemetry events (`ingest_app.otlp`)
    # A call through the LLM gateway (gateway_app): its hard budgets were checked before the call was forwarded,
    # so its turn is recorded whatever happened since (the money is spent).
    GATEWAY = "gateway"


# The ways a used-up hard-limit budget refuses (docs/budgets.md, Hard limits). The others record work already
# done (a completed call, a log, an event): refusing would lose it. Their usage still counts.
REFUSED_WHEN_USED_UP = frozenset({Way.MESSAGES, Way.TURN_START})


@dataclass
class Locked:
    """What step 2 holds: the session rows, locked, and whether a hard-limit budget of their tenant is used up
    (read with the lock; None: not read, it is read in step 5 when the way is one a used-up budget refuses)."""

    sessions: list[Session]
    budget_blocked: bool | None = None


class Change:
    """A way's part of the unit of work, one method per step (see the module docstring)."""

    way: Way
    api_key_id = None  # the calling key: an API-key budget covers its writes
    prepared = False  # the statement is of a shape written many times a second: prepared once per connection

    def validate(self) -> None:
        """1. Make what the way brings fit to store (before any lock)."""

    def lock(self) -> Locked | None:
        """2. Lock the session rows; None when what the lock shows leaves nothing to write."""
        raise NotImplementedError

    def rows(self, locked: Locked) -> list[Clause | None]:
        """3. The way's rows, as clauses of the one statement (COPYs of many rows may go first)."""
        raise NotImplementedError

    def counters(self) -> list[Clause | None]:
        """4. The sessions' and conversations' counters, as clauses of the one statement."""
        raise NotImplementedError

    def usage(self) -> list[tuple[Session, dict[tuple[datetime, str], dict]]]:
        """4 and 5. What the write adds to the counters, per session, hour and model: the roll-ups and budgets."""
        raise NotImplementedError

    def after_write(self) -> None:
        """6. The in-memory rows as stored; the side effects registered to run on commit."""


def write(change: Change) -> Change:
    """The ledger write (module docstring): in the caller's transaction, or one of its own. Raises what the way's
    lock raises (Session.DoesNotExist, Turn.DoesNotExist, TurnClosed) and BudgetUsedUp."""
    with transaction.atomic(savepoint=False):
        _validate(change)
        locked = _lock(change)
        if locked is None:
            return change
        now = timezone.now()
        _hard_limit(change, locked, now=now)
        rows = _write_rows(change, locked)
        counters, usage = _counters_and_rollups(change)
        budgets = _budget_usage(usage, now=now)
        budget_rows = _send([*rows, *counters], budgets, prepared=change.prepared)
        _budget_crossings(budget_rows, now=now)
        _side_effects_on_commit(change)
    return change


# -- the steps ------------------------------------------------------------------------------------------------
def _validate(change: Change) -> None:
    """1. validate."""
    change.validate()


def _lock(change: Change) -> Locked | None:
    """2. lock."""
    return change.lock()


def _hard_limit(change: Change, locked: Locked, *, now: datetime) -> None:
    """5, first: the hard limit, for every way in, before anything is written. One small query when (and only
    when) a hard-limit budget of the tenant is used up."""
    if change.way in REFUSED_WHEN_USED_UP and locked.budget_blocked is not False and locked.sessions:
        hard_limit_check(sessions=locked.sessions, api_key_id=change.api_key_id, now=now)


def _write_rows(change: Change, locked: Locked) -> list[Clause | None]:
    """3. write rows."""
    return change.rows(locked)


def _counters_and_rollups(change: Change) -> tuple[list[Clause | None], list]:
    """4. counters and roll-ups: the way's counter clauses, then the roll-ups' upserts (in one fixed key order,
    so writers sharing roll-up rows cannot deadlock)."""
    usage = change.usage()
    return [*change.counters(), *rollup_clauses(entries=usage)], usage


def _budget_usage(usage: list, *, now: datetime) -> Clause | None:
    """5. budgets: the usage filed into the covering budgets' periods, in the same statement (no round trip of
    its own, and none at all to learn that no budget covers the write)."""
    return usage_clause(entries=usage, now=now)


def _send(clauses: list[Clause | None], budgets: Clause | None, *, prepared: bool) -> list[tuple]:
    """Steps 3 to 5 as one statement of data-modifying WITH clauses; the budget rows it changed. Its SELECT reads
    the budget periods first, then the unreferenced clauses run to completion in the order written: every writer
    locks budget periods, then hourly, daily and usage-by-model rows, each in sorted order."""
    statement = together(clauses, budgets) if budgets else together(clauses)
    if statement is None:
        return []
    prepared = prepared and len(statement[1]) <= PREPARED_MAX_PARAMS
    with prepared_cursor() if prepared else connection.cursor() as cursor:
        cursor.execute(*statement)
        return cursor.fetchall() if budgets else []


def _budget_crossings(budget_rows: list[tuple], *, now: datetime) -> None:
    """5, after the statement: the thresholds the write crossed recorded (alerts after the commit), the
    hard-limit budgets it used up marked blocked."""
    if budget_rows:
        usage_evaluate(rows=budget_rows, now=now)


def _side_effects_on_commit(change: Change) -> None:
    """6. side effects on commit."""
    change.after_write()


# -- locks the ways share ---------------------------------------------------------------------------------------
def lock_session(*, tenant: Tenant, session_id, now: datetime | None = None) -> Locked:
    """The tenant's session row, locked, with whether a hard-limit budget of the tenant is used up (one
    statement). Raises Session.DoesNotExist."""
    used_up = Budget.objects.filter(
        tenant_id=OuterRef("tenant_id"), active=True, hard_limit=True, blocked_until__gt=now or timezone.now()
    )
    session = (
        Session.objects.select_for_update()
        .annotate(budget_blocked=Exists(used_up))
        .get(pk=session_id, tenant=tenant, deleted_at__isnull=True)
    )
    return Locked(sessions=[session], budget_blocked=session.budget_blocked)
