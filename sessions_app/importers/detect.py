"""Which agent wrote a log file: by where the file lives, then by the shape of its first lines.

Path layouts (the tools' own storage):
- Claude Code: `~/.claude/projects/<project>/<session>.jsonl`, sub-agents in
  `<project>/<session>/subagents/agent-<id>.jsonl` (older: `<project>/agent-<id>.jsonl`).
- Qwen Code: `~/.qwen/projects/<project>/chats/<session>.jsonl` (older `~/.qwen/tmp/<hash>/chats/`),
  sub-agents in `<project>/subagents/<session>/agent-<id>.jsonl`.
- OpenClaw: `~/.openclaw/agents/<agent>/sessions/<session>.jsonl` (older installs: `.clawdbot`, `.moltbot`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sessions_app.importers.base import LogParser
from sessions_app.importers.claude_code import ClaudeCodeParser
from sessions_app.importers.openclaw import OpenClawParser
from sessions_app.importers.qwen_code import QwenCodeParser

PARSERS: dict[str, type[LogParser]] = {
    "claude-code": ClaudeCodeParser,
    "qwen-code": QwenCodeParser,
    "openclaw": OpenClawParser,
}

OPENCLAW_HOMES = (".openclaw", ".clawdbot", ".moltbot")


@dataclass(frozen=True)
class Layout:
    """What a file's path says about it."""

    tool: str | None
    file_key: str
    is_subagent: bool = False
    parent_session_id: str = ""
    agent_id: str = ""
    project_dir: str = ""


@dataclass(frozen=True)
class Detection:
    tool: str | None
    reason: str


def describe_layout(path: str | Path) -> Layout:
    path = Path(path)
    parts = path.parts
    name = path.name
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else path.stem
    agent_id = stem[len("agent-") :] if stem.startswith("agent-") else ""

    def after(marker: str) -> str:
        index = parts.index(marker)
        return parts[index + 1] if index + 1 < len(parts) else ""

    if ".claude" in parts and "projects" in parts[parts.index(".claude") :]:
        project = after("projects")
        if "subagents" in parts:
            parent = parts[parts.index("subagents") - 1]
            return Layout("claude-code", f"{parent}/subagents/{stem}", True, parent, agent_id, project)
        if agent_id:
            return Layout("claude-code", stem, True, "", agent_id, project)
        return Layout("claude-code", stem, project_dir=project)
    if ".qwen" in parts:
        base = parts[parts.index(".qwen") :]
        project = after("projects") if "projects" in base else (after("tmp") if "tmp" in base else "")
        if "subagents" in base:
            parent = path.parent.name if path.parent.name != "subagents" else ""
            return Layout("qwen-code", f"subagents/{parent}/{stem}", True, parent, agent_id, project)
        if "chats" in base:
            return Layout("qwen-code", stem, project_dir=project)
    for home in OPENCLAW_HOMES:
        if home in parts and "sessions" in parts[parts.index(home) :]:
            agent = after("agents") if "agents" in parts else ""
            return Layout("openclaw", stem, project_dir=agent)
    return Layout(None, stem, bool(agent_id), "", agent_id)


def is_log_name(path: str | Path) -> bool:
    """Whether a directory walk should read this file: every `.jsonl` file (its lines decide the tool), and
    a `.json` file where a tool that writes whole-document logs keeps them (a `.json` file elsewhere is
    read only when named on its own)."""
    path = Path(path)
    name = path.name
    if name.endswith(".jsonl"):
        return True
    if name.endswith(".json"):
        parser_class = PARSERS.get(describe_layout(path).tool or "")
        return bool(parser_class and parser_class.document)
    return False


def head_objects(first_lines: Iterable[str | dict]) -> tuple[list[dict], int]:
    """The JSON objects among a file's first lines, and how many other non-blank lines there are."""
    objects, other = [], 0
    for line in first_lines:
        if isinstance(line, dict):
            objects.append(line)
            continue
        text = line.strip().lstrip("\ufeff")
        if not text:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            other += 1
            continue
        if isinstance(data, dict):
            objects.append(data)
        else:
            other += 1
    return objects, other


def _judge_layout(tool: str, objects: list[dict], other: int) -> Detection:
    """A file where `tool` keeps its logs, judged by its first lines too: a file there whose lines are not
    the tool's records (not JSON, or mostly not; or another tool's records) is refused as a file with the
    reason, rather than read into an error per line. Lines that are JSON of no shape known here are given
    to the tool's parser, which knows every record type (a file may open with records detection ignores)."""
    in_layout = f"the path is in the {tool} storage layout"
    shapes = Counter(_shape_of(data) for data in objects)
    if shapes[tool] or not (objects or other):
        return Detection(tool, in_layout)
    if not objects:
        return Detection(None, f"{in_layout}, but none of its first {other} non-blank lines is a JSON object")
    foreign = [(name, count) for name, count in shapes.most_common() if name and name != tool]
    if foreign:
        name, count = foreign[0]
        return Detection(
            None, f"{in_layout}, but {count} of its first {len(objects)} JSON lines have the shape of {name} records"
        )
    if other > len(objects):
        return Detection(
            None,
            f"{in_layout}, but {other} of its first {other + len(objects)} non-blank lines are not JSON objects "
            f"and none has the shape of a {tool} record",
        )
    return Detection(tool, in_layout)


def explain_detection(path: str | Path, first_lines: Iterable[str | dict]) -> Detection:
    """The tool that wrote the file and why; `tool` is None (with the reason) when it cannot be told, or when
    the path is in a tool's storage layout but the lines are not that tool's records (see `_judge_layout`)."""
    layout = describe_layout(path)
    if layout.tool and PARSERS[layout.tool].document:
        return Detection(layout.tool, f"the path is in the {layout.tool} storage layout")
    objects, other = head_objects(first_lines)
    if layout.tool:
        return _judge_layout(layout.tool, objects, other)
    if not objects:
        if other:
            return Detection(None, f"none of the first {other} non-blank lines is a JSON object")
        return Detection(None, "the file is empty")
    votes = Counter(tool for tool in map(_shape_of, objects) if tool)
    if not votes:
        types = sorted({str(data["type"]) for data in objects if "type" in data})[:6] or ["no `type` field"]
        return Detection(
            None,
            f"{len(objects)} JSON lines, but none has the shape of a Claude Code, Qwen Code or OpenClaw record "
            f"(types seen: {', '.join(types)})",
        )
    (tool, count), *rest = votes.most_common()
    if rest and rest[0][1] == count:
        return Detection(None, f"the lines look equally like {tool} and {rest[0][0]} records")
    return Detection(tool, f"{count} of the first {len(objects)} JSON lines have the shape of {tool} records")


def detect_tool(path: str | Path, first_lines: Iterable[str | dict]) -> str | None:
    return explain_detection(path, first_lines).tool


def _shape_of(data: dict) -> str | None:
    kind = data.get("type")
    message = data.get("message") if isinstance(data.get("message"), dict) else None
    # OpenClaw (pi-coding-agent transcripts): a `session` header, then entries with id/parentId.
    if kind == "session" and "id" in data and ("cwd" in data or "version" in data):
        return "openclaw"
    if kind in ("model_change", "thinking_level_change", "compaction", "custom_message", "session_info"):
        return "openclaw"
    if kind == "message" and message and message.get("role") in ("user", "assistant", "toolResult", "bashExecution"):
        return "openclaw"
    # Qwen Code ChatRecords: Gemini-style `parts`, `usageMetadata`, `tool_result` and system payloads.
    if message and isinstance(message.get("parts"), list):
        return "qwen-code"
    if kind in ("tool_result", "gemini") or "usageMetadata" in data or "systemPayload" in data:
        return "qwen-code"
    # Claude Code transcript entries: Anthropic `content`, userType / isSidechain / requestId.
    if kind in ("user", "assistant") and message and "content" in message:
        if any(key in data for key in ("userType", "isSidechain", "requestId", "parentUuid")):
            return "claude-code"
    if kind == "summary" and "leafUuid" in data:
        return "claude-code"
    if kind in ("file-history-snapshot", "queue-operation") or (kind == "system" and "isSidechain" in data):
        return "claude-code"
    return None
