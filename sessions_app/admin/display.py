"""How the sessions admin shows its own vocabulary: role and status badges, the counters' columns, previews."""

from __future__ import annotations

from platform_kit.admin.display import badge, counter_display
from sessions_app.models import Role

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
# `<counter>_display` columns for every counter, shared by the session, conversation and usage admins.
CounterColumns = type(
    "CounterColumns", (), {f"{field}_display": counter_display(field, label) for field, label in SESSION_COUNTERS}
)

# How much of a message's text (or a turn's question's) a list shows.
PREVIEW_CHARS = 140
