"""Reads of the purge of message content: which messages a purge would blank, and how many (the policy that
says when is retention_app's)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min

from platform_kit.db import planner_settings
from sessions_app.models import Message, Tenant


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


def content_purge_preview(*, tenant: Tenant, before: datetime, roles=()) -> ContentPurge:
    """What purging the content of the tenant's messages created before `before` (of `roles`; empty: all) would
    blank now: a count and the messages' date range."""
    with planner_settings(UNPURGED_SCAN):
        found = messages_to_purge(tenant=tenant, before=before, roles=roles).aggregate(
            messages=Count("pk"), oldest=Min("created_at"), newest=Max("created_at")
        )
    return ContentPurge(**found)
