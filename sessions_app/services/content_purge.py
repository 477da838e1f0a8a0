"""Purging message content: the ledger's side of retention (retention_app decides which tenant's messages and
when, from its policy).

Purging blanks what a message *said* and keeps what it *was*: the row stays with its ids, seq, role,
conversation, times, model, tokens, request and tool names, so every counter, roll-up and cost is unchanged
and records that cite it keep valid provenance. Gone: `content`, `thinking` (a user message's system prompt
snapshot, an assistant's reasoning), the arguments of its tool calls (their ids and names stay), its
attachments, the free-form values of its metadata (id-valued keys stay), its search vector and — through
`messages_purged`, in the same transaction — its embedding vectors.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.utils import timezone

from platform_kit.db import planner_settings
from sessions_app.models import Message, Session, Tenant
from sessions_app.selectors.content_purge import UNPURGED_SCAN, ContentPurge, messages_to_purge
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
