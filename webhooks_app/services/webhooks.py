"""Creating, changing and deleting webhooks. Every change is validated here (the API and the admin share the
rules) and kept in the webhook's audit log (WebhookChange) in the same transaction."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from platform_kit import outbound
from platform_kit.redaction import REDACTED, redact_url
from sessions_app.models import Tenant
from webhooks_app.events import Event
from webhooks_app.models import MAX_DESCRIPTION_LENGTH, MAX_URL_LENGTH, Webhook, WebhookChange
from webhooks_app.services.signing import secret_generate

MAX_WEBHOOKS_PER_TENANT = 100
SECRET_MIN_LENGTH, SECRET_MAX_LENGTH = 24, 256
EDITABLE = ("url", "events", "description", "active", "secret")


class WebhookDeleted(Exception):
    """The webhook was deleted: it is kept for audit and takes no more changes."""


def url_problems(url) -> list[str]:
    """What is wrong with a webhook URL (empty when nothing is)."""
    if not isinstance(url, str) or not url.strip():
        return ["Give the http:// or https:// URL that receives the events."]
    if len(url) > MAX_URL_LENGTH:
        return [f"At most {MAX_URL_LENGTH} characters (it has {len(url)})."]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        return [f"Not a URL: {error}."]
    if parts.scheme not in ("http", "https"):
        return [f"Use an http:// or https:// URL (not {parts.scheme + '://' if parts.scheme else 'a relative one'})."]
    if not parts.hostname:
        return ["The URL names no host."]
    if parts.username is not None or parts.password is not None:
        return [
            "Remove the user name and password from the URL: they would be stored and shown in clear. Check the "
            "X-ACE-Signature header instead (docs/webhooks.md)."
        ]
    if any(c.isspace() for c in url) or any(ord(c) < 32 for c in url):
        return ["The URL holds spaces or control characters: percent-encode them."]
    if port == 0:
        return ["Port 0 is not a port."]
    refusal = outbound.url_refusal(url)
    if refusal:
        return [refusal]
    return []


def _validate(values: dict) -> dict:
    """The values, cleaned (events deduplicated, in the order given); a ValidationError names every problem."""
    errors: dict[str, list[str]] = {}
    cleaned = dict(values)
    if "url" in values:
        problems = url_problems(values["url"])
        if problems:
            errors["url"] = problems
        else:
            cleaned["url"] = values["url"].strip()
    if "events" in values:
        events = values["events"]
        if not isinstance(events, list | tuple) or not events:
            errors["events"] = [f"A non-empty list of event names, from: {', '.join(Event.values)}."]
        else:
            unknown = [e for e in events if e not in Event.values]
            if unknown:
                errors["events"] = [
                    f"Unknown event{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(repr(e) for e in unknown)}; use some of: {', '.join(Event.values)}."
                ]
            else:
                cleaned["events"] = list(dict.fromkeys(events))
    if "description" in values:
        description = values["description"]
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_LENGTH:
            errors["description"] = [f"A text of at most {MAX_DESCRIPTION_LENGTH} characters."]
    if "active" in values and not isinstance(values["active"], bool):
        errors["active"] = ["true or false."]
    if values.get("secret") is not None:
        secret = values["secret"]
        if (
            not isinstance(secret, str)
            or not SECRET_MIN_LENGTH <= len(secret) <= SECRET_MAX_LENGTH
            or not all(33 <= ord(c) <= 126 for c in secret)
        ):
            errors["secret"] = [
                f"From {SECRET_MIN_LENGTH} to {SECRET_MAX_LENGTH} printable ASCII characters without spaces; "
                "leave it out to have one generated."
            ]
    if errors:
        raise ValidationError(errors)
    return cleaned


def _refuse_hidden_secret(values: dict) -> None:
    """A URL holding the [REDACTED] mark of a secret we hide would be called with the mark instead of the secret."""
    if REDACTED in (values.get("url") or ""):
        raise ValidationError(
            {
                "url": [
                    f"The URL holds {REDACTED}, the mark of a secret the API does not show: send the URL with its "
                    "secret written out, or the URL exactly as shown to keep the one stored."
                ]
            }
        )


def audit_log(webhook: Webhook, *, action: str, actor: str, changes: dict | None = None) -> WebhookChange:
    return WebhookChange.objects.create(
        webhook=webhook, tenant_id=webhook.tenant_id, action=action, actor=actor[:255], changes=changes or {}
    )


def _shown(field: str, value):
    """A value as the audit log keeps it: the secret is never written down, nor the URL's own secrets."""
    if field == "secret":
        return "(set)"
    return redact_url(value) if field == "url" else value


def webhook_create(
    *,
    tenant: Tenant,
    url: str,
    events: list[str],
    description: str = "",
    active: bool = True,
    secret: str | None = None,
    actor: str,
) -> Webhook:
    """A new webhook; without `secret`, one is generated (`webhook.secret`: show it once, to its creator)."""
    values = _validate({"url": url, "events": events, "description": description, "active": active, "secret": secret})
    _refuse_hidden_secret(values)
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=tenant.pk).exists()  # one count at a time per tenant
        if Webhook.objects.filter(tenant=tenant, deleted_at__isnull=True).count() >= MAX_WEBHOOKS_PER_TENANT:
            raise ValidationError(
                {"url": [f"A tenant has at most {MAX_WEBHOOKS_PER_TENANT} webhooks: delete one you no longer use."]}
            )
        webhook = Webhook.objects.create(
            tenant=tenant,
            url=values["url"],
            events=values["events"],
            description=values["description"],
            active=values["active"],
            secret=values["secret"] or secret_generate(),
        )
        audit_log(
            webhook,
            action=WebhookChange.Action.CREATE,
            actor=actor,
            changes={field: [None, _shown(field, getattr(webhook, field))] for field in EDITABLE},
        )
    return webhook


def _open_webhook(*, tenant: Tenant, webhook_id) -> Webhook:
    webhook = Webhook.objects.select_for_update().get(pk=webhook_id, tenant=tenant)
    if webhook.deleted_at is not None:
        raise WebhookDeleted(f"The webhook was deleted at {webhook.deleted_at:%Y-%m-%dT%H:%M:%SZ}.")
    return webhook


def webhook_update(*, tenant: Tenant, webhook_id, actor: str, **changes) -> Webhook:
    """Change a webhook's url, events, description, active flag or secret; a change that changes nothing
    is not logged."""
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValidationError({name: [f"Not editable; one of: {', '.join(EDITABLE)}."] for name in sorted(unknown)})
    values = _validate(changes)
    with transaction.atomic():
        webhook = _open_webhook(tenant=tenant, webhook_id=webhook_id)
        if values.get("url") is not None and values["url"] == redact_url(webhook.url):
            values["url"] = webhook.url  # the URL as it was shown, sent back: unchanged, its secrets kept
        _refuse_hidden_secret(values)
        diff = {}
        for field, value in values.items():
            if field == "secret" and value is None:
                continue
            if getattr(webhook, field) != value:
                diff[field] = [_shown(field, getattr(webhook, field)), _shown(field, value)]
                setattr(webhook, field, value)
        if diff:
            webhook.updated_at = timezone.now()
            webhook.save()
            audit_log(webhook, action=WebhookChange.Action.UPDATE, actor=actor, changes=diff)
    return webhook


def webhook_delete(*, tenant: Tenant, webhook_id, actor: str) -> Webhook:
    """Stop the webhook for good: nothing more is sent to it (pending retries included); it, its deliveries
    and its audit log stay for audit (the admin shows them)."""
    with transaction.atomic():
        webhook = _open_webhook(tenant=tenant, webhook_id=webhook_id)
        was_active = webhook.active
        webhook.deleted_at = webhook.updated_at = timezone.now()
        webhook.active = False
        webhook.save()
        audit_log(webhook, action=WebhookChange.Action.DELETE, actor=actor, changes={"active": [was_active, False]})
    return webhook
