"""Signals other apps subscribe to; sent after the writing transaction commits (but see session_deleted).

`sessions_app` never imports the memory or strategy apps: they listen here.
"""

import uuid
from typing import NamedTuple

from django.dispatch import Signal


class Appended(NamedTuple):
    """The messages one write stored in one session."""

    session_id: uuid.UUID
    tenant_id: uuid.UUID
    message_ids: list[uuid.UUID]  # the newly stored ones, in seq order (messages_amended: the ones completed)


# sender=Session class; kwargs: appended (list of Appended: every session the write stored messages in —
# one for an API append, up to a batch of files for an import). Sent once per write: an import of
# hundreds of sessions queues its follow-up work in a few tasks, not a few per session.
messages_appended = Signal()
# sender=Session class; kwargs: amended (list of Appended: the stored messages an import completed in place
# whose content changed — a streamed response whose later lines arrived). Their search vector is redone by
# the write; their embedding is stale.
messages_amended = Signal()
# sender=Session class; kwargs: session_id, tenant_id, version, previous (dict), data (dict)
state_changed = Signal()
# sender=Session class; kwargs: session_id, tenant_id
session_ended = Signal()
# sender=Turn class; kwargs: turn_id, session_id, tenant_id, status, tool_names (called), message_ids (the user
# message and the answer). A chat turn's two messages are announced here, when it ends (completed, failed or closed
# as abandoned), not by messages_appended at its start: the answer's text exists only now.
turn_completed = Signal()
# sender=Turn class; kwargs: session_id, first_seq (the turn's user message), message_ids. Sent INSIDE the
# completing transaction, before its one statement: a receiver returns a data-modifying clause (SQL, params) that
# joins that statement, for its own bookkeeping of the turn's changed text, or None. It must not touch the
# session's, turn's or messages' rows (one snapshot: no row may be changed twice).
turn_completing = Signal()
# sender=Session class; kwargs: session_id, tenant_id. Sent INSIDE the deleting transaction (like Django's
# post_delete): what the other apps derived from the session (message vectors, records citing it) goes with it
# in the same commit, so no reader ever sees the session deleted and its messages still recallable.
session_deleted = Signal()
# sender=Message class; kwargs: tenant_id, message_ids. Retention purged these messages' content. Sent INSIDE the
# purging transaction (like session_deleted): their vectors go in the same commit as their text.
messages_purged = Signal()
# sender=the Budget model; kwargs: tenant_id, budget_id, threshold (the percentage of the limit crossed, e.g. 80),
# payload (a JSON-ready dict: the budget, its period, what was used, the limit, the projected date it runs out).
# Sent once per crossing, after the transaction that crossed it commits (webhooks and other alerts listen).
budget_crossed = Signal()
# sender=Session class; kwargs: tenant_id, user_id, dry_run, last. Sent INSIDE the transaction of
# `services.forget.user_forget`, before the user's sessions go: each app deletes what it keeps of the user (records
# and their vectors, strategy runs, raw telemetry and import rows) and returns {model label: rows deleted}, which the
# forget audit counts. A dry run rolls it all back. What cannot be rolled back (files: uploaded logs) an app hands to
# `last` as a function, called with no arguments after every row is gone, still inside the transaction; it returns
# its counts too, and does nothing but count on a dry run.
user_forgetting = Signal()
