"""Session state: a JSON object with every version kept. Writers may guard with the version they read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import models, transaction
from django.db.models import OuterRef, Subquery

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


def _with_current_state(sessions):
    """The sessions (their id and state version only) with their current state beside: the session and its
    state in one statement."""
    current = StateVersion.objects.filter(session=OuterRef("pk"), version=OuterRef("state_version"))
    return sessions.only("pk", "tenant_id", "state_version").annotate(
        state_data=Subquery(current.values("data"), output_field=models.JSONField()),
        state_updated_at=Subquery(current.values("created_at")),
    )


def _current_state(session) -> StateSnapshot:
    if session.state_version == 0:
        return StateSnapshot(version=0, data={}, updated_at=None)
    return StateSnapshot(version=session.state_version, data=session.state_data, updated_at=session.state_updated_at)


def state_read(*, tenant: Tenant, session_id) -> StateSnapshot:
    """The current state of the tenant's session, in one statement; Session.DoesNotExist when not its own."""
    sessions = Session.objects.filter(tenant=tenant, deleted_at__isnull=True)
    return _current_state(_with_current_state(sessions).get(pk=session_id))


def _state_write(*, tenant: Tenant, session_id, change: str, if_match: int | None, compute) -> StateSnapshot:
    with transaction.atomic():
        sessions = Session.objects.select_for_update().filter(tenant=tenant, deleted_at__isnull=True)
        session = _with_current_state(sessions).get(pk=session_id)
        if if_match is not None and if_match != session.state_version:
            raise StaleVersion(expected=if_match, current=session.state_version)
        previous = _current_state(session)
        data = redact(compute(previous.data))  # a value under "password", a key in a note: never stored
        if data == previous.data and session.state_version > 0:
            return previous  # nothing changed: no new version
        row = StateVersion.objects.create(
            tenant=tenant, session=session, version=session.state_version + 1, data=data, change=change
        )
        Session.objects.filter(pk=session.pk).update(state_version=row.version)
        transaction.on_commit(
            lambda: state_changed.send(
                sender=Session,
                session_id=session.pk,
                tenant_id=tenant.pk,
                version=row.version,
                previous=previous.data,
                data=data,
            )
        )
    return StateSnapshot(version=row.version, data=row.data, updated_at=row.created_at)


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
