"""Agent-log importers: one module per tool (claude_code, qwen_code, openclaw) on a shared base.

`base` holds the normalised output and the parser base class, `jsonl` reads log lines from an offset,
`detect` tells which tool wrote a file, `dispatch.parse_file` runs that tool's parser, and `counting`
says what the ingest will count.

`parse_file` reads a log from a byte offset into `ParsedMessage`s shaped like the messages API body; the
import command hands them to `services.messages.messages_append`. Parsing never touches the database.
See docs/accounting.md for how lines become messages, requests and conversations.
"""

from sessions_app.importers.base import TOOLS, ParsedMessage, ParsedSession, ParseIssue, ParseResult
from sessions_app.importers.counting import count_usage
from sessions_app.importers.detect import Detection, describe_layout, detect_tool, explain_detection
from sessions_app.importers.dispatch import parse_file

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
