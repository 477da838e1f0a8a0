"""Writes of retention: a tenant's policy for message content, record TTLs, the retention run that applies both,
and the audit trail of every change.

Every change is audited in the retention trail (`RetentionEvent`), every run in a `RetentionRun`. The run purges
message content through the ledger's service (`sessions_app.services.content_purge`) and deletes expired records
through memory's (`memory_app.services.expired_records_delete`). Expiry itself needs no run: `Record.expires_at`
is kept by the database from the record TTLs (`memory_app.RecordTtl`) and recall compares it with the clock; the
run only deletes what a "purge" TTL says to delete (docs/retention.md).
"""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from memory_app.models import TTL_DAYS_MAX, TTL_DAYS_MIN, Record, RecordTtl, RecordType
from memory_app.selectors.records import expired_records
from memory_app.services import expired_records_delete, records_expiry_refresh
from memory_app.signals import strategy_names_wanted
from platform_kit.db import cascade_delete
from retention_app.models import CONTENT_DAYS_MAX, CONTENT_DAYS_MIN, RetentionEvent, RetentionPolicy, RetentionRun
from retention_app.selectors import content_cutoff, retention_policy_get, retention_preview, tenants_with_retention
from sessions_app.models import Tenant
from sessions_app.schema import ROLES
from sessions_app.selectors.content_purge import ContentPurge
from sessions_app.services.content_purge import messages_content_purge

logger = logging.getLogger(__name__)

TTL_FIELDS = ("record_type", "strategy", "ttl_days", "on_expiry")
RECORD_PURGE_BATCH = 500


def retention_event_add(
    *, tenant_id, action: str, actor: str, subject_id="", before: dict | None = None, after: dict | None = None
) -> RetentionEvent:
    """One entry of the retention audit trail (policies, record TTLs, records deleted because they expired)."""
    return RetentionEvent.objects.create(
        tenant_id=tenant_id, action=action, actor=actor[:255], subject_id=str(subject_id), before=before, after=after
    )


# -- the policy for message content --------------------------------------------------------------------------------
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


# -- record TTLs ---------------------------------------------------------------------------------------------------
def ttl_snapshot(ttl: RecordTtl) -> dict:
    """A TTL's fields as the audit trail keeps them (and as `record_ttl_validate` compares a change with)."""
    return {name: getattr(ttl, name) for name in TTL_FIELDS}


def known_strategies(*, tenant_id) -> list[str]:
    """The strategy names a record TTL may name: the tenant's strategies (defined above memory_app, which answer
    `strategy_names_wanted`) and the names its records carry (a client may write records under its own)."""
    names = {name for _, found in strategy_names_wanted.send(sender=RecordTtl, tenant_id=tenant_id) for name in found}
    carried = Record.objects.filter(tenant_id=tenant_id).exclude(strategy="").order_by().values_list("strategy")
    return sorted(names | {name for (name,) in carried.distinct()})


def _strategy_known(*, tenant_id, name: str) -> bool:
    answers = strategy_names_wanted.send(sender=RecordTtl, tenant_id=tenant_id)
    return (
        any(name in found for _, found in answers) or Record.objects.filter(tenant_id=tenant_id, strategy=name).exists()
    )


def record_ttl_validate(ttl: RecordTtl, *, before: dict | None = None) -> None:
    """Raise a ValidationError by field if this TTL (new, or changed from `before`) cannot be saved. A strategy is
    checked against the tenant's when it is named or renamed: a TTL under a name nothing carries would govern
    nothing, silently."""
    errors: dict[str, list[str]] = {}
    if bool(ttl.record_type) == bool(ttl.strategy):
        errors["record_type"] = ["Give either a record_type or a strategy (the name of one), not both or neither."]
    if ttl.record_type and ttl.record_type not in RecordType.values:
        choices = ", ".join(RecordType.values)
        errors["record_type"] = [f'"{ttl.record_type}" is not a record type. Use one of: {choices}.']
    if len(ttl.strategy) > 255:
        errors["strategy"] = ["At most 255 characters."]
    elif (
        ttl.strategy
        and (before is None or ttl.strategy != before["strategy"])
        and not _strategy_known(tenant_id=ttl.tenant_id, name=ttl.strategy)
    ):
        known = known_strategies(tenant_id=ttl.tenant_id)
        errors["strategy"] = [
            f'"{ttl.strategy}" is not a strategy of this tenant. '
            + (f"Use one of: {', '.join(known)}." if known else "It has none yet.")
        ]
    days = ttl.ttl_days
    if isinstance(days, bool) or not isinstance(days, int) or not TTL_DAYS_MIN <= days <= TTL_DAYS_MAX:
        errors["ttl_days"] = [f"Must be a whole number of days from {TTL_DAYS_MIN} to {TTL_DAYS_MAX}."]
    if ttl.on_expiry not in RecordTtl.OnExpiry.values:
        choices = ", ".join(RecordTtl.OnExpiry.values)
        errors["on_expiry"] = [f'"{ttl.on_expiry}" is not a choice. Use one of: {choices}.']
    if not errors:
        taken = RecordTtl.objects.filter(tenant_id=ttl.tenant_id, record_type=ttl.record_type, strategy=ttl.strategy)
        if taken.exclude(pk=ttl.pk).exists():
            target = f"strategy {ttl.strategy!r}" if ttl.strategy else f"{ttl.record_type} records"
            errors["record_type" if ttl.record_type else "strategy"] = [
                f"There is already a TTL for {target}: change that one."
            ]
    if errors:
        raise ValidationError(errors)


def record_ttl_create(
    *, tenant: Tenant, actor: str, ttl_days: int, record_type: str = "", strategy: str = "", on_expiry: str = "keep"
) -> RecordTtl:
    """A TTL for the tenant's records of one type or of one strategy; the records it governs get their
    `expires_at` at once (so recall skips the expired ones from now on)."""
    ttl = RecordTtl(tenant=tenant, record_type=record_type, strategy=strategy, ttl_days=ttl_days, on_expiry=on_expiry)
    with transaction.atomic():
        record_ttl_validate(ttl)
        ttl.save()
        records_expiry_refresh(tenant_id=tenant.pk, targets=[(ttl.record_type, ttl.strategy)])
        retention_event_add(
            tenant_id=tenant.pk,
            action=RetentionEvent.Action.TTL_CREATED,
            actor=actor,
            subject_id=ttl.pk,
            after=ttl_snapshot(ttl),
        )
    return ttl


def record_ttl_update(*, tenant: Tenant, ttl_id, actor: str, **changes) -> RecordTtl:
    unknown = sorted(set(changes) - set(TTL_FIELDS))
    if unknown:
        raise ValidationError({name: ["Unknown field."] for name in unknown})
    with transaction.atomic():
        ttl = RecordTtl.objects.select_for_update().get(pk=ttl_id, tenant=tenant)
        before = ttl_snapshot(ttl)
        for name, value in changes.items():
            setattr(ttl, name, value)
        record_ttl_validate(ttl, before=before)
        if ttl_snapshot(ttl) == before:
            return ttl
        ttl.updated_at = timezone.now()
        ttl.save()
        targets = [(before["record_type"], before["strategy"]), (ttl.record_type, ttl.strategy)]
        records_expiry_refresh(tenant_id=tenant.pk, targets=targets)
        retention_event_add(
            tenant_id=tenant.pk,
            action=RetentionEvent.Action.TTL_UPDATED,
            actor=actor,
            subject_id=ttl.pk,
            before=before,
            after=ttl_snapshot(ttl),
        )
    return ttl


def record_ttl_delete(*, tenant: Tenant, ttl_id, actor: str) -> None:
    """The records it governed no longer expire (unless another TTL now governs them)."""
    with transaction.atomic():
        ttl = RecordTtl.objects.select_for_update().get(pk=ttl_id, tenant=tenant)
        before = ttl_snapshot(ttl)
        ttl.delete()
        records_expiry_refresh(tenant_id=tenant.pk, targets=[(before["record_type"], before["strategy"])])
        retention_event_add(
            tenant_id=tenant.pk, action=RetentionEvent.Action.TTL_DELETED, actor=actor, subject_id=ttl_id, before=before
        )


# -- the run -------------------------------------------------------------------------------------------------------
def expired_records_purge(*, tenant: Tenant, actor: str, batch: int = RECORD_PURGE_BATCH) -> int:
    """Delete the tenant's expired records under "purge" TTLs, with their revisions, in transactions of `batch`;
    each leaves an entry in the retention trail. Safe to run twice; a record being written meanwhile is left for
    the next run."""
    deleted = 0
    while True:
        with transaction.atomic():
            gone = expired_records_delete(tenant_id=tenant.pk, batch=batch)
            if not gone:
                return deleted
            for record_id, entry in gone:
                retention_event_add(
                    tenant_id=tenant.pk,
                    action=RetentionEvent.Action.RECORD_PURGED,
                    actor=actor,
                    subject_id=record_id,
                    before=entry,
                )
            deleted += len(gone)


def retention_apply(*, tenant: Tenant, trigger: str, dry_run: bool = False) -> RetentionRun:
    """Apply the tenant's retention now (or, `dry_run`, only count what it would do), recorded as a RetentionRun:
    the messages whose content it purged (and their date range), the expired records it deleted, and the expired
    records kept (already no longer recalled)."""
    policy = retention_policy_get(tenant=tenant)
    cutoff = content_cutoff(policy=policy)
    run = RetentionRun.objects.create(tenant=tenant, dry_run=dry_run, trigger=trigger, content_cutoff=cutoff)
    try:
        if dry_run:
            preview = retention_preview(tenant=tenant)
            purged, records_purged = preview.messages, preview.records_to_purge
        else:
            purged = ContentPurge()
            if cutoff is not None:
                purged = messages_content_purge(tenant=tenant, before=cutoff, roles=policy.roles)
            records_purged = expired_records_purge(tenant=tenant, actor=trigger)
        records_expired = expired_records(tenant_id=tenant.pk, on_expiry=RecordTtl.OnExpiry.KEEP).count()
    except Exception as error:
        run.error = f"{type(error).__name__}: {error}"[:2000]
        run.finished_at = timezone.now()
        run.save(update_fields=["error", "finished_at"])
        raise
    run.messages_purged = purged.messages
    run.oldest_message_at, run.newest_message_at = purged.oldest, purged.newest
    run.records_expired, run.records_purged = records_expired, records_purged
    run.finished_at = timezone.now()
    run.save()
    return run


def retention_apply_all(*, trigger: str, dry_run: bool = False) -> list[RetentionRun]:
    """`retention_apply` for every tenant with a policy or a TTL; one tenant's failure is logged (and kept on its
    run) without stopping the others."""
    runs = []
    for tenant in tenants_with_retention():
        try:
            runs.append(retention_apply(tenant=tenant, trigger=trigger, dry_run=dry_run))
        except Exception:
            logger.exception("retention of tenant %s failed", tenant)
    return runs


# -- forgetting a user ---------------------------------------------------------------------------------------------
def user_retention_forget(*, tenant_id, user_id: str) -> dict[str, int]:
    """The retention trail's entries for the user's records a TTL purged: they name the user. Rows deleted per
    model."""
    return cascade_delete(RetentionEvent, "tenant_id = %s AND before ->> 'user_id' = %s", [tenant_id, user_id])


def user_forgetting_handler(sender, tenant_id, user_id, **kwargs):
    # Inside the forgetting transaction (sessions_app.services.forget): the counts go into its audit.
    return user_retention_forget(tenant_id=tenant_id, user_id=user_id)
