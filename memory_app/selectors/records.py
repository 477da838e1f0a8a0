"""Reads of records and vectors: the records nearest to a record, what still waits for a vector, the records
an extractor is shown beside new messages, and the records whose TTL has run out."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, Func, OuterRef, UUIDField
from django.db.models.functions import Now
from django.utils import timezone

from memory_app.embedders import Embedder
from memory_app.models import MessageEmbedding, Record, RecordTtl, unexpired
from sessions_app.models import Message


def pending_records(*, embedder: Embedder, limit: int) -> list:
    return list(
        Record.objects.filter(valid=True).exclude(embedding_key=embedder.key).values_list("pk", flat=True)[:limit]
    )


def pending_messages(*, embedder: Embedder, limit: int, within: timedelta | None = timedelta(days=1)) -> list:
    """Messages with text of the embedded roles and no vector in the embedder's space, received within `within`
    (None: all; the periodic sweep looks at the last day, `ace_embeddings reembed` at everything)."""
    embedded = MessageEmbedding.objects.filter(message_id=OuterRef("pk"), embedding_key=embedder.key)
    messages = (
        Message.objects.all() if within is None else Message.objects.filter(received_at__gte=timezone.now() - within)
    )
    messages = messages.filter(role__in=settings.ACE_EMBED_MESSAGE_ROLES, session__deleted_at__isnull=True)
    messages = messages.exclude(content="")
    return list(messages.filter(~Exists(embedded)).values_list("pk", flat=True)[:limit])


def nearest_records(*, record: Record, limit: int = 20, same_user: bool = True) -> list[dict]:
    """Records of the tenant nearest to `record` in its own embedder space: [{record, similarity}]."""
    if not record.embedding_key or record.embedding is None:
        return []
    dims = len(record.embedding)
    literal = "[" + ",".join(repr(float(x)) for x in record.embedding) + "]"
    where, params = (
        ["tenant_id = %s", "embedding_key = %s", "id <> %s"],
        [record.tenant_id, record.embedding_key, record.pk],
    )
    if same_user:
        where.append("user_id = %s")
        params.append(record.user_id)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(
            f"SELECT id, 1 - ((embedding::vector({dims})) <=> %s::vector({dims})) AS similarity "
            f"FROM {Record._meta.db_table} WHERE {' AND '.join(where)} "
            f"ORDER BY (embedding::vector({dims})) <=> %s::vector({dims}) LIMIT {int(limit)}",
            [literal, *params, literal],
        )
        rows = cursor.fetchall()
    records = Record.objects.in_bulk([pk for pk, _ in rows])
    return [{"record": records[pk], "similarity": similarity} for pk, similarity in rows if pk in records]


def records_related(*, tenant, user_id: str, type: str, first_slot: str = "", limit: int) -> list[dict]:
    """The user's valid records of `type` (no namespace) as an extractor reads them ({id, type, content,
    fields}): those about `first_slot` first (a session's task summary, which a task strategy extends), then
    the `limit` most recently changed."""
    records = Record.objects.filter(unexpired(), tenant=tenant, user_id=user_id, namespace="", type=type, valid=True)
    out = list(records.filter(fields__slot=first_slot)) if first_slot else []
    out += list(records.exclude(pk__in=[r.pk for r in out]).order_by("-updated_at")[:limit])
    return [{"id": str(r.pk), "type": r.type, "content": r.content, "fields": r.fields} for r in out]


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
