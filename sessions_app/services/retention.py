"""Writes of retention: a tenant's policy for message content, purging that content, and the audit trail.

Purging blanks what a message *said* and keeps what it *was*: the row stays with its ids, seq, role,
conversation, times, model, tokens, request and tool names, so every counter, roll-up and cost is unchanged
and records that cite it keep valid provenance. Gone: `content`, `thinking` (a user message's system prompt
snapshot, an assistant's reasoning), the arguments of its tool calls (their ids and names stay), its
attachments, the free-form values of its metadata (id-valued keys stay), its search vector and — through
`messages_purged`, in the same transaction — its embedding vectors.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from platform_kit.db import planner_settings
from sessions_app.models import Message, RetentionEvent, RetentionPolicy, Session, Tenant
from sessions_app.models.retention import CONTENT_DAYS_MAX, CONTENT_DAYS_MIN
from sessions_app.schema import ROLES
from sessions_app.selectors.retention import UNPURGED_SCAN, ContentPurge, messages_to_purge
from sessions_app.signals import messages_purged

# Messages purged per transaction: each batch locks its sessions for one short UPDATE, so an append to one of
# them waits milliseconds, and a run stopped half-way resumes where it was (purged rows are skipped).
PURGE_BATCH = 1000

# Metadata keys kept by a purge: ids (`id`, `uuid`, `…_id`, `…_uuid`) with a string or number value.
KEPT_METADATA_KEY = r"(^|_)(id|uuid)$"

PURGE_SQL = f"""
UPDATE {Message._meta.db_table} SET
  content = '',
  thinking = '',
  search_vector = ''::tsvector,
  tool_calls = CASE WHEN jsonb_typeof(tool_calls) = 'array' THEN (
      SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
          'id', call->'id', 'type', call->'type', 'name', coalesce(call->'name', call->'function'->'name')))), '[]')
      FROM jsonb_array_elements(tool_calls) AS call
      WHERE jsonb_typeof(call) = 'object')
    ELSE NULL END,
  attachments = NULL,
  metadata = CASE WHEN jsonb_typeof(metadata) = 'object' THEN (
      SELECT coalesce(jsonb_object_agg(key, value), '{{}}')
      FROM jsonb_each(metadata)
      WHERE key ~ '{KEPT_METADATA_KEY}' AND jsonb_typeof(value) IN ('string', 'number'))
    ELSE '{{}}' END,
  content_purged_at = %s
WHERE id = ANY(%s) AND content_purged_at IS NULL
RETURNING id, created_at
"""


def retention_event_add(
    *, tenant_id, action: str, actor: str, subject_id="", before: dict | None = None, after: dict | None = None
) -> RetentionEvent:
    """One entry of the retention audit trail (policies, record TTLs, records deleted because they expired)."""
    return RetentionEvent.objects.create(
        tenant_id=tenant_id, action=action, actor=actor[:255], subject_id=str(subject_id), before=before, after=after
    )


def _policy_snapshot(policy: RetentionPolicy) -> dict:
    return {"message_content_days": policy.message_content_days, "roles": list(policy.roles or [])}


def retention_policy_validate(*, message_content_days, roles) -> dict[str, list[str]]:
    """What is wrong with these values, by field (empty: nothing)."""
    errors: dict[str, list[str]] = {}
    if message_content_days is not None and (
        isinstance(message_content_days, bool)
        or not isinstance(message_content_days, int)
        or not CONTENT_DAYS_MIN <= message_content_days <= CONTENT_DAYS_MAX
    ):
        errors["message_content_days"] = [
            f"Must be a whole number of days from {CONTENT_DAYS_MIN} to {CONTENT_DAYS_MAX}, or null to keep forever."
        ]
    if not isinstance(roles, list | tuple) or not all(isinstance(role, str) for role in roles):
        errors["roles"] = ["Must be a list of roles (empty: every role)."]
    elif unknown := sorted(set(roles) - set(ROLES)):
        errors["roles"] = [f"Unknown role(s): {', '.join(unknown)}. Use: {', '.join(ROLES)}."]
    return errors


def retention_policy_set(*, tenant: Tenant, actor: str, **changes) -> RetentionPolicy:
    """Create or change the tenant's policy (`message_content_days`, `roles`); the change is audited. Nothing
    is purged here: the daily run (or `ace_retention`) applies it, after a preview shows what it will do."""
    unknown = sorted(set(changes) - {"message_content_days", "roles"})
    if unknown:
        raise ValidationError({name: ["Unknown field."] for name in unknown})
    with transaction.atomic():
        policy, _ = RetentionPolicy.objects.select_for_update().get_or_create(tenant=tenant)
        before = _policy_snapshot(policy)
        days = changes.get("message_content_days", policy.message_content_days)
        roles = changes.get("roles", policy.roles)
        errors = retention_policy_validate(message_content_days=days, roles=roles)
        if errors:
            raise ValidationError(errors)
        policy.message_content_days, policy.roles = days, sorted(set(roles))
        after = _policy_snapshot(policy)
        if after != before or policy._state.adding:
            policy.updated_at = timezone.now()
            policy.save()
            retention_event_add(
                tenant_id=tenant.pk,
                action=RetentionEvent.Action.POLICY_SET,
                actor=actor,
                subject_id=policy.pk,
                before=before,
                after=after,
            )
    return policy


def messages_content_purge(
    *, tenant: Tenant, before: datetime, roles=(), batch: int = PURGE_BATCH, now: datetime | None = None
) -> ContentPurge:
    """Purge the content of the tenant's messages created before `before` (of `roles`; empty: every role), in
    transactions of `batch` messages. Safe to run twice and to stop: purged messages are never touched again.

    Each batch is whichever `batch` messages are still to purge, in no order, read from the index of unpurged
    messages (`messages_to_purge`): a purge takes them out of it, so the next batch starts past them without a
    keyset, and a run reads the messages it purges and nothing of the purged history."""
    done = ContentPurge()
    now = now or timezone.now()
    candidates = messages_to_purge(tenant=tenant, before=before, roles=roles).order_by()  # any order: no sort
    while True:
        with planner_settings(UNPURGED_SCAN):
            rows = list(candidates.values_list("pk", "session_id")[:batch])
            if not rows:
                return done
            # The sessions' row locks, in the order imports take them: an append or import to one of these
            # sessions waits for this one UPDATE (and an import completing a message never races the purge).
            session_ids = sorted({session_id for _, session_id in rows})
            list(Session.objects.select_for_update().filter(pk__in=session_ids).order_by("pk").values_list("pk"))
            with connection.cursor() as cursor:
                cursor.execute(PURGE_SQL, [now, [pk for pk, _ in rows]])
                purged = cursor.fetchall()
            if purged:
                ids = [pk for pk, _ in purged]
                messages_purged.send(sender=Message, tenant_id=tenant.pk, message_ids=ids)
                times = [created_at for _, created_at in purged]
                done = done.joined(ContentPurge(messages=len(purged), oldest=min(times), newest=max(times)))
