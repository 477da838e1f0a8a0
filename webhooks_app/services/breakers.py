"""The circuit breaker of each webhook: a receiver that keeps failing stops taking delivery turns.

After ACE_WEBHOOKS_BREAKER_FAILURES attempts in a row fail (a timeout, a connection error, 408, 429 or 5xx: the
receiver is down or overloaded, not refusing the payload) the breaker opens: the webhook's pending deliveries are
held, neither attempted nor given up, and their attempts are not used up. When the cool-down ends, one of them is
attempted (the half-open probe, services/claims.py): an answer that succeeds closes the breaker and the held
deliveries go; a failure opens it again for twice as long (ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS × 2^(n-1), at
most ACE_WEBHOOKS_BREAKER_COOLDOWN_MAX_SECONDS). Any success closes it; so does a reset from the API or the admin.
Opening, closing and resets are in the webhook's audit log.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory_app.services import api_timestamp
from sessions_app.models import Tenant
from webhooks_app.models import Webhook, WebhookChange
from webhooks_app.services.claims import turns_enqueue
from webhooks_app.services.webhooks import WebhookDeleted, audit_log

BREAKER_ACTOR = "system:breaker"


def breaker_cooldown(trips: int) -> float:
    """Seconds the breaker stays open after its `trips`-th opening in a row (1, 2, …)."""
    base = settings.ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS
    return min(base * 2 ** min(trips - 1, 40), settings.ACE_WEBHOOKS_BREAKER_COOLDOWN_MAX_SECONDS)


def _close(webhook: Webhook) -> None:
    webhook.consecutive_failures = webhook.breaker_trips = 0
    webhook.breaker_opened_at = webhook.breaker_probe_at = None
    webhook.save(update_fields=["consecutive_failures", "breaker_trips", "breaker_opened_at", "breaker_probe_at"])


def _summary(webhook: Webhook) -> dict:
    return {
        "state": webhook.breaker_state,
        "since": webhook.breaker_opened_at and api_timestamp(webhook.breaker_opened_at),
        "consecutive_failures": webhook.consecutive_failures,
    }


def breaker_record_success(*, webhook_id) -> bool:
    """An attempt succeeded: the failures in a row start again from 0 and an open breaker closes. True when it
    closed (its held deliveries are then sent: the caller queues turns for them)."""
    if Webhook.objects.filter(pk=webhook_id, consecutive_failures=0, breaker_opened_at__isnull=True).exists():
        return False
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().get(pk=webhook_id)
        was_open = webhook.breaker_opened_at is not None
        before = _summary(webhook)
        _close(webhook)
        if was_open:
            audit_log(
                webhook,
                action=WebhookChange.Action.BREAKER_CLOSE,
                actor=BREAKER_ACTOR,
                changes={key: [value, _summary(webhook)[key]] for key, value in before.items()},
            )
    return was_open


def breaker_record_failure(*, webhook_id, probe: bool) -> float | None:
    """An attempt failed as a receiver that is down fails. The seconds to the next probe when this opened the
    breaker (or opened it again: a failed probe), else None."""
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().get(pk=webhook_id)
        before = _summary(webhook)
        webhook.consecutive_failures += 1
        is_open = webhook.breaker_opened_at is not None
        opens = (probe and is_open) or (
            not is_open and webhook.consecutive_failures >= settings.ACE_WEBHOOKS_BREAKER_FAILURES
        )
        cooldown = None
        if opens:
            now = timezone.now()
            webhook.breaker_trips += 1
            cooldown = breaker_cooldown(webhook.breaker_trips)
            webhook.breaker_opened_at = webhook.breaker_opened_at or now
            webhook.breaker_probe_at = now + timedelta(seconds=cooldown)
        webhook.save(update_fields=["consecutive_failures", "breaker_trips", "breaker_opened_at", "breaker_probe_at"])
        if opens:
            after = _summary(webhook)
            changes = {key: [value, after[key]] for key, value in before.items() if value != after[key]}
            changes["cool_down_seconds"] = [None, cooldown]
            audit_log(webhook, action=WebhookChange.Action.BREAKER_OPEN, actor=BREAKER_ACTOR, changes=changes)
    return cooldown


def webhook_breaker_reset(*, tenant: Tenant, webhook_id, actor: str) -> Webhook:
    """Close the webhook's breaker now (the receiver is fixed): its held deliveries go at once."""
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().get(pk=webhook_id, tenant=tenant)
        if webhook.deleted_at is not None:
            raise WebhookDeleted("The webhook was deleted; it receives nothing more.")
        before = _summary(webhook)
        if before["state"] != "closed" or webhook.consecutive_failures:
            _close(webhook)
            audit_log(
                webhook,
                action=WebhookChange.Action.BREAKER_RESET,
                actor=actor,
                changes={key: [value, _summary(webhook)[key]] for key, value in before.items()},
            )
            transaction.on_commit(lambda: turns_enqueue(settings.ACE_WEBHOOKS_TENANT_CONCURRENCY))
    return webhook
