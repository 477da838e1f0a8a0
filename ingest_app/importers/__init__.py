"""Agent-log importers: one package per tool (`importers/<tool>/`: its `TOOL` description, its parser, its sample
logs), listed by `registry.TOOLS`, on a shared base.

`tool` holds what a tool declares (`Tool`, `Store`), `base` the normalised output and the parser base class,
`jsonl` reads log lines from an offset, `detect` tells which tool wrote a file (asking the registry), and
`dispatch.parse_file` runs that tool's parser.

`parse_file` reads a log from a byte offset into `ParsedMessage`s shaped like the messages API body; the
import (`services.imports`) hands them to the message service, which counts them by the rules of
`sessions_app.accounting` (its `count_usage` says what a list of them will count). Parsing never touches the
database. See docs/accounting.md for how lines become messages, requests and conversations.
"""

from ingest_app.importers.base import ParsedMessage, ParsedSession, ParseIssue, ParseResult
from ingest_app.importers.detect import Detection, describe_layout, detect_tool, explain_detection
from ingest_app.importers.dispatch import parse_file

__all__ = [
    "Detection",
    "ParseIssue",
    "ParseResult",
    "ParsedMessage",
    "ParsedSession",
    "describe_layout",
    "detect_tool",
    "explain_detection",
    "parse_file",
]
