"""Sending a budget crossing's alerts: email (Django's mail backend), a Feishu bot and a DingTalk robot. Each
channel's outcome is kept on the crossing (`alerts`), so sending again (a retried task, the sweep) sends only
what has not gone out yet. Webhooks are not sent here: they listen to `budget_crossed` (docs/budgets.md)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import logging
import time
import urllib.error
import urllib.request
from datetime import timedelta
from urllib.parse import quote_plus, urlsplit

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from platform_kit import outbound
from sessions_app.models import BudgetCrossing

logger = logging.getLogger(__name__)
SENT = "sent"
BOT_TIMEOUT_SECONDS = 10
MAX_ANSWER_READ = 64 * 1024  # a bot's answer is a small JSON object
NO_ANSWER = (
    "failed: no answer (the bot's host could not be reached, refused or reset the connection, or TLS failed); "
    "tried again later"
)
# Alerts not sent (a broker outage, a channel down) are tried again by the sweep for this long.
RETRY_FOR = timedelta(days=1)


# A crossing found when the budget was saved, not by a write of usage (services.budgets).
ALREADY_OVER = {
    "budget_created": "The period's usage was already over this threshold when the budget was created.",
    "budget_changed": "The period's usage was already over this threshold when the budget was changed.",
}


def alert_text(payload: dict) -> str:
    """The alert's words: which budget, which threshold, what was used of what, and the projection."""
    budget = payload["budget"]
    unit = "tokens" if budget["unit"] == "tokens" else "USD"
    scope = (
        "tenant" if budget["scope"] == "tenant" else f"{budget['scope']} {budget['scope_value'] or budget['api_key']}"
    )
    period = f"rolling {budget['window_hours']} h" if budget["period"] == "rolling" else budget["period"]
    lines = [
        f"Open ACE budget “{budget['name']}” ({scope}, {period}) crossed {payload['threshold']}%:",
        f"{payload['used']} of {payload['limit']} {unit} used ({payload['percent']}%) "
        f"in the period {payload['period_start']} – {payload['period_end']}.",
    ]
    if payload.get("cause") in ALREADY_OVER:
        lines.append(ALREADY_OVER[payload["cause"]])
    if payload.get("projected_exhaustion_at"):
        lines.append(f"At this pace it runs out on {payload['projected_exhaustion_at']}.")
    return "\n".join(lines)


def feishu_body(text: str, secret: str, *, now: float | None = None) -> dict:
    """A Feishu custom bot's text message; signed when the bot has a secret: base64 of HMAC-SHA256 with the key
    "{timestamp}\\n{secret}" over an empty message, timestamp in seconds."""
    body: dict = {"msg_type": "text", "content": {"text": text}}
    if secret:
        timestamp = str(int(now if now is not None else time.time()))
        digest = hmac.new(f"{timestamp}\n{secret}".encode(), b"", hashlib.sha256).digest()
        body.update(timestamp=timestamp, sign=base64.b64encode(digest).decode())
    return body


def dingtalk_url(url: str, secret: str, *, now: float | None = None) -> str:
    """A DingTalk robot's webhook, signed when the robot has a secret: `&timestamp=<ms>&sign=<url-encoded base64
    of HMAC-SHA256 with the secret over "{timestamp}\\n{secret}">`."""
    if not secret:
        return url
    timestamp = str(int((now if now is not None else time.time()) * 1000))
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    return f"{url}&timestamp={timestamp}&sign={quote_plus(base64.b64encode(digest).decode())}"


def _post(url: str, body: dict) -> str:
    """POST the message through the outbound policy (no redirect followed); the bots answer 200 with an error code
    in the body when they refuse it. What is kept says what the tenant needs and no more: a failure before any
    answer is one text, so the alerts cannot tell an open port from a closed one (the detail is logged)."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    host = urlsplit(url).hostname or ""
    try:
        with outbound.urlopen(request, timeout=BOT_TIMEOUT_SECONDS) as response:
            raw = response.read(MAX_ANSWER_READ)
    except urllib.error.HTTPError as error:
        return f"failed: HTTP {error.code}" + (" (redirects are not followed)" if 300 <= error.code < 400 else "")
    except (OSError, http.client.HTTPException, ValueError) as error:
        refused = outbound.refusal_of(error)
        why = outbound.host_refusal(host) if refused else None
        logger.warning("budget alert POST to %s got no answer: %s", host, getattr(error, "reason", error))
        if why:
            return f"failed: refused: {why}."[:300]
        return NO_ANSWER
    try:
        answer = json.loads(raw)
    except ValueError:
        return SENT
    if not isinstance(answer, dict):
        return SENT
    code = answer.get("code", answer.get("errcode", answer.get("StatusCode", 0)))
    return SENT if code in (0, None) else f"failed: {answer.get('msg') or answer.get('errmsg') or code}"[:300]


def _send(channel: str, crossing: BudgetCrossing, text: str) -> str:
    budget = crossing.budget
    try:
        if channel == "email":
            subject = f"[Open ACE] Budget {budget.name}: {crossing.threshold}% used"
            send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, budget.emails)
            return SENT
        if channel == "feishu":
            return _post(budget.feishu_url, feishu_body(text, budget.feishu_secret))
        return _post(
            dingtalk_url(budget.dingtalk_url, budget.dingtalk_secret), {"msgtype": "text", "text": {"content": text}}
        )
    except Exception as error:  # noqa: BLE001 - a channel down is recorded, and tried again by the sweep
        logger.warning("budget alert by %s for crossing %s failed", channel, crossing.pk, exc_info=True)
        return f"failed: {type(error).__name__}: {error}"[:300]


def budget_alert_send(*, crossing_id) -> dict:
    """Send the crossing's alerts by every channel of its budget not yet sent; returns each channel's outcome."""
    crossing = BudgetCrossing.objects.select_related("budget").filter(pk=crossing_id).first()
    if crossing is None:
        return {}
    budget = crossing.budget
    channels = [
        name
        for name, configured in (
            ("email", budget.emails),
            ("feishu", budget.feishu_url),
            ("dingtalk", budget.dingtalk_url),
        )
        if configured and crossing.alerts.get(name) != SENT
    ]
    text = alert_text(crossing.payload)
    outcomes = {channel: _send(channel, crossing, text) for channel in channels}
    if outcomes:
        with transaction.atomic():
            locked = BudgetCrossing.objects.select_for_update().get(pk=crossing.pk)
            locked.alerts = {**locked.alerts, **outcomes}
            locked.save(update_fields=["alerts"])
    return outcomes


def budget_alerts_pending(*, now=None) -> list:
    """The recent crossings with a channel not yet sent (for the sweep)."""
    now = now or timezone.now()
    recent = BudgetCrossing.objects.filter(crossed_at__gte=now - RETRY_FOR).select_related("budget")
    pending = []
    for crossing in recent:
        budget = crossing.budget
        wanted = [
            name
            for name, on in (("email", budget.emails), ("feishu", budget.feishu_url), ("dingtalk", budget.dingtalk_url))
            if on
        ]
        if any(crossing.alerts.get(name) != SENT for name in wanted):
            pending.append(crossing.pk)
    return pending
