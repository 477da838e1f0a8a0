"""A backlog of small embedding tasks (one per turn, a message or two each) is embedded in full batches: the
first task takes the ids of those waiting behind it, up to ACE_EMBEDDER_BATCH."""

from __future__ import annotations

import time

import pytest
import redis
from celery.signals import task_postrun

from aceproject.celery import app
from memory_app.models import MessageEmbedding
from sessions_app.services.messages import messages_append
from tests.conftest import TEST_BROKER_URL, on_test_broker


@pytest.mark.django_db(transaction=True)
def test_a_backlog_of_small_embedding_tasks_is_embedded_in_a_few_batches(api, session, settings, request):
    settings.ACE_EMBED_MESSAGES = False  # the tasks are queued below, one message each
    messages = messages_append(
        tenant=api.tenant,
        session_id=session.pk,
        items=[{"role": "user", "content": f"Message number {i} about trains."} for i in range(300)],
    ).messages
    settings.ACE_EMBED_MESSAGES, settings.ACE_EMBEDDER_BATCH = True, 128
    redis.Redis.from_url(TEST_BROKER_URL).delete("embedding")
    with on_test_broker(), app.producer_or_acquire() as producer:
        for message in messages:  # a backlog: queued before any worker runs
            app.send_task("memory_app.tasks.embed_messages", args=[[str(message.pk)]], producer=producer)
    sizes = []

    def record(sender=None, retval=None, **kwargs):
        if sender is not None and sender.name == "memory_app.tasks.embed_messages":
            sizes.append(retval)

    task_postrun.connect(record, weak=False)
    try:
        request.getfixturevalue("celery_worker")
        deadline = time.monotonic() + 60
        while sum(sizes) < 300 and time.monotonic() < deadline:  # until the tasks that did it all have finished
            time.sleep(0.05)
    finally:
        task_postrun.disconnect(record)
    assert MessageEmbedding.objects.filter(session=session).count() == 300
    assert sizes[:3] == [128, 128, 44]  # three executions did it all, in full batches
    assert sum(sizes) == 300 and redis.Redis.from_url(TEST_BROKER_URL).llen("embedding") == 0
