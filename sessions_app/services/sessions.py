"""Creating, changing, ending and deleting sessions."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from platform_kit.redaction import redact_fields
from sessions_app.models import ApiKey, Session, Tenant
from sessions_app.signals import session_deleted, session_ended

EDITABLE_FIELDS = (
    "name",
    "tool",
    "agent_session_id",
    "user_id",
    "app",
    "project",
    "machine",
    "metadata",
    "started_at",
    "ended_at",
)
# What a client writes freely about a session: redacted before it is stored (platform_kit.redaction).
REDACTED_FIELDS = ("name", "metadata")
# Usage roll-ups are keyed by tool, user, project and machine: once a session has messages these are facts.
FIXED_ONCE_USED = ("tool", "user_id", "project", "machine")


def session_create(*, tenant: Tenant, api_key: ApiKey | None = None, **fields) -> Session:
    """A new session; `api_key`, the key that created it, has its usage counted in that key's budgets."""
    fields = redact_fields({k: v for k, v in fields.items() if k in EDITABLE_FIELDS}, REDACTED_FIELDS)
    return Session.objects.create(tenant=tenant, api_key=api_key, **fields)


@transaction.atomic
def session_update(*, tenant: Tenant, session_id, **fields) -> Session:
    session = Session.objects.select_for_update().get(pk=session_id, tenant=tenant, deleted_at__isnull=True)
    fields = redact_fields(fields, REDACTED_FIELDS)
    if session.messages:
        changed = [f for f in FIXED_ONCE_USED if f in fields and fields[f] != getattr(session, f)]
        if changed:
            raise ValidationError(
                {
                    f: ["Cannot change once the session has messages: its usage is already counted under it."]
                    for f in changed
                }
            )
    for field, value in fields.items():
        if field in EDITABLE_FIELDS:
            setattr(session, field, value)
    session.save()
    return session


def session_end(*, tenant: Tenant, session_id, ended_at=None) -> Session:
    """End the session (idempotent: ending an ended session keeps its first end time)."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id, tenant=tenant, deleted_at__isnull=True)
        if session.ended_at is None:
            session.ended_at = ended_at or timezone.now()
            session.save(update_fields=["ended_at", "updated_at"])
            transaction.on_commit(
                lambda: session_ended.send(sender=Session, session_id=session.pk, tenant_id=session.tenant_id)
            )
    return session


@transaction.atomic
def session_delete(*, tenant: Tenant, session_id) -> None:
    """Hide the session from the API. Its messages stay for audit (admin) and its usage stays counted; what
    other apps derived from it (vectors, memories) is forgotten in the same transaction (signal
    session_deleted): a deleted session is never recalled."""
    now = timezone.now()
    updated = Session.objects.filter(pk=session_id, tenant=tenant, deleted_at__isnull=True).update(
        deleted_at=now, ended_at=Coalesce(F("ended_at"), now)
    )
    if not updated:
        raise Session.DoesNotExist
    session_deleted.send(sender=Session, session_id=session_id, tenant_id=tenant.pk)
