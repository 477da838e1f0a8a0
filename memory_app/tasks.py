"""Embedding work, after commit and in batches. Safe to run twice: already-embedded rows are skipped."""

from celery import shared_task
from django.conf import settings

from memory_app.embedders import EmbedderUnavailable, get_embedder
from memory_app.embeddings import (
    embedding_progress_lower_sql,
    message_embeddings_reset,
    messages_embed,
    records_embed,
)
from memory_app.selectors.records import pending_messages, pending_records
from memory_app.selectors.status import embedding_progress_refresh
from platform_kit.tasks import enqueue_or_leave_to_sweep, queued_siblings

RETRY = {
    "autoretry_for": (EmbedderUnavailable,),
    "retry_backoff": 5,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 12,  # about an hour of retries; the periodic sweep picks up anything left after that
    "acks_late": True,
    "time_limit": 300,
    "soft_time_limit": 240,
}


@shared_task(**RETRY)
def embed_records(record_ids: list[str]) -> int:
    return records_embed(record_ids=record_ids)


@shared_task(bind=True, **RETRY)
def embed_messages(self, message_ids: list[str]) -> int:
    """Embed the messages, with those of the embed_messages tasks waiting next in the queue (up to
    ACE_EMBEDDER_BATCH in all): after a burst of writes (a task per turn, two messages each) a backlog costs one
    embedder call (one HTTP request for a remote embedder) and one write per batch, not per turn."""
    with queued_siblings(self, limit=settings.ACE_EMBEDDER_BATCH - len(message_ids)) as more:
        return messages_embed(message_ids=[*message_ids, *more])


@shared_task(acks_late=True, time_limit=600, soft_time_limit=540)
def embed_pending(batch: int = 256, limit: int = 20_000) -> int:
    """The periodic sweep (and the re-embedding after the embedder changed): queue every valid record whose
    vector is missing or from another embedder, and the last day's messages that have none (after an
    embedder change, `manage.py ace_embeddings reembed` queues the older messages)."""
    embedder = get_embedder()
    record_ids = pending_records(embedder=embedder, limit=limit)
    message_ids = pending_messages(embedder=embedder, limit=limit) if settings.ACE_EMBED_MESSAGES else []
    for start in range(0, len(record_ids), batch):
        embed_records.delay([str(pk) for pk in record_ids[start : start + batch]])
    for start in range(0, len(message_ids), batch):
        embed_messages.delay([str(pk) for pk in message_ids[start : start + batch]])
    embedding_progress_refresh()  # keeps the memory status's watermarks near the present (selectors.status)
    return len(record_ids) + len(message_ids)


def enqueue(task, ids) -> None:
    """Queue embedding work without ever failing the write that asked for it: the data is committed, and
    the periodic sweep (embed_pending) catches up with anything a broker outage kept from the queue."""
    enqueue_or_leave_to_sweep(
        task, [str(pk) for pk in ids], what=f"{task.name} for {len(ids)} rows", sweep="embed_pending"
    )


# Messages per embedding task queued after a write: an import's batch of thousands is shared by the
# workers (and a retry redoes a part), an API append of a few is one task.
EMBED_TASK_MESSAGES = 500


def messages_appended_handler(sender, appended, **kwargs):
    if not settings.ACE_EMBED_MESSAGES:
        return
    ids = [pk for entry in appended for pk in entry.message_ids]
    for start in range(0, len(ids), EMBED_TASK_MESSAGES):
        enqueue(embed_messages, ids[start : start + EMBED_TASK_MESSAGES])


def messages_amended_handler(sender, amended, **kwargs):
    # An import completed stored messages in place (a streamed response's later lines): embedded again.
    if not settings.ACE_EMBED_MESSAGES:
        return
    ids = [pk for entry in amended for pk in entry.message_ids]
    message_embeddings_reset(message_ids=ids)
    for start in range(0, len(ids), EMBED_TASK_MESSAGES):
        enqueue(embed_messages, ids[start : start + EMBED_TASK_MESSAGES])


def turn_completing_handler(sender, session_id, first_seq, **kwargs):
    # The turn's two messages have their final text now (the placeholder was empty when it was appended): the
    # memory status counts them as waiting again, in the completion's own statement.
    if settings.ACE_EMBED_MESSAGES:
        return embedding_progress_lower_sql(session_id=session_id, first_seq=first_seq)
    return None


def turn_completed_handler(sender, message_ids, **kwargs):
    if settings.ACE_EMBED_MESSAGES:
        enqueue(embed_messages, message_ids)
