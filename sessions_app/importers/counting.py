"""What the message ingest will count for a list of parsed messages, without a database."""

from __future__ import annotations

from collections.abc import Iterable

from sessions_app.importers.base import ParsedMessage
from sessions_app.schema import TOKEN_FIELDS


def count_usage(messages: Iterable[ParsedMessage | dict]) -> dict[str, int]:
    """The counters the message ingest (services/messages.messages_append) derives from these messages,
    for a fresh session: requests, conversations, messages by role and tokens by kind.

    It mirrors the ingest's rules so an importer can print a summary and tests can assert totals: a
    message with a `request_id` or an `auth_type` is a request, messages sharing a `request_id` count
    once and their request keeps the largest value of each token kind; a token field left empty on a
    message without a request adds nothing; `total_tokens` defaults to input + output."""
    counters = {
        "requests": 0,
        "conversations": 0,
        "messages": 0,
        "message_user": 0,
        "message_assistant": 0,
        "message_toolresult": 0,
        "message_error": 0,
        "message_system": 0,
        **{name: 0 for name in TOKEN_FIELDS},
    }
    role_counter = {
        "user": "message_user",
        "assistant": "message_assistant",
        "toolResult": "message_toolresult",
        "error": "message_error",
        "system": "message_system",
    }
    requests: dict[str, dict[str, int]] = {}
    conversations: set[str] = set()
    seen_external: set[str] = set()
    for message in messages:
        item = message.to_ingest() if isinstance(message, ParsedMessage) else message
        external_id = item.get("external_id")
        if external_id:
            if external_id in seen_external:
                continue
            seen_external.add(external_id)
        counters["messages"] += 1
        counters[role_counter[item["role"]]] += 1
        ref = item.get("conversation")
        if ref:
            if ref not in conversations:
                conversations.add(ref)
                counters["conversations"] += 1
        elif item["role"] == "user":
            counters["conversations"] += 1
        tokens = {name: item.get(name) for name in TOKEN_FIELDS}
        if tokens["total_tokens"] is None and (
            tokens["input_tokens"] is not None or tokens["output_tokens"] is not None
        ):
            tokens["total_tokens"] = (tokens["input_tokens"] or 0) + (tokens["output_tokens"] or 0)
        request_id = item.get("request_id")
        if request_id or item.get("auth_type"):
            if not request_id:
                request_id = f"\0{len(requests)}"  # a request of its own
            best = requests.get(request_id)
            if best is None:
                counters["requests"] += 1
                best = requests[request_id] = {name: 0 for name in TOKEN_FIELDS}
            for name in TOKEN_FIELDS:
                grown = max(best[name], tokens[name] or 0)
                counters[name] += grown - best[name]
                best[name] = grown
        else:
            for name in TOKEN_FIELDS:
                counters[name] += tokens[name] or 0
    return counters
