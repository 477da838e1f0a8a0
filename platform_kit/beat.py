"""Celery beat on every host: django-celery-beat's DatabaseScheduler behind a PostgreSQL advisory lock.

Every beat process takes part in an election: the one holding the advisory lock is the leader and sends the
periodic tasks; the others stand by, send nothing and record no run, and try the lock again every
ACE_BEAT_STANDBY_SECONDS. The lock is a transaction's (pg_try_advisory_xact_lock), taken on a connection of its own
(Django closes and reopens its connection between queries of the schedule) whose transaction the leader keeps
open: it is held exactly as long as that transaction lives, so when the leader dies, its connection closes, the
lock is free, and a standby takes it at its next try. Being a transaction's, it holds through a pooler in
transaction mode too (PgBouncer keeps a client's server connection for the length of its transaction, and would
hand a session-level lock's to other clients between statements). The open transaction writes nothing and, at READ
COMMITTED, keeps no snapshot between its statements: it holds back no vacuum.

A leader confirms the lock (a round trip on that connection) before each task it sends, and records the run in the
database before sending it, only if no other run was recorded since (a compare-and-set on last_run_at); so a
leader whose lock connection broke sends nothing more, and the new leader, which reads the schedule afresh when it
takes over, neither sends again what the old one sent nor sends it early. The lock's transaction has an idle
timeout (a leader confirms the lock every few seconds), so a leader whose host vanished without closing its
connection frees the lock within ACE_BEAT_LOCK_IDLE_SECONDS, and client-side TCP timeouts make such a leader's own
confirmation fail sooner than that: it has stopped sending before anyone else can start.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError, InterfaceError, connections
from django.db.models import Q
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

logger = logging.getLogger(__name__)

# One lock per database: every beat of an install competes for it (the other advisory locks of the project take
# hashtext() keys or two-key forms, which this constant does not meet).
BEAT_LOCK_KEY = 0x0ACE_BEA7

# The lock connection's client side gives up on a server that stopped answering after at most ~9 s (TCP keepalives,
# unacknowledged data), well within the server's idle timeout: the old leader stops before the lock is freed.
_LOCK_CONNECTION_TCP = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 9000,
}


class LeaderElectedScheduler(DatabaseScheduler):
    """DatabaseScheduler that sends only while it holds the beat lock (CELERY_BEAT_SCHEDULER)."""

    def __init__(self, *args, **kwargs):
        self._lock_connection = None
        self._leading = False
        self._standby_logged = False
        super().__init__(*args, **kwargs)

    # The election.

    def _connect(self):
        wrapper = connections["default"]
        params = wrapper.get_connection_params()
        if not str(params.get("host") or "").startswith("/"):
            params.update(_LOCK_CONNECTION_TCP)
        lock_connection = wrapper.get_new_connection(params)
        lock_connection.autocommit = False  # the lock is a transaction's: see the module's docstring
        return lock_connection

    def _drop_lock_connection(self):
        if self._lock_connection is not None:
            try:
                self._lock_connection.close()
            except Exception:  # noqa: BLE001 - already broken: closing is all that is left
                pass
            self._lock_connection = None

    def _lock_held(self) -> bool:
        """Whether this process holds the beat lock now: confirmed on the lock connection, or taken if free."""
        try:
            if self._lock_connection is None or self._lock_connection.closed:
                self._lock_connection = self._connect()
                self._leading = False
            with self._lock_connection.cursor() as cursor:
                if self._leading:
                    # The session that took the lock still lives (or the server has freed the lock already).
                    cursor.execute(
                        "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND granted"
                        " AND pid = pg_backend_pid() AND classid = 0 AND objid = %s::oid AND objsubid = 1)",
                        [BEAT_LOCK_KEY],
                    )
                else:
                    # A transaction of its own, its settings local to it (a pooler shares the session).
                    cursor.execute(
                        "SELECT set_config('application_name', 'ace beat lock', true),"
                        " set_config('idle_in_transaction_session_timeout', %s, true),"
                        " pg_try_advisory_xact_lock(%s)",
                        [f"{settings.ACE_BEAT_LOCK_IDLE_SECONDS}s", BEAT_LOCK_KEY],
                    )
                    if not cursor.fetchone()[2]:
                        self._lock_connection.rollback()  # standing by holds no transaction (nor a pooled server)
                        return False
                    return True
                return bool(cursor.fetchone()[0])
        except Exception as error:  # noqa: BLE001 - a broken or unreachable lock connection: not the leader
            if self._leading:
                logger.warning("Beat: lost the lock (%s); standing by, sending nothing", error)
            else:
                logger.warning("Beat: the lock's database is unavailable (%s); standing by", error)
            self._drop_lock_connection()
            return False

    def _still_leading(self) -> bool:
        held = self._lock_held()
        if held and not self._leading:
            self._leading, self._standby_logged = True, False
            # Another beat may have led until now: read the schedule and the runs it recorded afresh.
            self._dirty.clear()
            self._initial_read, self._heap = True, None
            logger.info("Beat: leader (holds the beat lock); sending the periodic tasks")
        elif not held and self._leading:
            self._leading = False
            self._dirty.clear()  # runs reserved but not sent: the next leader decides, from the database
            self._heap = None
            logger.warning("Beat: lost the lock; standing by, sending nothing")
        if not held and not self._standby_logged:
            self._standby_logged = True
            logger.info(
                "Beat: standby (another beat holds the lock); trying again every %s s",
                settings.ACE_BEAT_STANDBY_SECONDS,
            )
        return held

    # The scheduler.

    def tick(self, *args, **kwargs):
        if not self._still_leading():
            return settings.ACE_BEAT_STANDBY_SECONDS
        return min(super().tick(*args, **kwargs), settings.ACE_BEAT_STANDBY_SECONDS)

    def apply_entry(self, entry, producer=None):
        if not self._still_leading():
            return
        self._dirty.discard(entry.name)  # recorded here, or not at all: a later sync must not write it back
        try:
            claimed = self._run_claimed(entry)
        except (DatabaseError, InterfaceError) as error:
            logger.warning("Beat: could not record the run of %s (%r); not sent this time", entry.name, error)
            return
        if not claimed:
            # Another send recorded a run since this entry's last one (a schedule read before it): read afresh.
            logger.info("Beat: %s was sent already; reading the schedule again", entry.name)
            self._initial_read, self._heap = True, None
            return
        super().apply_entry(entry, producer=producer)

    def _run_claimed(self, entry) -> bool:
        """Record the run in the database before its task is sent, only if no run was recorded since the one this
        entry is due from (a compare-and-set on last_run_at): a leader taking over later never sends it again, and
        no entry sends a run twice. A leader dying between the two skips one run; it never doubles one."""
        model = entry.model  # reserve() moved its last_run_at to this run; entry.last_run_at is the one before
        return (
            PeriodicTask.objects.filter(
                Q(last_run_at=entry.last_run_at) | Q(last_run_at__isnull=True), pk=model.pk
            ).update(last_run_at=model.last_run_at, total_run_count=model.total_run_count)
            == 1
        )

    def sync(self):
        if self._leading:
            super().sync()

    def close(self):
        super().close()
        self._drop_lock_connection()
