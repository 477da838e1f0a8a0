"""Reads of retention across the ledger and memory: what a retention run would do to a tenant, now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Func, Q, UUIDField
from django.db.models.functions import Now
from django.utils import timezone

from memory_app.models import Record, RecordTtl
from sessions_app.models import RetentionPolicy, Tenant
from sessions_app.selectors.retention import ContentPurge, content_cutoff, content_purge_preview, retention_policy_get


@dataclass(frozen=True)
class RetentionPreview:
    """What applying a tenant's retention now would do (nothing is changed to compute it)."""

    tenant: Tenant
    policy: RetentionPolicy
    content_cutoff: datetime | None
    messages: ContentPurge
    records_expired: int  # expired records kept under a "keep" TTL: already no longer recalled
    records_to_purge: int  # expired records a "purge" TTL deletes


class GoverningTtl(Func):
    """The id of the TTL that governs a record (`ace_record_ttl_id`, migration 0007): its strategy's, else its
    type's; NULL without one. The same function sets `expires_at`, so the two never disagree."""

    function = "ace_record_ttl_id"
    output_field = UUIDField()

    def __init__(self):
        super().__init__(F("tenant_id"), F("type"), F("strategy"))


def expired_records(*, tenant_id, on_expiry: str):
    """The tenant's records whose TTL has run out, under TTLs that `on_expiry` them."""
    ttls = RecordTtl.objects.filter(tenant_id=tenant_id, on_expiry=on_expiry).values("pk")
    expired = Record.objects.filter(tenant_id=tenant_id, expires_at__lte=Now())
    return expired.alias(ttl=GoverningTtl()).filter(ttl__in=ttls)


def retention_preview(*, tenant: Tenant, now: datetime | None = None) -> RetentionPreview:
    now = now or timezone.now()
    policy = retention_policy_get(tenant=tenant)
    return RetentionPreview(
        tenant=tenant,
        policy=policy,
        content_cutoff=content_cutoff(policy=policy, now=now),
        messages=content_purge_preview(tenant=tenant, policy=policy, now=now),
        records_expired=expired_records(tenant_id=tenant.pk, on_expiry=RecordTtl.OnExpiry.KEEP).count(),
        records_to_purge=expired_records(tenant_id=tenant.pk, on_expiry=RecordTtl.OnExpiry.PURGE).count(),
    )


def tenants_with_retention() -> list[Tenant]:
    """Tenants with a content policy that purges, or with a record TTL: the ones a run looks at."""
    with_policy = RetentionPolicy.objects.filter(message_content_days__isnull=False).values("tenant_id")
    with_ttl = RecordTtl.objects.values("tenant_id")
    return list(Tenant.objects.filter(Q(pk__in=with_policy) | Q(pk__in=with_ttl)).order_by("name"))
