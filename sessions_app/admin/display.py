"""How the sessions admin shows its own vocabulary: role and status badges, the counters' columns, previews."""

from __future__ import annotations

from django.contrib import admin

from platform_kit.admin.display import badge, count_hint, counter_display, truncated
from sessions_app.models import Role
from sessions_app.models.ledger import ALL_TOKENS
from sessions_app.selectors.usage import all_tokens

ROLE_TONES = {
    Role.USER: "blue",
    Role.ASSISTANT: "green",
    Role.TOOL_RESULT: "purple",
    Role.ERROR: "red",
    Role.SYSTEM: "grey",
}
STATUS_TONES = {"active": "green", "ended": "grey", "deleted": "red", "revoked": "red"}


def role_badge(role: str):
    return badge(role, ROLE_TONES.get(role, "grey"))


# Every counter, with the label of its column.
SESSION_COUNTERS = (
    ("requests", "requests"),
    ("conversations", "conversations"),
    ("messages", "messages"),
    ("message_user", "user"),
    ("message_assistant", "assistant"),
    ("message_toolresult", "tool results"),
    ("message_error", "errors"),
    ("message_system", "system"),
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
    ("cache_read_tokens", "cache read tokens"),
    ("cache_creation_tokens", "cache write tokens"),
    ("total_tokens", "tokens"),
)
MESSAGES_BY_ROLE = (
    ("message_user", "user"),
    ("message_assistant", "assistant"),
    ("message_toolresult", "tool results"),
    ("message_error", "errors"),
    ("message_system", "system"),
)
TOKENS_BY_KIND = (
    ("input_tokens", "input"),
    ("output_tokens", "output"),
    ("cache_read_tokens", "cache read"),
    ("cache_creation_tokens", "cache write"),
)


def tokens_hint(obj):
    """A list's tokens: every token, as the usage dashboard's total and ccusage count them (input + output + cache
    read + cache write; the stored `total_tokens` is input + output as reported, and cache reads are often 10-20x
    more), the kinds on hover. Sorted by `ALL_TOKENS`."""
    return count_hint(all_tokens(obj), *((label, getattr(obj, field)) for field, label in TOKENS_BY_KIND))


# `<counter>_display`: one counter in full, for every counter.
CounterDisplays = type(
    "CounterDisplays", (), {f"{field}_display": counter_display(field, label) for field, label in SESSION_COUNTERS}
)


class CounterColumns(CounterDisplays):
    """List columns for the counters shared by the session, conversation and usage admins.

    `<counter>_display` shows one counter in full (change pages); `messages_summary` and `tokens_summary` are
    the lists' compact columns, with the breakdown (by role, by kind of token) on hover.
    """

    @admin.display(description="messages", ordering="messages")
    def messages_summary(self, obj):
        parts = [(label, getattr(obj, field, None)) for field, label in MESSAGES_BY_ROLE]
        for field in ("conversations", "requests"):
            if hasattr(obj, field):
                parts.append((field, getattr(obj, field)))
        return count_hint(obj.messages, *parts)

    @admin.display(description="tokens", ordering=ALL_TOKENS.asc())
    def tokens_summary(self, obj):
        return tokens_hint(obj)


# How much of a message's text (or a turn's question's) a list reads: its hover shows that much.
PREVIEW_CHARS = 140


def preview(head: str | None, chars: int):
    """A list's excerpt of a long text (`head`: its first PREVIEW_CHARS + 1 characters) on one line, cut to
    `chars` characters with the excerpt on hover."""
    text = " ".join((head or "").split())
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS] + "…"
    return truncated(text, chars)
