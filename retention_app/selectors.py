"""Reads of retention across the ledger and memory: a tenant's policy, and what a retention run would do to a
tenant, now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from memory_app.models import RecordTtl
from memory_app.selectors.records import expired_records
from retention_app.models import RetentionPolicy
from sessions_app.models import Tenant
from sessions_app.selectors.content_purge import ContentPurge, content_purge_preview


@dataclass(frozen=True)
class RetentionPreview:
    """What applying a tenant's retention now would do (nothing is changed to compute it)."""

    tenant: Tenant
    policy: RetentionPolicy
    content_cutoff: datetime | None
    messages: ContentPurge
    records_expired: int  # expired records kept under a "keep" TTL: already no longer recalled
    records_to_purge: int  # expired records a "purge" TTL deletes


def retention_policy_get(*, tenant: Tenant) -> RetentionPolicy:
    """The tenant's policy; an unsaved one that keeps everything forever if it never set one."""
    return RetentionPolicy.objects.filter(tenant=tenant).first() or RetentionPolicy(tenant=tenant)


def content_cutoff(*, policy: RetentionPolicy, now: datetime | None = None) -> datetime | None:
    """Messages created before this time have their content purged; None: the policy keeps it forever."""
    if policy.message_content_days is None:
        return None
    return (now or timezone.now()) - timedelta(days=policy.message_content_days)


def retention_preview(*, tenant: Tenant, now: datetime | None = None) -> RetentionPreview:
    now = now or timezone.now()
    policy = retention_policy_get(tenant=tenant)
    cutoff = content_cutoff(policy=policy, now=now)
    return RetentionPreview(
        tenant=tenant,
        policy=policy,
        content_cutoff=cutoff,
        messages=ContentPurge()
        if cutoff is None
        else content_purge_preview(tenant=tenant, before=cutoff, roles=policy.roles),
        records_expired=expired_records(tenant_id=tenant.pk, on_expiry=RecordTtl.OnExpiry.KEEP).count(),
        records_to_purge=expired_records(tenant_id=tenant.pk, on_expiry=RecordTtl.OnExpiry.PURGE).count(),
    )


def tenants_with_retention() -> list[Tenant]:
    """Tenants with a content policy that purges, or with a record TTL: the ones a run looks at."""
    with_policy = RetentionPolicy.objects.filter(message_content_days__isnull=False).values("tenant_id")
    with_ttl = RecordTtl.objects.values("tenant_id")
    return list(Tenant.objects.filter(Q(pk__in=with_policy) | Q(pk__in=with_ttl)).order_by("name"))
