"""Work of each kind has its own queue, and a worker takes from its queues in turn: a flood of embedding
tasks never holds up a strategy run (or indexing, or the periodic sweeps)."""

from __future__ import annotations

import time

import redis

from aceproject.celery import app
from sessions_app.services.messages import messages_append
from strategies_app.models import RunStatus, Strategy, StrategyRun, Trigger
from strategies_app.services.runs import run_request
from tests.conftest import TEST_BROKER_URL


def test_each_kind_of_work_is_routed_to_its_own_queue():
    queues = {
        name: app.amqp.router.route({}, name)["queue"].name
        for name in (
            "memory_app.tasks.embed_messages",
            "memory_app.tasks.embed_pending",
            "sessions_app.tasks.index_messages",
            "strategies_app.tasks.run_strategy",
            "strategies_app.tasks.sessions_messages_triggers",
            "strategies_app.tasks.runs_requeue",
            "sessions_app.tasks.close_abandoned_turns",
            "webhooks_app.tasks.deliver",
            "webhooks_app.tasks.deliveries_sweep",
        )
    }
    assert queues == {
        "memory_app.tasks.embed_messages": "embedding",
        "memory_app.tasks.embed_pending": "embedding",
        "sessions_app.tasks.index_messages": "indexing",
        "strategies_app.tasks.run_strategy": "strategies",
        "strategies_app.tasks.sessions_messages_triggers": "strategies",
        "strategies_app.tasks.runs_requeue": "celery",  # the sweep of lost runs is never behind them
        "sessions_app.tasks.close_abandoned_turns": "celery",
        "webhooks_app.tasks.deliver": "webhooks",  # its own worker: a slow receiver holds up no other work
        "webhooks_app.tasks.deliveries_sweep": "celery",  # never behind a backlog of delivery turns
    }
    assert set(app.amqp.queues) == {"celery", "strategies", "indexing", "embedding", "webhooks"}  # without -Q: all


def test_a_strategy_run_is_not_held_up_by_two_thousand_waiting_embedding_tasks(api, session, settings, celery_worker):
    broker = redis.Redis.from_url(TEST_BROKER_URL)
    Strategy.objects.filter(tenant=api.tenant).exclude(name="user-profile").update(enabled=False)
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    settings.ACE_EMBED_MESSAGES = False  # this test queues the embedding work itself
    ids = messages_append(
        tenant=api.tenant,
        session_id=session.pk,
        items=[{"role": "user", "content": f"I prefer window seats, note {i}."} for i in range(40)],
    ).messages
    ids = [m.pk for m in ids]
    settings.ACE_EMBED_MESSAGES = True
    try:
        with app.producer_or_acquire() as producer:
            for i in range(2000):
                app.send_task("memory_app.tasks.embed_messages", args=[[str(ids[i % len(ids)])]], producer=producer)
        start = time.monotonic()
        run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
        while StrategyRun.objects.get(pk=run.pk).status != RunStatus.SUCCEEDED and time.monotonic() - start < 60:
            time.sleep(0.02)
        waited, still_waiting = time.monotonic() - start, broker.llen("embedding")
    finally:
        broker.delete("embedding")  # the rest of the flood is not this test's business
    assert StrategyRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, f"not done after {waited:.1f} s"
    # The run went ahead of the flood: behind it, it would finish only once the queue was empty. (How much of the
    # flood the embedding worker got through meanwhile depends on the machine's load: 966 left on a busy CI run.)
    assert still_waiting > 0, still_waiting
