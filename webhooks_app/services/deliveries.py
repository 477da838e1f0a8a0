"""From an event to deliveries, and each delivery's attempts: signed, retried with backoff, safe to run twice.

- `events_publish` writes one delivery per active webhook of the tenant that subscribes to the event (the
  same `event_id` in each) and queues a turn for each when that commits.
- `delivery_turn` is one turn of the delivery workers: it claims the delivery the fair order puts first
  (services/claims.py: the tenant served least recently, at most ACE_WEBHOOKS_TENANT_CONCURRENCY attempts per
  tenant at once, none to a webhook whose breaker is open) with a conditional UPDATE (Healthchecks.io's way):
  the claim moves `next_attempt_at` a lease ahead, so a second task finds nothing to do, and an attempt whose
  worker died is due again once the lease ends. It POSTs, logs the attempt, and decides: 2xx succeeded; a
  timeout, a connection error, 408, 429 or 5xx retried after a backoff (ACE_WEBHOOKS_RETRY_BASE_SECONDS ×
  3^(n-1), plus up to 20 % jitter) until ACE_WEBHOOKS_MAX_ATTEMPTS; anything else failed at once. The same
  failures count towards the webhook's circuit breaker (services/breakers.py). Then it queues the next turn.
- `delivery_attempt` is the same for one given delivery, now, in the calling process (no turns queued after it).
- `deliveries_sweep_turns` is what the sweep (every minute) queues again: turns for deliveries due and not taken
  for longer than a grace.
- `delivery_redeliver` and `webhook_ping` are what the API and the admin call.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

import orjson
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory_app.services import api_timestamp
from platform_kit.redaction import redact_url
from sessions_app.models import Tenant
from webhooks_app.events import PING
from webhooks_app.models import DeliveryStatus, Webhook, WebhookAttempt, WebhookChange, WebhookDelivery
from webhooks_app.services import transport
from webhooks_app.services.breakers import breaker_record_failure, breaker_record_success
from webhooks_app.services.claims import (
    Claim,
    delivery_claim,
    delivery_claim_next,
    lanes_open,
    turns_enqueue,
    turns_owed,
)
from webhooks_app.services.signing import signature
from webhooks_app.services.webhooks import WebhookDeleted, audit_log

logger = logging.getLogger(__name__)

SWEEP_GRACE = timedelta(seconds=60)  # a due delivery not claimed this long after it was due was lost
SCHEDULE_DIRECTLY_UP_TO = 600  # retries and probes due sooner are queued with a countdown; later ones by the sweep
WAIT_IN_TASK_UP_TO = 2.0  # seconds: a retry or probe due this soon is waited for by the same task
TASK_BUSY_UP_TO = 30.0  # seconds: ... as long as the task has been busy less than this
RETRIED_STATUSES = {408, 429}


class DeliveryNotRedeliverable(Exception):
    """A pending delivery is still being tried, or its webhook is inactive or deleted."""


def event_envelope(*, event_id: uuid.UUID, event: str, tenant_id, data: dict, created_at=None) -> dict:
    return {
        "id": str(event_id),
        "type": event,
        "created_at": api_timestamp(created_at or timezone.now()),
        "tenant": str(tenant_id),
        "data": data,
    }


def _create(*, webhooks, event: str, event_id, payload: dict, requested_by: str, redelivery_of=None):
    deliveries = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(
            tenant_id=webhook.tenant_id,
            webhook=webhook,
            event=event,
            event_id=event_id,
            payload=payload,
            requested_by=requested_by[:255],
            redelivery_of=redelivery_of,
        )
        for webhook in webhooks
    )
    lanes_open({webhook.tenant_id for webhook in webhooks})
    ids = [delivery.pk for delivery in deliveries]
    transaction.on_commit(lambda: [turns_enqueue(hint=pk) for pk in ids])
    return deliveries


def events_publish(*, tenant_id, event: str, data: dict) -> list[WebhookDelivery]:
    """One delivery of the event for each of the tenant's active webhooks that subscribe to it."""
    webhooks = list(
        Webhook.objects.filter(tenant_id=tenant_id, active=True, deleted_at__isnull=True, events__contains=[event])
    )
    if not webhooks:
        return []
    event_id = uuid.uuid4()
    payload = event_envelope(event_id=event_id, event=event, tenant_id=tenant_id, data=data)
    with transaction.atomic():
        return _create(webhooks=webhooks, event=event, event_id=event_id, payload=payload, requested_by="event")


def webhook_ping(*, tenant: Tenant, webhook_id, actor: str) -> WebhookDelivery:
    """A `ping` to the webhook, whatever events it subscribes to (inactive ones too: it is how one checks a
    receiver before switching it on)."""
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().get(pk=webhook_id, tenant=tenant)
        if webhook.deleted_at is not None:
            raise WebhookDeleted("The webhook was deleted; it receives nothing more.")
        event_id = uuid.uuid4()
        data = {
            "webhook": str(webhook.pk),
            "url": redact_url(webhook.url),
            "events": webhook.events,
            "requested_by": actor,
        }
        payload = event_envelope(event_id=event_id, event=PING, tenant_id=tenant.pk, data=data)
        (delivery,) = _create(webhooks=[webhook], event=PING, event_id=event_id, payload=payload, requested_by=actor)
        audit_log(webhook, action=WebhookChange.Action.TEST, actor=actor, changes={"delivery": str(delivery.pk)})
    return delivery


def delivery_redeliver(*, tenant_id, delivery_id, actor: str) -> WebhookDelivery:
    """Send a delivery's event again, as a new delivery (the same event id and payload, signed anew); the
    original and its attempts stay as they were."""
    with transaction.atomic():
        original = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id, tenant_id=tenant_id)
        webhook = Webhook.objects.select_for_update().get(pk=original.webhook_id)
        if webhook.deleted_at is not None:
            raise DeliveryNotRedeliverable("Its webhook was deleted; it receives nothing more.")
        if not webhook.active and original.event != PING:
            raise DeliveryNotRedeliverable('Its webhook is inactive: activate it first (PATCH {"active": true}).')
        if original.status == DeliveryStatus.PENDING:
            raise DeliveryNotRedeliverable(
                f"It is still being delivered (attempt {original.attempts} of {settings.ACE_WEBHOOKS_MAX_ATTEMPTS}); "
                "redeliver it once it has succeeded or failed."
            )
        (delivery,) = _create(
            webhooks=[webhook],
            event=original.event,
            event_id=original.event_id,
            payload=original.payload,
            requested_by=actor,
            redelivery_of=original,
        )
        audit_log(
            webhook,
            action=WebhookChange.Action.REDELIVER,
            actor=actor,
            changes={"delivery": str(original.pk), "redelivery": str(delivery.pk)},
        )
    return delivery


@dataclass(frozen=True)
class AttemptResult:
    outcome: str  # succeeded | retry | failed | idle (no delivery may be attempted now) | skipped (not this one)
    retry_in: float | None = None  # seconds, when outcome is retry


def retry_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1, 2, …): base × 3^(attempt-1), + up to 20 %."""
    delay = settings.ACE_WEBHOOKS_RETRY_BASE_SECONDS * 3 ** (attempt - 1)
    return delay * (1 + random.uniform(0, 0.2))  # noqa: S311 - jitter, not a secret


def body_bytes(payload: dict) -> bytes:
    return orjson.dumps(payload)


def delivery_turn() -> AttemptResult:
    """One turn (the result of its attempt): an attempt of the delivery whose turn it is (services/claims.py), then
    the turns that follow from it — the next one now (a backlog goes on at its fair pace), the retry's when it is
    due, the probe's when the breaker opened, and one per place of the tenant when a probe closed it (the held
    deliveries go). A retry or probe due within WAIT_IN_TASK_UP_TO seconds (only with small settings) is waited
    for here, as long as the task has been busy less than TASK_BUSY_UP_TO; a later one is queued with a countdown
    up to SCHEDULE_DIRECTLY_UP_TO, and left to the sweep beyond (a long countdown would sit in a worker's memory,
    or come back early from Redis)."""
    started = time.monotonic()
    first, owed = _turn()
    due_at = sorted(time.monotonic() + seconds for seconds in owed)
    while due_at:
        at = due_at.pop(0)
        now = time.monotonic()
        if at - now > WAIT_IN_TASK_UP_TO or at - started > TASK_BUSY_UP_TO:
            if at - now <= SCHEDULE_DIRECTLY_UP_TO:
                turns_enqueue(countdown=max(at - now, 0))
            continue
        time.sleep(max(at - now, 0))
        _, owed = _turn()
        due_at = sorted(due_at + [time.monotonic() + seconds for seconds in owed])
    return first


def _turn() -> tuple[AttemptResult, list[float]]:
    """One claim and its attempt: the result, and in how many seconds the turns it owes are due (its retry, its
    webhook's probe)."""
    claim = delivery_claim_next()
    if claim is None:
        return AttemptResult("idle"), []
    result, owed, breaker_closed = _attempt_judged(claim)
    turns_enqueue()
    if breaker_closed:
        turns_enqueue(settings.ACE_WEBHOOKS_TENANT_CONCURRENCY)
    return result, owed


def delivery_attempt(delivery_id) -> AttemptResult:
    """One attempt of this delivery now, in this process, on a turn's terms (due, its tenant below its limit, its
    webhook's breaker closed or due for a probe, nobody else trying it; else "skipped"). The turns that follow
    from it are not queued: a worker's next turn, or the sweep, takes its retry."""
    claim = delivery_claim(delivery_id)
    if claim is None:
        return AttemptResult("skipped")
    result, _, _ = _attempt_judged(claim)
    return result


def _attempt_judged(claim: Claim) -> tuple[AttemptResult, list[float], bool]:
    """A claimed delivery's attempt, and what it tells its webhook's circuit breaker: (the result, in how many
    seconds the turns it owes are due — its retry, its webhook's probe —, whether it closed the breaker)."""
    result, webhook_id, receiver_failed = _attempt(claim)
    owed = [result.retry_in] if result.outcome == "retry" else []
    if receiver_failed:
        cooldown = breaker_record_failure(webhook_id=webhook_id, probe=claim.probe)
        if cooldown is not None:
            owed.append(cooldown)
        return result, owed, False
    return result, owed, result.outcome == "succeeded" and breaker_record_success(webhook_id=webhook_id)


def _attempt(claim: Claim) -> tuple[AttemptResult, object, bool]:
    """The POST of a claimed delivery and its record: (the result, its webhook's id, whether the receiver failed
    as a receiver that is down fails)."""
    delivery_id, number = claim.delivery_id, claim.number
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    webhook = delivery.webhook
    ours = WebhookDelivery.objects.filter(pk=delivery_id, status=DeliveryStatus.PENDING, attempts=number)
    if webhook.deleted_at is not None or (not webhook.active and delivery.event != PING):
        why = "deleted" if webhook.deleted_at is not None else "deactivated"
        ours.update(
            status=DeliveryStatus.FAILED,
            attempts=number - 1,
            next_attempt_at=None,
            claimed_until=None,
            error=f"Not sent: the webhook was {why}.",
        )
        return AttemptResult("failed"), webhook.pk, False
    body = body_bytes(delivery.payload)
    timestamp = int(timezone.now().timestamp())
    headers = {
        "X-ACE-Event": delivery.event,
        "X-ACE-Event-Id": str(delivery.event_id),
        "X-ACE-Delivery": str(delivery.pk),
        "X-ACE-Attempt": str(number),
        "X-ACE-Timestamp": str(timestamp),
        "X-ACE-Signature": signature(secret=webhook.secret, timestamp=timestamp, body=body),
    }
    started_at = timezone.now()
    answer = transport.post(webhook.url, body=body, headers=headers, timeout=settings.ACE_WEBHOOKS_TIMEOUT_SECONDS)
    outcome, retry_in, error = _judge(answer, number)
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery,
            tenant_id=delivery.tenant_id,
            number=number,
            started_at=started_at,
            duration_ms=answer.duration_ms,
            response_status=answer.status,
            response_headers=answer.headers,
            response_body=answer.body,
            error=error,
            outcome=outcome,
        )
        changes = {
            "response_status": answer.status,
            "response_headers": answer.headers,
            "response_body": answer.body,
            "error": error,
            "duration_ms": answer.duration_ms,
            "claimed_until": None,
        }
        if outcome == "succeeded":
            changes.update(status=DeliveryStatus.SUCCEEDED, delivered_at=timezone.now(), next_attempt_at=None)
        elif outcome == "failed":
            changes.update(status=DeliveryStatus.FAILED, next_attempt_at=None)
        else:
            changes.update(next_attempt_at=timezone.now() + timedelta(seconds=retry_in))
        if not ours.update(**changes):
            logger.info("webhook delivery %s: attempt %s was taken for lost meanwhile", delivery_id, number)
    return AttemptResult(outcome, retry_in), webhook.pk, _receiver_failed(answer)


def _receiver_failed(answer: transport.Answer) -> bool:
    """The answer of a receiver that is down or overloaded: no answer (but a refused address, which is ours), 408,
    429 or 5xx. What the retries and the circuit breaker are for."""
    if answer.status is None:
        return not answer.error.startswith("Refused")
    return answer.status in RETRIED_STATUSES or answer.status >= 500


def _judge(answer: transport.Answer, number: int) -> tuple[str, float | None, str]:
    """(outcome, seconds to the retry, the error to show) for an attempt's answer."""
    if answer.status is not None and 200 <= answer.status < 300:
        return "succeeded", None, ""
    error = answer.error if answer.status is None else f"HTTP {answer.status}"
    if answer.status is not None and 300 <= answer.status < 400:
        error += " (redirects are not followed: give the final URL)"
    if not _receiver_failed(answer):
        return "failed", None, error
    if number >= settings.ACE_WEBHOOKS_MAX_ATTEMPTS:
        return "failed", None, f"{error}; gave up after {number} attempts"
    return "retry", retry_delay(number), error


def deliveries_sweep_turns() -> int:
    """Queue the turns owed to deliveries due for longer than the grace and not taken: lost by a broker outage, a
    dead worker (its lease ended), or a retry or a probe far in the future that was left to the sweep. As many
    as their tenants have free places, not one per delivery (a backlog waiting for its tenant's places is not
    lost). The number queued."""
    count = turns_owed(due_before=timezone.now() - SWEEP_GRACE)
    turns_enqueue(count)
    return count


# Where a delivery's payload names its user: a record's, a strategy run's, a budget's scoped to one user (its
# scope is BudgetScope.USER, `user_id`).
_PAYLOAD_OF_USER = (
    "(payload -> 'data' -> 'record' ->> 'user_id' = %s"
    " OR payload -> 'data' -> 'run' ->> 'user_id' = %s"
    " OR (payload -> 'data' -> 'budget' ->> 'scope' = 'user_id'"
    " AND payload -> 'data' -> 'budget' ->> 'scope_value' = %s))"
)


def user_deliveries_forget(*, tenant_id, user_id: str) -> dict[str, int]:
    """Delete the deliveries (and their attempts) whose payload is about the user: a forgotten user's records
    must not live on in the delivery log. Inside the forgetting transaction (sessions_app.services.forget)."""
    from platform_kit.db import cascade_delete

    return cascade_delete(WebhookDelivery, f"tenant_id = %s AND {_PAYLOAD_OF_USER}", [tenant_id, *[user_id] * 3])
