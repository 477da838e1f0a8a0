"""Reads of retention: a tenant's policy, which messages it would purge, and what a purge would touch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Max, Min
from django.utils import timezone

from platform_kit.db import planner_settings
from sessions_app.models import Message, RetentionPolicy, Tenant


@dataclass(frozen=True)
class ContentPurge:
    """Messages whose content a purge blanked (or would blank), and the range of their `created_at`."""

    messages: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None

    def joined(self, other: ContentPurge) -> ContentPurge:
        oldest = min((t for t in (self.oldest, other.oldest) if t is not None), default=None)
        newest = max((t for t in (self.newest, other.newest) if t is not None), default=None)
        return ContentPurge(messages=self.messages + other.messages, oldest=oldest, newest=newest)


def retention_policy_get(*, tenant: Tenant) -> RetentionPolicy:
    """The tenant's policy; an unsaved one that keeps everything forever if it never set one."""
    return RetentionPolicy.objects.filter(tenant=tenant).first() or RetentionPolicy(tenant=tenant)


def content_cutoff(*, policy: RetentionPolicy, now: datetime | None = None) -> datetime | None:
    """Messages created before this time have their content purged; None: the policy keeps it forever."""
    if policy.message_content_days is None:
        return None
    return (now or timezone.now()) - timedelta(days=policy.message_content_days)


# How to read `messages_to_purge`: through `message_content_kept`, the index of unpurged messages, which holds the
# candidates and nothing of the purged history. Left to itself PostgreSQL takes "not purged" and "older than the
# cutoff" for independent, expects a share of the old rows to be unpurged, and scans the whole table; and a bitmap
# scan, unlike an index scan, leaves the entries of rows a batch has just purged for the next batch to read again.
UNPURGED_SCAN = {"enable_seqscan": "off", "enable_bitmapscan": "off"}


def messages_to_purge(*, tenant: Tenant, before: datetime, roles=()):
    """The tenant's messages created before `before` whose content is still there (of `roles`; empty: all).
    Read it under `planner_settings(UNPURGED_SCAN)`."""
    messages = Message.objects.filter(tenant=tenant, created_at__lt=before, content_purged_at__isnull=True)
    return messages.filter(role__in=roles) if roles else messages


def content_purge_preview(*, tenant: Tenant, policy: RetentionPolicy, now: datetime | None = None) -> ContentPurge:
    """What purging the tenant's message content now would blank: a count and the messages' date range."""
    before = content_cutoff(policy=policy, now=now)
    if before is None:
        return ContentPurge()
    with planner_settings(UNPURGED_SCAN):
        found = messages_to_purge(tenant=tenant, before=before, roles=policy.roles).aggregate(
            messages=Count("pk"), oldest=Min("created_at"), newest=Max("created_at")
        )
    return ContentPurge(**found)
