"""Session state: a JSON object with every version kept. Writers may guard with the version they read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from platform_kit.redaction import redact
from sessions_app.models import Session, StateVersion, Tenant
from sessions_app.signals import state_changed


class StaleVersion(Exception):
    def __init__(self, expected: int, current: int):
        super().__init__(f"The state is at version {current}, not {expected}.")
        self.expected, self.current = expected, current


@dataclass(frozen=True)
class StateSnapshot:
    version: int
    data: dict
    updated_at: datetime | None


def json_merge_patch(target, patch):
    """RFC 7396: objects merge recursively, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def state_get(*, session: Session) -> StateSnapshot:
    if session.state_version == 0:
        return StateSnapshot(version=0, data={}, updated_at=None)
    row = StateVersion.objects.get(session=session, version=session.state_version)
    return StateSnapshot(version=row.version, data=row.data, updated_at=row.created_at)


# A session's state version with that version's data and time, in one statement; the hot reads and writes of
# state run it as plain SQL (the ORM's query building would cost more CPU than the statement it saves).
CURRENT_STATE_SQL = f"""
SELECT s.state_version, v.data, v.created_at FROM {Session._meta.db_table} s
LEFT JOIN {StateVersion._meta.db_table} v ON v.session_id = s.id AND v.version = s.state_version
WHERE s.id = %s AND s.tenant_id = %s AND s.deleted_at IS NULL
"""
# A new version, and the session's version number moved to it.
NEW_VERSION_SQL = f"""
WITH added AS (
  INSERT INTO {StateVersion._meta.db_table} (tenant_id, session_id, version, data, change, created_at)
  VALUES (%(tenant)s, %(session)s, %(version)s, %(data)s::jsonb, %(change)s, %(created_at)s) RETURNING version
)
UPDATE {Session._meta.db_table} SET state_version = (SELECT version FROM added) WHERE id = %(session)s
"""


def _current_state(*, tenant: Tenant, session_id, lock: bool = False) -> StateSnapshot:
    """The current state of the tenant's session (locked, `lock`); Session.DoesNotExist when not its own."""
    with connection.cursor() as cursor:
        cursor.execute(CURRENT_STATE_SQL + (" FOR UPDATE OF s" if lock else ""), [session_id, tenant.pk])
        row = cursor.fetchone()
    if row is None:
        raise Session.DoesNotExist
    version, data, updated_at = row
    if version == 0:
        return StateSnapshot(version=0, data={}, updated_at=None)
    return StateSnapshot(version=version, data=json.loads(data), updated_at=updated_at)


def state_read(*, tenant: Tenant, session_id) -> StateSnapshot:
    """The current state of the tenant's session, in one statement; Session.DoesNotExist when not its own."""
    return _current_state(tenant=tenant, session_id=session_id)


def _state_write(*, tenant: Tenant, session_id, change: str, if_match: int | None, compute) -> StateSnapshot:
    with transaction.atomic():
        previous = _current_state(tenant=tenant, session_id=session_id, lock=True)
        if if_match is not None and if_match != previous.version:
            raise StaleVersion(expected=if_match, current=previous.version)
        data = redact(compute(previous.data))  # a value under "password", a key in a note: never stored
        if data == previous.data and previous.version > 0:
            return previous  # nothing changed: no new version
        written = StateSnapshot(version=previous.version + 1, data=data, updated_at=timezone.now())
        with connection.cursor() as cursor:
            cursor.execute(
                NEW_VERSION_SQL,
                {
                    "tenant": tenant.pk,
                    "session": session_id,
                    "version": written.version,
                    "data": json.dumps(data),
                    "change": change,
                    "created_at": written.updated_at,
                },
            )
        transaction.on_commit(
            lambda: state_changed.send(
                sender=Session,
                session_id=session_id,
                tenant_id=tenant.pk,
                version=written.version,
                previous=previous.data,
                data=data,
            )
        )
    return written


def state_replace(
    *, tenant: Tenant, session_id, data: dict, if_match: int | None = None, change="put"
) -> StateSnapshot:
    return _state_write(tenant=tenant, session_id=session_id, change=change, if_match=if_match, compute=lambda _: data)


def state_merge(*, tenant: Tenant, session_id, patch: dict, if_match: int | None = None) -> StateSnapshot:
    return _state_write(
        tenant=tenant,
        session_id=session_id,
        change="patch",
        if_match=if_match,
        compute=lambda current: json_merge_patch(current, patch),
    )
