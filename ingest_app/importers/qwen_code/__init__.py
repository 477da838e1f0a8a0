"""Qwen Code: `~/.qwen/projects/<project>/chats/<session>.jsonl` (older `~/.qwen/tmp/<hash>/chats/`, and before
its JSONL ChatRecords, `session-*.json` documents there), sub-agents in
`<project>/subagents/<session>/agent-<id>.jsonl`. `parser` reads the ChatRecords, `parser_json` the older
documents; `samples/` holds real-shaped ones. A fork of Gemini CLI: their records look alike, and what only
this one writes is told by `marks`."""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers import gemini_cli
from ingest_app.importers.qwen_code.parser import QwenCodeParser
from ingest_app.importers.qwen_code.parser_json import QwenCodeJsonParser
from ingest_app.importers.tool import Layout, PathName, Tool

NAME = "qwen-code"


def layout(path: PathName) -> Layout | None:
    if ".qwen" not in path.parts:
        return None
    base = path.below(".qwen")
    if "projects" in base:
        project = path.after("projects", ".qwen")
    else:
        project = path.after("tmp", ".qwen") if "tmp" in base else ""
    if "subagents" in base:
        parent = path.path.parent.name if path.path.parent.name != "subagents" else ""
        return Layout(NAME, f"subagents/{parent}/{path.stem}", True, parent, path.agent_id, project)
    if "chats" in base:
        return Layout(NAME, path.stem, project_dir=project)
    return None


def marks(data: dict) -> bool:
    """Fields Gemini CLI never writes, on a line that bears none of Gemini CLI's marks: its ChatRecords (`uuid`
    + `parentUuid` with `message.parts`, `usageMetadata` or `systemPayload`) and its older documents (`qwen`
    model records)."""
    if "$set" in data or "$rewindTo" in data:
        return False
    if gemini_cli.is_session_document(data):
        return "qwen" in gemini_cli.record_types(data)
    if gemini_cli.marks(data):
        return False
    if "uuid" in data and "parentUuid" in data:
        return _gemini_style(data)
    return False


def _gemini_style(data: dict) -> bool:
    message = data.get("message") if isinstance(data.get("message"), dict) else {}
    return isinstance(message.get("parts"), list) or "usageMetadata" in data or "systemPayload" in data


def shape(data: dict) -> bool:
    """On a line that is none of Gemini CLI's records: Gemini-style `parts`, `usageMetadata`, `tool_result` and
    system payloads."""
    if gemini_cli.is_session_document(data) or gemini_cli.records(data):
        return False
    return _gemini_style(data) or data.get("type") == "tool_result"


TOOL = Tool(
    name=NAME,
    label="Qwen Code",
    member="QWEN_CODE",
    parser=QwenCodeParser,
    document_parser=QwenCodeJsonParser,
    document_folders=((".qwen", "tmp", "chats"),),
    homes=(".qwen",),
    folders=("~/.qwen/projects", "~/.qwen/tmp"),
    where="~/.qwen/projects (JSONL), ~/.qwen/tmp (older JSON)",
    layout=layout,
    records=marks,
    shape=shape,
    marks=marks,
    fork_of=gemini_cli.NAME,
    samples=Path(__file__).resolve().parent / "samples",
)
