"""One tenant's webhooks never starve the others: deliveries have their own queue and worker (a strategy run never
waits for a slow receiver), every tenant gets a fair share of the delivery turns (at most
ACE_WEBHOOKS_TENANT_CONCURRENCY attempts at once, held with leases in the database), and a quiet tenant's
delivery arrives within seconds while a slow tenant's backlog is still pending."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.db import connection
from django.utils import timezone

from aceproject.celery import app
from scripts.supervise import read_procfile, supervisord_config
from strategies_app.models import RunStatus, Strategy, StrategyRun, Trigger
from strategies_app.services.runs import run_request
from tests.conftest import TEST_BROKER_URL, on_test_broker
from tests.support.api import make_client
from tests.support.factories import SessionFactory
from tests.support.waiting import wait_for
from tests.webhooks_app.receiver import receiving
from webhooks_app.models import DeliveryStatus, Webhook, WebhookDelivery
from webhooks_app.services.claims import delivery_claim_next
from webhooks_app.services.deliveries import delivery_attempt, events_publish

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def loopback_receivers(settings):
    settings.ACE_WEBHOOKS_ALLOW_PRIVATE = True
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1,::1"  # the outbound policy's allow-list (harmless before it exists)


@pytest.fixture
def slow_receivers(settings, loopback_receivers):
    settings.ACE_WEBHOOKS_TIMEOUT_SECONDS = 0.5
    settings.ACE_WEBHOOKS_RETRY_BASE_SECONDS = 60  # no retry within the test: the backlog is the first attempts
    settings.ACE_WEBHOOKS_BREAKER_FAILURES = 1000  # one failure per webhook here: the breaker has its own tests
    settings.ACE_WEBHOOKS_TENANT_CONCURRENCY = 2


def subscribe(client, url, count=1):
    for _ in range(count):
        answer = client.post("/api/v1/webhooks/", {"url": url, "events": ["record.created"]}, format="json")
        assert answer.status_code == 201, answer.json()


def remember(client, content):
    answer = client.post("/api/v1/records/", {"user_id": "u", "type": "fact", "content": content}, format="json")
    assert answer.status_code == 201, answer.json()


def pending(tenant) -> int:
    return WebhookDelivery.objects.filter(tenant=tenant, status=DeliveryStatus.PENDING).count()


def test_deliveries_have_their_own_queue_and_their_own_worker(tmp_path):
    assert app.amqp.router.route({}, "webhooks_app.tasks.deliver")["queue"].name == "webhooks"
    assert app.amqp.router.route({}, "webhooks_app.tasks.deliveries_sweep")["queue"].name == "celery"
    processes = dict(read_procfile((ROOT / "Procfile").read_text()))
    consumed = {name: command.split("--queues ")[1].split()[0].split(",") for name, command in processes.items()
                if "--queues" in command}  # fmt: skip
    assert consumed["webhooks"] == ["webhooks"]
    assert [name for name, queues in consumed.items() if "webhooks" in queues] == ["webhooks"]
    assert set().union(*consumed.values()) == set(app.amqp.queues)  # every queue has a worker
    # scripts/up stops it with the workers (before web), giving an attempt under way its timeout to end
    config = supervisord_config(list(processes.items()), data_dir=tmp_path, directory=ROOT)
    section = config.split("[program:webhooks]")[1].split("[program:")[0]
    assert "priority=220" in section and "stopwaitsecs=70" in section


@pytest.fixture
def worker_of_the_procfile(transactional_db):
    """A real worker consuming what the Procfile's `worker` process consumes (not the `webhooks` queue)."""
    from celery.contrib.testing.worker import start_worker

    command = dict(read_procfile((ROOT / "Procfile").read_text()))["worker"]
    queues = command.split("--queues ")[1].split()[0]
    try:
        with on_test_broker(), start_worker(app, pool="solo", perform_ping_check=False, queues=queues) as worker:
            yield worker
    finally:
        app.amqp.queues._consume_from = None  # the next worker consumes every queue again
        connection.close()


def test_a_strategy_run_does_not_wait_for_deliveries_to_a_slow_receiver(worker_of_the_procfile, settings):
    settings.ACE_WEBHOOKS_ALLOW_PRIVATE = True
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1,::1"
    settings.ACE_WEBHOOKS_TIMEOUT_SECONDS = 5
    settings.ACE_WEBHOOKS_RETRY_BASE_SECONDS = 60
    api = make_client("acme")
    session = SessionFactory(tenant=api.tenant, name="trip", tool="chat", user_id="u")
    Strategy.objects.filter(tenant=api.tenant).exclude(name="user-profile").update(enabled=False)
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    broker = redis.Redis.from_url(TEST_BROKER_URL)
    try:
        with receiving(delay=6) as slow:
            subscribe(api, slow.url, count=10)
            remember(api, "Prefers window seats")
            # The deliveries are under way (today's code: the worker is waiting on the slow receiver) or queued
            # for their own worker.
            assert wait_for(lambda: slow.received or broker.llen("webhooks") >= 10, 10)
            start = time.monotonic()
            run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
            done = wait_for(lambda: StrategyRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, 10)
            waited = time.monotonic() - start
            assert done, f"the strategy run was not done after {waited:.1f} s"
            assert waited < 3, waited
            assert pending(api.tenant) == 10 and slow.received == []  # left to the webhooks worker
    finally:
        broker.delete("webhooks")


def test_a_quiet_tenants_delivery_arrives_while_a_slow_tenants_backlog_waits(celery_worker, slow_receivers):
    slow_tenant, quiet_tenant = make_client("acme"), make_client("globex")
    with receiving(delay=3) as slow, receiving() as quiet:
        subscribe(slow_tenant, slow.url, count=30)
        subscribe(quiet_tenant, quiet.url)
        remember(slow_tenant, "Thirty deliveries to a receiver that answers after 3 s")
        assert slow.wait_for(1, seconds=10)  # the backlog is under way
        start = time.monotonic()
        remember(quiet_tenant, "One delivery to a receiver that answers at once")
        arrived = quiet.wait_for(1, seconds=8)
        waited = time.monotonic() - start
        backlog = pending(slow_tenant.tenant)
    assert arrived, f"the quiet tenant's delivery had not arrived after {waited:.1f} s"
    assert waited < 3, f"the quiet tenant's delivery waited {waited:.1f} s"
    assert backlog >= 20, backlog  # ahead of most of the slow tenant's backlog, not after it
    assert wait_for(lambda: pending(quiet_tenant.tenant) == 0, 5)


def test_a_tenant_never_has_more_than_its_share_of_attempts_at_once(transactional_db, settings):
    """Claims from many workers at once (threads, each with its own database connection): the busy tenant gets its
    two places, the others their turns; a place whose worker died (its lease ended) is free again."""
    settings.ACE_WEBHOOKS_TENANT_CONCURRENCY = 2
    busy, quiet = make_client("acme").tenant, make_client("globex").tenant
    broker = redis.Redis.from_url(TEST_BROKER_URL)
    with on_test_broker():
        for tenant, count in ((busy, 40), (quiet, 1)):
            Webhook.objects.create(tenant=tenant, url="http://127.0.0.1:9/", events=["record.created"])
            for i in range(count):
                events_publish(tenant_id=tenant.pk, event="record.created", data={"i": i})
    broker.delete("webhooks")  # no worker here: this test claims by itself

    claims, barrier = [], threading.Barrier(8)

    def claim():
        barrier.wait()
        try:
            claims.extend(delivery_claim_next() for _ in range(2))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken = [c for c in claims if c is not None]
    by_tenant = {
        tenant.name: WebhookDelivery.objects.filter(pk__in=[c.delivery_id for c in taken], tenant=tenant).count()
        for tenant in (busy, quiet)
    }
    assert by_tenant == {"acme": 2, "globex": 1}, by_tenant
    assert delivery_claim_next() is None  # both tenants are at their share or done
    waiting = WebhookDelivery.objects.filter(tenant=busy, claimed_until__isnull=True).first()
    assert delivery_attempt(waiting.pk).outcome == "skipped"  # a given delivery waits for its tenant's place too
    # A worker died in its attempt: once the lease ends, the place is free again.
    lost = WebhookDelivery.objects.filter(tenant=busy, claimed_until__isnull=False).first()
    past = timezone.now() - timedelta(hours=1)
    WebhookDelivery.objects.filter(pk=lost.pk).update(claimed_until=past, next_attempt_at=past)
    again = delivery_claim_next()
    assert again is not None and again.delivery_id == lost.pk and again.number == 2


def test_the_sweep_queues_a_turn_per_free_place_not_one_per_waiting_delivery(transactional_db, settings):
    """Deliveries due for longer than the grace and not taken (their turns lost): the sweep queues as many turns as
    their tenants have free places; a backlog waiting for its tenant's places is not lost."""
    from webhooks_app.services.deliveries import deliveries_sweep_turns

    settings.ACE_WEBHOOKS_TENANT_CONCURRENCY = 3
    busy, quiet = make_client("acme").tenant, make_client("globex").tenant
    broker = redis.Redis.from_url(TEST_BROKER_URL)
    with on_test_broker():
        for tenant, count in ((busy, 50), (quiet, 2)):
            Webhook.objects.create(tenant=tenant, url="http://127.0.0.1:9/", events=["record.created"])
            for i in range(count):
                events_publish(tenant_id=tenant.pk, event="record.created", data={"i": i})
        broker.delete("webhooks")  # the turns were lost
        long_ago = timezone.now() - timedelta(minutes=5)
        WebhookDelivery.objects.update(next_attempt_at=long_ago)
        taken = delivery_claim_next()  # one attempt under way, of whichever tenant's turn it was
        assert taken is not None
        # busy: 3 places (2 if the attempt is its own) for 50 (49) waiting; quiet: 2 waiting (1, and 2 places)
        assert deliveries_sweep_turns() == 4
        assert broker.llen("webhooks") == 4
        broker.delete("webhooks")
