"""From an event to deliveries, and each delivery's attempts: signed, retried with backoff, safe to run twice.

- `events_publish` writes one delivery per active webhook of the tenant that subscribes to the event (the
  same `event_id` in each) and queues them when that commits.
- `delivery_attempt` claims a due delivery with a conditional UPDATE (Healthchecks.io's way): the claim moves
  `next_attempt_at` a lease ahead, so a second task for the same delivery finds nothing to do, and one whose
  worker died is due again once the lease ends. It POSTs, logs the attempt, and decides: 2xx succeeded; a
  timeout, a connection error, 408, 429 or 5xx retried after a backoff (ACE_WEBHOOKS_RETRY_BASE_SECONDS ×
  3^(n-1), plus up to 20 % jitter) until ACE_WEBHOOKS_MAX_ATTEMPTS; anything else failed at once.
- `deliveries_due` is what the sweep (every minute) queues again: due and not taken for longer than a grace.
- `delivery_redeliver` and `webhook_ping` are what the API and the admin call.
"""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass
from datetime import timedelta

import orjson
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory_app.services import api_timestamp
from platform_kit.redaction import redact_url
from platform_kit.tasks import enqueue_or_leave_to_sweep
from sessions_app.models import Tenant
from webhooks_app.events import PING
from webhooks_app.models import DeliveryStatus, Webhook, WebhookAttempt, WebhookChange, WebhookDelivery
from webhooks_app.services import transport
from webhooks_app.services.signing import signature
from webhooks_app.services.webhooks import WebhookDeleted, audit_log

logger = logging.getLogger(__name__)

DELIVER_TASK = "webhooks_app.tasks.deliver"
SWEEP = "deliveries_sweep"
SWEEP_GRACE = timedelta(seconds=60)  # a due delivery not claimed this long after it was due was lost
LEASE_MARGIN = timedelta(seconds=60)  # an attempt's lease: the POST's timeout and this
RETRY_IN_TASK_UP_TO = 2.0  # seconds: a retry due this soon is made by the same task, after a sleep
SCHEDULE_DIRECTLY_UP_TO = 600  # retries due sooner are queued with a countdown; later ones by the sweep
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


def _enqueue(delivery_id, *, countdown: float | None = None) -> None:
    enqueue_or_leave_to_sweep(
        DELIVER_TASK, str(delivery_id), what=f"webhook delivery {delivery_id}", sweep=SWEEP, countdown=countdown
    )


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
    ids = [delivery.pk for delivery in deliveries]
    transaction.on_commit(lambda: [_enqueue(pk) for pk in ids])
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
    outcome: str  # succeeded | retry | failed | skipped (not due, taken by another task, or finished)
    retry_in: float | None = None  # seconds, when outcome is retry


def retry_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1, 2, …): base × 3^(attempt-1), + up to 20 %."""
    delay = settings.ACE_WEBHOOKS_RETRY_BASE_SECONDS * 3 ** (attempt - 1)
    return delay * (1 + random.uniform(0, 0.2))  # noqa: S311 - jitter, not a secret


def _claim(delivery_id) -> int | None:
    """Take a due pending delivery for one attempt; its number, or None when it is not ours to try."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.ACE_WEBHOOKS_TIMEOUT_SECONDS) + LEASE_MARGIN
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(attempts=F("attempts") + 1, next_attempt_at=lease)
    if not claimed:
        return None
    return WebhookDelivery.objects.filter(pk=delivery_id).values_list("attempts", flat=True).get()


def body_bytes(payload: dict) -> bytes:
    return orjson.dumps(payload)


def delivery_attempt(delivery_id) -> AttemptResult:
    """One attempt of a delivery, if it is due and nobody else is trying it."""
    number = _claim(delivery_id)
    if number is None:
        return AttemptResult("skipped")
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    webhook = delivery.webhook
    ours = WebhookDelivery.objects.filter(pk=delivery_id, status=DeliveryStatus.PENDING, attempts=number)
    if webhook.deleted_at is not None or (not webhook.active and delivery.event != PING):
        why = "deleted" if webhook.deleted_at is not None else "deactivated"
        ours.update(
            status=DeliveryStatus.FAILED,
            attempts=number - 1,
            next_attempt_at=None,
            error=f"Not sent: the webhook was {why}.",
        )
        return AttemptResult("failed")
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
        }
        if outcome == "succeeded":
            changes.update(status=DeliveryStatus.SUCCEEDED, delivered_at=timezone.now(), next_attempt_at=None)
        elif outcome == "failed":
            changes.update(status=DeliveryStatus.FAILED, next_attempt_at=None)
        else:
            changes.update(next_attempt_at=timezone.now() + timedelta(seconds=retry_in))
        if not ours.update(**changes):
            logger.info("webhook delivery %s: attempt %s was taken for lost meanwhile", delivery_id, number)
    return AttemptResult(outcome, retry_in)


def _judge(answer: transport.Answer, number: int) -> tuple[str, float | None, str]:
    """(outcome, seconds to the retry, the error to show) for an attempt's answer."""
    if answer.status is not None and 200 <= answer.status < 300:
        return "succeeded", None, ""
    if answer.status is None:
        error = answer.error
        retried = not error.startswith("Refused")
    else:
        error = f"HTTP {answer.status}"
        if 300 <= answer.status < 400:
            error += " (redirects are not followed: give the final URL)"
        retried = answer.status in RETRIED_STATUSES or answer.status >= 500
    if not retried:
        return "failed", None, error
    if number >= settings.ACE_WEBHOOKS_MAX_ATTEMPTS:
        return "failed", None, f"{error}; gave up after {number} attempts"
    return "retry", retry_delay(number), error


def deliveries_due(*, limit: int = 1000) -> list:
    """Pending deliveries due for longer than the grace and not taken: lost by a broker outage, a dead worker
    (its lease ended), or a retry far in the future that was left to the sweep."""
    due_before = timezone.now() - SWEEP_GRACE
    return list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=due_before)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


def delivery_enqueue(delivery_id, *, countdown: float | None = None) -> None:
    _enqueue(delivery_id, countdown=countdown)


# Where a delivery's payload names its user: a record's, a strategy run's, a budget's scoped to one user.
_PAYLOAD_OF_USER = (
    "(payload -> 'data' -> 'record' ->> 'user_id' = %s"
    " OR payload -> 'data' -> 'run' ->> 'user_id' = %s"
    " OR (payload -> 'data' -> 'budget' ->> 'scope' = 'user' AND payload -> 'data' -> 'budget' ->> 'scope_value' = %s))"
)


def user_deliveries_forget(*, tenant_id, user_id: str) -> dict[str, int]:
    """Delete the deliveries (and their attempts) whose payload is about the user: a forgotten user's records
    must not live on in the delivery log. Inside the forgetting transaction (sessions_app.services.forget)."""
    from platform_kit.db import cascade_delete

    return cascade_delete(WebhookDelivery, f"tenant_id = %s AND {_PAYLOAD_OF_USER}", [tenant_id, *[user_id] * 3])
