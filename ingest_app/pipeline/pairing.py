"""Counting once when a Claude Code session arrives both as OpenTelemetry events and as its log.

The two sides describe the same facts with different ids: the log names a call by the API message id
(`msg_…`, our `request_id`) and its request id (`req_…`, kept as `metadata.api_request_id`), the events by
a `prompt.id`, the call's `request_id` (newer versions only) and its usage. So a call is paired by:

1. the API request id, when both sides give it (equal: the same call; different: not);
2. else its fingerprint: the same model; the same input, cache-read and cache-creation tokens; output tokens
   equal, or the log's fewer (a response the log is still streaming); times within `WINDOW`.

A prompt is paired by its prompt id (the log's `promptId`, the event's `prompt.id`). A failed call (an `error`
message that is a request: docs/accounting.md "Failed calls") by the API request id when both give it, else its
HTTP status and times within `WINDOW`; only with the log's last failed attempt (its `isApiErrorMessage` line):
Claude Code sends the `api_error` event for that one alone, the attempts it retried before are the log's
`api_error` lines (`retry_attempt`) and are calls of their own. Pairs are one-to-one: an item takes the first
unpaired match, in time order.

- Events first: a log response that pairs with a stored event's message is written as that message's
  completion (`pair_import_items`: the item takes the message's `external_id` and `request_id`, so the
  import's amend path completes it in place, and keeps its own ids in `metadata`).
- Log first: an event that pairs with a stored log message adds nothing (its raw record keeps the pairing).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q

from ingest_app.importers.base import usd_of_nano
from sessions_app.models import Message

WINDOW = timedelta(minutes=10)  # an event is written when its call ends; the log, when its first line is
SOURCE = "otel"  # metadata.source of the messages written from events
CALL_TOKENS = ("input_tokens", "cache_read_tokens", "cache_creation_tokens")


def same_call(event: dict, logged: dict) -> bool:
    """Whether an event's call (`event`) and a log's response (`logged`) are the same API call. Both are
    dicts with the message fields (`model`, token fields, `created_at`) and `api_request_id` (or None)."""
    event_id, log_id = event.get("api_request_id"), logged.get("api_request_id")
    if event_id and log_id:
        return event_id == log_id
    if (event.get("model") or "") != (logged.get("model") or ""):
        return False
    if any((event.get(name) or 0) != (logged.get(name) or 0) for name in CALL_TOKENS):
        return False
    if (logged.get("output_tokens") or 0) > (event.get("output_tokens") or 0):
        return False
    first, second = event.get("created_at"), logged.get("created_at")
    return isinstance(first, datetime) and isinstance(second, datetime) and abs(first - second) <= WINDOW


def same_failure(event: dict, logged: dict) -> bool:
    """Whether an event's failed call (`event`) and a log's (`logged`) are the same call: the log's is its last
    failed attempt (no `retry_attempt`), and they have the same API request id when both give it, else the
    same HTTP status and times within `WINDOW`."""
    if logged.get("retry_attempt") is not None:
        return False
    event_id, log_id = event.get("api_request_id"), logged.get("api_request_id")
    if event_id and log_id:
        return event_id == log_id
    if event.get("status") != logged.get("status"):
        return False
    first, second = event.get("created_at"), logged.get("created_at")
    return isinstance(first, datetime) and isinstance(second, datetime) and abs(first - second) <= WINDOW


def message_facts(message: Message) -> dict:
    """What pairing compares of a stored message."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    return {
        "model": message.model,
        "input_tokens": message.input_tokens,
        "output_tokens": message.output_tokens,
        "cache_read_tokens": message.cache_read_tokens,
        "cache_creation_tokens": message.cache_creation_tokens,
        "created_at": message.created_at,
        "api_request_id": metadata.get("api_request_id"),
        "prompt_id": metadata.get("prompt_id"),
        "status": metadata.get("status"),
        "retry_attempt": metadata.get("retry_attempt"),
    }


def item_facts(item: dict) -> dict:
    """What pairing compares of a message item (an event's or a log's, not stored yet)."""
    metadata = item.get("metadata") or {}
    return {
        **item,
        "api_request_id": metadata.get("api_request_id"),
        "status": metadata.get("status"),
        "retry_attempt": metadata.get("retry_attempt"),
    }


def _is_log_response(item: dict) -> bool:
    metadata = item.get("metadata") or {}
    return item.get("role") == "assistant" and bool(item.get("request_id")) and metadata.get("source") != SOURCE


def _is_log_failure(item: dict) -> bool:
    metadata = item.get("metadata") or {}
    return item.get("role") == "error" and bool(item.get("request_id")) and metadata.get("source") != SOURCE


def _is_log_prompt(item: dict) -> bool:
    metadata = item.get("metadata") or {}
    return item.get("role") == "user" and bool(metadata.get("prompt_id")) and metadata.get("source") != SOURCE


def pair_import_items(appends) -> None:
    """Events first, log later: rewrite an import's items (`appends`: [(session, items)], the sessions locked)
    that pair with stored event messages so that they complete those messages in place. One query, for the
    sessions that have event messages only (`Session.metadata["otel"]`)."""
    sessions = {session.pk: items for session, items in appends if (session.metadata or {}).get(SOURCE)}
    if not sessions:
        return
    times = [
        item["created_at"]
        for items in sessions.values()
        for item in items
        if isinstance(item.get("created_at"), datetime)
        and (_is_log_response(item) or _is_log_prompt(item) or _is_log_failure(item))
    ]
    log_ids = [item["external_id"] for items in sessions.values() for item in items if item.get("external_id")]
    if not times and not log_ids:
        return
    unpaired = ~Q(metadata__has_key="log_external_id")
    if times:
        unpaired &= Q(created_at__gte=min(times) - WINDOW, created_at__lte=max(times) + WINDOW)
    else:
        unpaired &= Q(pk__in=[])
    stored = Message.objects.filter(
        session_id__in=sessions, metadata__source=SOURCE, role__in=("user", "assistant", "error")
    )
    stored = stored.filter(unpaired | Q(metadata__log_external_id__in=log_ids)).order_by("created_at", "seq")
    by_session: dict = {}
    for message in stored.only(
        "id", "session_id", "role", "external_id", "request_id", "model", "created_at", "metadata", "seq",
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
    ):  # fmt: skip
        by_session.setdefault(message.session_id, []).append(message)
    for session_id, items in sessions.items():
        messages = by_session.get(session_id)
        if messages:
            _pair_items(items, messages)


def _pair_items(items: list[dict], messages: list[Message]) -> None:
    completed = {m.metadata["log_external_id"]: m for m in messages if m.metadata.get("log_external_id")}
    free = [m for m in messages if not m.metadata.get("log_external_id")]
    for index, item in enumerate(items):
        external_id = item.get("external_id")
        message = completed.get(external_id) if external_id else None
        if message is None:
            if _is_log_prompt(item):
                prompt_id = item["metadata"]["prompt_id"]
                message = next((m for m in free if m.role == "user" and m.metadata.get("prompt_id") == prompt_id), None)
            elif _is_log_response(item):
                facts = item_facts(item)
                message = next((m for m in free if m.role == "assistant" and same_call(message_facts(m), facts)), None)
            elif _is_log_failure(item):
                facts = item_facts(item)
                message = next((m for m in free if m.role == "error" and same_failure(message_facts(m), facts)), None)
            if message is None:
                continue
            free.remove(message)
            if external_id:
                completed[external_id] = message
        items[index] = completion_of(message, item)


def completion_of(message: Message, item: dict) -> dict:
    """A log item rewritten as the completion of the event message it pairs with: the message's ids, the
    event's metadata with the log's over it, and the log's own ids kept."""
    metadata = {**message.metadata, **(item.get("metadata") or {})}
    metadata.update(
        source=SOURCE,
        completed_by="log",
        log_external_id=item.get("external_id") or "",
        log_request_id=item.get("request_id") or "",
    )
    for name in ("cost_usd", "duration_ms", "event"):  # what the event said stays under its own names
        if name in message.metadata:
            metadata[name] = message.metadata[name]
    completed = {**item, "external_id": message.external_id, "metadata": metadata}
    if message.reported_cost_nano_usd is not None:  # the event's cost, which the log line does not carry
        completed["reported_cost_usd"] = usd_of_nano(message.reported_cost_nano_usd)
    if message.request_id:
        completed["request_id"] = message.request_id
    else:
        completed.pop("request_id", None)
    return completed
