"""Agent-log importers: one module per tool (claude_code, qwen_code, openclaw) and one shared core.

`parse_file` reads a log from a byte offset into `ParsedMessage`s shaped like the messages API body; the
import command hands them to `services.messages.messages_append`. Parsing never touches the database.
See docs/accounting.md for how lines become messages, requests and conversations.
"""

from sessions_app.importers.core import (
    TOOLS,
    ParsedMessage,
    ParsedSession,
    ParseIssue,
    ParseResult,
    count_usage,
    parse_file,
)
from sessions_app.importers.detect import Detection, describe_layout, detect_tool, explain_detection

__all__ = [
    "TOOLS",
    "Detection",
    "ParseIssue",
    "ParseResult",
    "ParsedMessage",
    "ParsedSession",
    "count_usage",
    "describe_layout",
    "detect_tool",
    "explain_detection",
    "parse_file",
]
