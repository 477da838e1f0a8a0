"""Gemini CLI: `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl` (`.json` documents before v0.39),
sub-agents in `chats/<parent session id>/<agent id>.jsonl`. `parser` reads both forms; `samples/` holds
real-shaped ones. Qwen Code is a fork of it (`qwen_code`): the helpers below tell their look-alike records
apart."""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers.gemini_cli.parser import GeminiCliJsonlParser, GeminiCliParser
from ingest_app.importers.tool import Layout, PathName, Tool

NAME = "gemini-cli"
_RECORD_TYPES = {"user", "gemini", "info", "error", "warning"}


def layout(path: PathName) -> Layout | None:
    if ".gemini" not in path.parts or "chats" not in path.below(".gemini"):
        return None
    base = path.below(".gemini")
    project = path.after("tmp", ".gemini") if "tmp" in base else ""
    below = path.parts[path.parts.index("chats", path.parts.index(".gemini")) + 1 :]
    if len(below) == 2:  # chats/<parent session id>/<agent id>.jsonl
        parent = below[0]
        return Layout(NAME, f"{parent}/{path.stem}", True, parent, path.stem, project)
    if len(below) == 1:
        return Layout(NAME, path.stem, project_dir=project)
    return None


def is_session_document(data: dict) -> bool:
    """A whole session document (`sessionId`, `messages`): Gemini CLI's JSON form, and older Qwen Code's."""
    return isinstance(data.get("messages"), list) and "sessionId" in data


def record_types(document: dict) -> set[str]:
    return {
        record["type"]
        for record in document["messages"]
        if isinstance(record, dict) and isinstance(record.get("type"), str)
    }


def marks(data: dict) -> bool:
    """Fields Qwen Code never writes: Gemini CLI's JSONL `$set` and `$rewindTo` lines, and its session line
    (`projectHash` and `sessionId` without a `type`, not a whole document)."""
    if "$set" in data or "$rewindTo" in data:
        return True
    return not is_session_document(data) and "projectHash" in data and "sessionId" in data and "type" not in data


def records(data: dict) -> bool:
    """Its marks, a session document whose model records say `gemini`, or JSONL MessageRecords (`id`, `type`,
    `content`, none of the ChatRecord fields)."""
    if marks(data):
        return True
    if is_session_document(data):
        return "gemini" in record_types(data)
    kind = data.get("type")
    return kind in _RECORD_TYPES and "id" in data and "content" in data and not ({"uuid", "message"} & set(data))


def unrecognised(objects: list[dict]) -> str | None:
    if any(is_session_document(data) for data in objects):
        return (
            "a session document (sessionId, projectHash, messages) without a model response: Gemini CLI and "
            "older Qwen Code write the same shape; keep it under ~/.gemini/tmp/<project>/chats or "
            "~/.qwen/tmp/<hash>/chats, or name the tool"
        )
    return None


TOOL = Tool(
    name=NAME,
    label="Gemini CLI",
    member="GEMINI_CLI",
    parser=GeminiCliJsonlParser,
    document_parser=GeminiCliParser,
    document_folders=((".gemini", "tmp", "chats"),),
    homes=(".gemini",),
    folders=("~/.gemini/tmp",),
    where="~/.gemini/tmp (chats/session-*.json and .jsonl)",
    layout=layout,
    records=records,
    marks=marks,
    unrecognised=unrecognised,
    samples=Path(__file__).resolve().parent / "samples",
)
