"""The memory export (docs/portability.md): a tenant's records, or one user's, as JSON Lines.

The first line is a header (format, version, tenant, user, time, count); then one line per record with every
field, its provenance (the source sessions and messages by id and by the ids the agents gave them, so another
instance can match them) and its whole history (every revision). Records are read in pages of the primary key
(keyset pagination), so the export holds one page in memory whatever the size of the tenant.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import orjson
from django.utils import timezone

from memory_app.models import Record, RecordRevision
from sessions_app.models import Tenant

FORMAT = "open-ace.memory"
VERSION = 1
PAGE_SIZE = 500

RECORD_FIELDS = (
    "id",
    "user_id",
    "namespace",
    "type",
    "content",
    "fields",
    "confidence",
    "valid",
    "valid_from",
    "valid_until",
    "strategy",
    "strategy_version",
    "revision",
    "created_at",
    "updated_at",
    "invalidated_at",
    "invalidated_reason",
)
REVISION_FIELDS = (
    "revision",
    "change",
    "actor",
    "reason",
    "type",
    "content",
    "fields",
    "confidence",
    "valid",
    "valid_from",
    "valid_until",
    "source_session_ids",
    "source_message_ids",
    "created_at",
)


def _line(value: dict) -> bytes:
    return orjson.dumps(value, default=str) + b"\n"


def records_to_export(*, tenant: Tenant, user_id: str | None = None):
    records = Record.objects.filter(tenant=tenant)
    return records if user_id is None else records.filter(user_id=user_id)


def memory_export_lines(*, tenant: Tenant, user_id: str | None = None, page_size: int = PAGE_SIZE) -> Iterator[bytes]:
    """The export, one encoded line at a time: a header, then one line per record in primary-key order."""
    records = records_to_export(tenant=tenant, user_id=user_id)
    yield _line(
        {
            "format": FORMAT,
            "version": VERSION,
            "kind": "header",
            "tenant": tenant.name,
            "tenant_id": tenant.pk,
            "user_id": user_id,
            "exported_at": timezone.now(),
            "records": records.count(),  # at the start: records written while it streams may be in it or not
        }
    )
    after = None
    while True:
        page = records.order_by("pk").values(*RECORD_FIELDS)
        if after is not None:
            page = page.filter(pk__gt=after)
        page = list(page[:page_size])
        if not page:
            return
        yield from (_line(line) for line in record_lines(page))
        after = page[-1]["id"]


def record_lines(records: list[dict]) -> list[dict]:
    """Each record (a dict of RECORD_FIELDS) with its provenance and revisions: three queries per page."""
    ids = [record["id"] for record in records]
    sessions, messages, revisions = defaultdict(list), defaultdict(list), defaultdict(list)
    through = Record.source_sessions.through.objects.filter(record_id__in=ids)
    for record_id, session_id, tool, agent_session_id in through.values_list(
        "record_id", "session_id", "session__tool", "session__agent_session_id"
    ).order_by("session_id"):
        sessions[record_id].append({"id": session_id, "tool": tool, "agent_session_id": agent_session_id})
    through = Record.source_messages.through.objects.filter(record_id__in=ids)
    for record_id, message_id, session_id, seq, external_id in through.values_list(
        "record_id", "message_id", "message__session_id", "message__seq", "message__external_id"
    ).order_by("message_id"):
        messages[record_id].append({"id": message_id, "session": session_id, "seq": seq, "external_id": external_id})
    history = RecordRevision.objects.filter(record_id__in=ids).order_by("record_id", "revision")
    for revision in history.values("record_id", *REVISION_FIELDS):
        revisions[revision.pop("record_id")].append(revision)
    return [
        {
            "kind": "record",
            **record,
            "sources": {"sessions": sessions[record["id"]], "messages": messages[record["id"]]},
            "revisions": revisions[record["id"]],
        }
        for record in records
    ]
