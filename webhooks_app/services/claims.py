"""Whose delivery is attempted next: a fair share of the delivery workers for every tenant.

Every task of the `webhooks` queue is a *turn*: one attempt of the delivery that this order puts first, whichever
delivery queued the task. The turn goes to the tenant served least recently (its `DeliveryLane`) among those
with a delivery due and fewer than ACE_WEBHOOKS_TENANT_CONCURRENCY attempts under way, and within that tenant
to its delivery due first, skipping webhooks whose circuit breaker holds their deliveries (services/breakers.py).
So a tenant with thousands of deliveries to a slow receiver keeps at most that many workers busy, and another
tenant's delivery waits for one attempt at most, not for the backlog.

The claim locks the tenant's lane row (FOR UPDATE SKIP LOCKED: a second worker takes the next tenant instead of
waiting, and waits only when no other tenant has work), counts its attempts under way, and takes the delivery with
a conditional UPDATE that moves `next_attempt_at` and `claimed_until` a lease ahead. The limit holds across every
process and host sharing the database, and an attempt whose worker died stops counting when its lease ends (the
delivery is then due again).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from platform_kit.tasks import enqueue_or_leave_to_sweep
from webhooks_app.models import DeliveryLane, DeliveryStatus, Webhook, WebhookDelivery

TURN_TASK = "webhooks_app.tasks.deliver"
SWEEP = "deliveries_sweep"
LEASE_MARGIN = timedelta(seconds=60)  # an attempt's lease: the POST's timeout and this

_DELIVERY = WebhookDelivery._meta.db_table
_WEBHOOK = Webhook._meta.db_table
_LANE = DeliveryLane._meta.db_table
# A delivery that may be attempted at %(now)s: pending, due, and its webhook's breaker closed or due for a probe
# (or its webhook deleted or deactivated: the attempt then gives it up without a request, breaker or not).
_CLAIMABLE = (
    "d.status = 'pending' AND d.next_attempt_at <= %(now)s"
    " AND (w.breaker_probe_at IS NULL OR w.breaker_probe_at <= %(now)s OR w.deleted_at IS NOT NULL OR NOT w.active)"
)
_IN_FLIGHT = (
    f"SELECT count(*) FROM {_DELIVERY} f"
    " WHERE f.tenant_id = {tenant} AND f.status = 'pending' AND f.claimed_until > %(now)s"
)


@dataclass(frozen=True)
class Claim:
    delivery_id: uuid.UUID
    number: int  # the attempt's number
    probe: bool  # the attempt is its webhook's half-open probe: it closes the breaker or opens it again


def lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.ACE_WEBHOOKS_TIMEOUT_SECONDS) + LEASE_MARGIN


def lanes_open(tenant_ids) -> None:
    """Give each tenant a lane (once): a tenant without one never gets a turn."""
    DeliveryLane.objects.bulk_create(
        [DeliveryLane(tenant_id=tenant_id) for tenant_id in set(tenant_ids)], ignore_conflicts=True
    )


def turns_enqueue(count: int = 1, *, hint=None, countdown: float | None = None) -> None:
    """Queue `count` turns (after `countdown` seconds). `hint` is the delivery whose creation or retry asked for the
    turn: only for the log, since a turn takes whatever the fair order puts first."""
    for _ in range(count):
        enqueue_or_leave_to_sweep(
            TURN_TASK,
            None if hint is None else str(hint),
            what=f"a webhook delivery turn ({hint or 'follow-up'})",
            sweep=SWEEP,
            countdown=countdown,
        )


def _tenant_next(now: datetime, limit: int, *, skip_locked: bool):
    """The lane of the tenant whose turn it is, locked for this transaction; None when no tenant may have one.
    `skip_locked`: a lane another worker is claiming from is passed over, for the next tenant's."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT lane.tenant_id FROM {_LANE} lane"
            f" WHERE EXISTS (SELECT 1 FROM {_DELIVERY} d JOIN {_WEBHOOK} w ON w.id = d.webhook_id"
            f"   WHERE d.tenant_id = lane.tenant_id AND {_CLAIMABLE})"
            f" AND ({_IN_FLIGHT.format(tenant='lane.tenant_id')}) < %(limit)s"
            " ORDER BY lane.last_served_at ASC NULLS FIRST, lane.tenant_id"
            " LIMIT 1 FOR UPDATE OF lane" + (" SKIP LOCKED" if skip_locked else ""),
            {"now": now, "limit": limit},
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def _in_flight(tenant_id, now: datetime) -> int:
    with connection.cursor() as cursor:
        cursor.execute(_IN_FLIGHT.format(tenant="%(tenant)s"), {"tenant": tenant_id, "now": now})
        return cursor.fetchone()[0]


def _delivery_next(tenant_id, now: datetime, delivery_id=None):
    """(delivery id, webhook id, whether its breaker is open) of the tenant's claimable delivery due first (or of
    `delivery_id`, when it is claimable)."""
    only = " AND d.id = %(delivery)s" if delivery_id is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id, d.webhook_id, w.breaker_opened_at IS NOT NULL FROM {_DELIVERY} d"
            f" JOIN {_WEBHOOK} w ON w.id = d.webhook_id"
            f" WHERE d.tenant_id = %(tenant)s AND {_CLAIMABLE}{only}"
            " ORDER BY d.next_attempt_at, d.id LIMIT 1 FOR UPDATE OF d SKIP LOCKED",
            {"tenant": tenant_id, "now": now, "delivery": delivery_id},
        )
        return cursor.fetchone()


def _claim_in_lane(tenant_id, *, delivery_id=None) -> Claim | None:
    """Inside a transaction holding the tenant's lane: the claim, if the tenant is below its limit (counted under
    the lock, so a claim committed a moment ago counts too) and a delivery may be attempted."""
    now = timezone.now()
    if _in_flight(tenant_id, now) >= settings.ACE_WEBHOOKS_TENANT_CONCURRENCY:
        return None
    row = _delivery_next(tenant_id, now, delivery_id)
    if row is None:
        return None
    delivery_id, webhook_id, breaker_open = row
    lease = lease_end(now)
    if breaker_open:
        # The half-open probe: one delivery, and the next probe not before this one's lease ends.
        Webhook.objects.filter(pk=webhook_id).update(breaker_probe_at=lease)
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(attempts=F("attempts") + 1, next_attempt_at=lease, claimed_until=lease)
    if not claimed:
        return None
    DeliveryLane.objects.filter(tenant_id=tenant_id).update(last_served_at=now)
    number = WebhookDelivery.objects.filter(pk=delivery_id).values_list("attempts", flat=True).get()
    return Claim(delivery_id=delivery_id, number=number, probe=breaker_open)


def delivery_claim_next() -> Claim | None:
    """Take the next delivery for one attempt (see the module's docstring); None when no delivery may be
    attempted now (none due, every tenant with due ones at its limit, or their breakers open)."""
    limit = settings.ACE_WEBHOOKS_TENANT_CONCURRENCY
    with transaction.atomic():
        now = timezone.now()
        tenant_id = _tenant_next(now, limit, skip_locked=True)
        if tenant_id is None:
            # Every tenant with work may be another worker's claim: wait for it (milliseconds), then count again.
            tenant_id = _tenant_next(now, limit, skip_locked=False)
        if tenant_id is None:
            return None
        return _claim_in_lane(tenant_id)


def delivery_claim(delivery_id) -> Claim | None:
    """Take this delivery for one attempt, on the same terms as a turn (due, its tenant below its limit, its
    webhook's breaker closed or due for a probe, nobody else trying it); None otherwise."""
    tenant_id = WebhookDelivery.objects.filter(pk=delivery_id).values_list("tenant_id", flat=True).first()
    if tenant_id is None:
        return None
    lanes_open([tenant_id])
    with transaction.atomic():
        DeliveryLane.objects.select_for_update().filter(tenant_id=tenant_id).exists()
        return _claim_in_lane(tenant_id, delivery_id=delivery_id)


def turns_owed(*, due_before: datetime, cap: int = 1000) -> int:
    """How many turns the sweep queues: for each tenant below its limit, one per delivery it may attempt that has
    been due since `due_before` (lost by a broker outage or a dead worker, or a retry or probe left to the sweep),
    up to its free places."""
    limit = settings.ACE_WEBHOOKS_TENANT_CONCURRENCY
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_LANE} (tenant_id, last_served_at)"
            f" SELECT DISTINCT tenant_id, NULL::timestamptz FROM {_DELIVERY} WHERE status = 'pending'"
            " ON CONFLICT (tenant_id) DO NOTHING"
        )
        cursor.execute(
            "SELECT coalesce(sum(LEAST(waiting, %(limit)s - in_flight)), 0) FROM ("
            f"  SELECT d.tenant_id, count(*) AS waiting, ({_IN_FLIGHT.format(tenant='d.tenant_id')}) AS in_flight"
            f"  FROM {_DELIVERY} d JOIN {_WEBHOOK} w ON w.id = d.webhook_id"
            f"  WHERE {_CLAIMABLE.replace('%(now)s', '%(due_before)s')}"
            "   GROUP BY d.tenant_id"
            ") owed WHERE in_flight < %(limit)s",
            {"limit": limit, "now": timezone.now(), "due_before": due_before},
        )
        return min(int(cursor.fetchone()[0]), cap)
