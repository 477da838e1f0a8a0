"""Which agent wrote a log file: by where the file lives, then by the shape of its first lines.

Path layouts (the tools' own storage):
- Claude Code: `~/.claude/projects/<project>/<session>.jsonl`, sub-agents in
  `<project>/<session>/subagents/agent-<id>.jsonl` (older: `<project>/agent-<id>.jsonl`).
- Qwen Code: `~/.qwen/projects/<project>/chats/<session>.jsonl` (older `~/.qwen/tmp/<hash>/chats/`),
  sub-agents in `<project>/subagents/<session>/agent-<id>.jsonl`.
- OpenClaw: `~/.openclaw/agents/<agent>/sessions/<session>.jsonl` (older installs: `.clawdbot`, `.moltbot`),
  with the same session's archives `<session>.jsonl.reset.<ts>` / `.deleted.<ts>` and pre-compaction
  copies `<session>.checkpoint.<uuid>.jsonl` (`openclaw.transcript_name`): their file key is the session's.
- Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`, and `~/.codex/archived_sessions/`.
- Gemini CLI: `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl` (`.json` before v0.39), sub-agents in
  `chats/<parent session id>/<agent id>.jsonl`. Older Qwen Code: `~/.qwen/tmp/<hash>/chats/session-*.json`.
- OpenCode: no file per session; `~/.local/share/opencode/opencode.db` (or the legacy `storage/` folder) is
  read as one source per session, `<store>#<session>` (`<store>#<top session>/<session>` for a sub-agent's):
  see `opencode`.

A tool may write two forms (Gemini CLI: JSON documents, then JSONL; Qwen Code: JSON documents, then JSONL
ChatRecords): `PARSERS` holds each tool's line form, `DOCUMENT_PARSERS` the document form of the tools that
have one, and `parser_for` picks by the file's suffix (`.json` is a document).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ingest_app.importers.base import LogParser
from ingest_app.importers.claude_code import ClaudeCodeParser
from ingest_app.importers.codex import CodexParser, codex_shape
from ingest_app.importers.gemini_cli import GeminiCliJsonlParser, GeminiCliParser
from ingest_app.importers.openclaw import OpenClawParser, is_compressed_archive, transcript_name
from ingest_app.importers.opencode import OpenCodeParser, split_source
from ingest_app.importers.qwen_code import QwenCodeParser
from ingest_app.importers.qwen_code_json import QwenCodeJsonParser

PARSERS: dict[str, type[LogParser]] = {
    "claude-code": ClaudeCodeParser,
    "qwen-code": QwenCodeParser,
    "openclaw": OpenClawParser,
    "codex": CodexParser,
    "gemini-cli": GeminiCliJsonlParser,
    "opencode": OpenCodeParser,
}
DOCUMENT_PARSERS: dict[str, type[LogParser]] = {
    "gemini-cli": GeminiCliParser,
    "qwen-code": QwenCodeJsonParser,
}


def parser_for(tool: str, path: str | Path) -> type[LogParser]:
    """The parser of `tool` for this file: the tool's document form for a `.json` file, when it has one, else
    its line form."""
    if Path(path).name.endswith(".json") and tool in DOCUMENT_PARSERS:
        return DOCUMENT_PARSERS[tool]
    return PARSERS[tool]


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
    source = split_source(path)
    if source is not None:  # an OpenCode session: its path names it and the top session it belongs to
        return Layout(
            "opencode", source.session_id, bool(source.root), source.root, source.session_id if source.root else ""
        )
    path = Path(path)
    parts = path.parts
    name = path.name
    stem = _history_stem(name) or (name[: -len(".jsonl")] if name.endswith(".jsonl") else path.stem)
    agent_id = stem[len("agent-") :] if stem.startswith("agent-") else ""

    def after(marker: str, home: str = "") -> str:
        # The folder after `marker`, looked for below the tool's `home` when given (a path can hold another
        # `tmp` or `projects` above it).
        index = parts.index(marker, parts.index(home) if home else 0)
        return parts[index + 1] if index + 1 < len(parts) else ""

    if ".claude" in parts and "projects" in parts[parts.index(".claude") :]:
        project = after("projects", ".claude")
        if "subagents" in parts:
            parent = parts[parts.index("subagents") - 1]
            return Layout("claude-code", f"{parent}/subagents/{stem}", True, parent, agent_id, project)
        if agent_id:
            return Layout("claude-code", stem, True, "", agent_id, project)
        return Layout("claude-code", stem, project_dir=project)
    if ".qwen" in parts:
        base = parts[parts.index(".qwen") :]
        project = after("projects", ".qwen") if "projects" in base else (after("tmp", ".qwen") if "tmp" in base else "")
        if "subagents" in base:
            parent = path.parent.name if path.parent.name != "subagents" else ""
            return Layout("qwen-code", f"subagents/{parent}/{stem}", True, parent, agent_id, project)
        if "chats" in base:
            return Layout("qwen-code", stem, project_dir=project)
    if ".codex" in parts and {"sessions", "archived_sessions"} & set(parts[parts.index(".codex") :]):
        return Layout("codex", stem)
    if ".gemini" in parts and "chats" in parts[parts.index(".gemini") :]:
        base = parts[parts.index(".gemini") :]
        project = after("tmp", ".gemini") if "tmp" in base else ""
        below = parts[parts.index("chats", parts.index(".gemini")) + 1 :]
        if len(below) == 2:  # chats/<parent session id>/<agent id>.jsonl
            parent = below[0]
            return Layout("gemini-cli", f"{parent}/{stem}", True, parent, stem, project)
        if len(below) == 1:
            return Layout("gemini-cli", stem, project_dir=project)
    for home in OPENCLAW_HOMES:
        if home in parts and "sessions" in parts[parts.index(home) :]:
            agent = after("agents", home) if "agents" in parts[parts.index(home) :] else ""
            return Layout("openclaw", stem, project_dir=agent)
    return Layout(None, stem, bool(agent_id), "", agent_id)


def _history_stem(name: str) -> str:
    """The session's file stem when `name` is an OpenClaw archive or checkpoint of it (the same session's
    bytes under another name, zstd-compressed or not), else ""."""
    found = transcript_name(name.removesuffix(".zst"))
    return found.stem if found is not None and found.variant != "live" else ""


def is_log_name(path: str | Path) -> bool:
    """Whether a directory walk should read this file: every `.jsonl` file (its lines decide the tool) but
    OpenClaw's run traces, an OpenClaw archived transcript (`<session>.jsonl.reset.<ts>`, `.deleted.<ts>`;
    compressed ones too, so that they are refused with the reason), and a `.json` file where a tool that
    writes whole-document logs keeps them (a `.json` file elsewhere is read only when named on its own)."""
    path = Path(path)
    name = path.name
    if name.endswith(".jsonl"):
        # Next to OpenClaw's transcripts: its run traces (`.trajectory.jsonl`), which repeat their usage.
        return describe_layout(path).tool != "openclaw" or transcript_name(name) is not None
    if _history_stem(name) or is_compressed_archive(name):
        return True
    if name.endswith(".json"):
        return describe_layout(path).tool in DOCUMENT_PARSERS
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
    # The two forks' look-alike records are told apart by the fields only one writes (explain_detection), not here.
    siblings = FORKS if tool in FORKS else (tool,)
    foreign = [(name, count) for name, count in shapes.most_common() if name and name not in siblings]
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
    the path is in a tool's storage layout but the lines are not that tool's records (see `_judge_layout`).

    Gemini CLI and Qwen Code (its fork) write look-alike records; a file in one's storage layout whose lines
    have fields only the other writes is refused rather than read by the wrong parser."""
    layout = describe_layout(path)
    objects, other = head_objects(first_lines)
    if layout.tool in FORKS:
        marks = Counter(tool for tool in map(_only_written_by, objects) if tool)
        if marks and layout.tool not in marks:
            (tool, count), *_ = marks.most_common()
            return Detection(
                None,
                f"the path is in the {layout.tool} storage layout, but {count} of the first {len(objects)} JSON "
                f"lines have fields only {tool} writes",
            )
    if layout.tool and parser_for(layout.tool, path).document:
        return Detection(layout.tool, f"the path is in the {layout.tool} storage layout")
    if layout.tool:
        return _judge_layout(layout.tool, objects, other)
    if not objects:
        if other:
            return Detection(None, f"none of the first {other} non-blank lines is a JSON object")
        return Detection(None, "the file is empty")
    votes = Counter(tool for tool in map(_shape_of, objects) if tool)
    if not votes and any(_is_session_document(data) for data in objects):
        return Detection(
            None,
            "a session document (sessionId, projectHash, messages) without a model response: Gemini CLI and "
            "older Qwen Code write the same shape; keep it under ~/.gemini/tmp/<project>/chats or "
            "~/.qwen/tmp/<hash>/chats, or name the tool",
        )
    if not votes:
        types = sorted({str(data["type"]) for data in objects if "type" in data})[:6] or ["no `type` field"]
        return Detection(
            None,
            f"{len(objects)} JSON lines, but none has the shape of a record of {_KNOWN} "
            f"(types seen: {', '.join(types)})",
        )
    (tool, count), *rest = votes.most_common()
    if rest and rest[0][1] == count:
        return Detection(None, f"the lines look equally like {tool} and {rest[0][0]} records")
    return Detection(tool, f"{count} of the first {len(objects)} JSON lines have the shape of {tool} records")


def detect_tool(path: str | Path, first_lines: Iterable[str | dict]) -> str | None:
    return explain_detection(path, first_lines).tool


_KNOWN = "Claude Code, Qwen Code, Gemini CLI, OpenClaw or Codex CLI"  # the tools detected by their lines
FORKS = ("gemini-cli", "qwen-code")  # Qwen Code is a fork of Gemini CLI: their records look alike
_GEMINI_RECORD_TYPES = {"user", "gemini", "info", "error", "warning"}


def _is_session_document(data: dict) -> bool:
    return isinstance(data.get("messages"), list) and "sessionId" in data


def _record_types(document: dict) -> set[str]:
    return {
        record["type"]
        for record in document["messages"]
        if isinstance(record, dict) and isinstance(record.get("type"), str)
    }


def _only_written_by(data: dict) -> str | None:
    """Which of the two forks alone writes a record like this, by fields the other never writes: Gemini CLI's
    JSONL (`$set`, `$rewindTo`, the session line with `projectHash`), Qwen Code's ChatRecords (`uuid` +
    `parentUuid` with `message.parts`, `usageMetadata` or `systemPayload`) and its older documents (`qwen`
    model records)."""
    if "$set" in data or "$rewindTo" in data:
        return "gemini-cli"
    if _is_session_document(data):
        types = _record_types(data)
        return "qwen-code" if "qwen" in types else None
    if "projectHash" in data and "sessionId" in data and "type" not in data:
        return "gemini-cli"
    if "uuid" in data and "parentUuid" in data:
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        if isinstance(message.get("parts"), list) or "usageMetadata" in data or "systemPayload" in data:
            return "qwen-code"
    return None


def _shape_of(data: dict) -> str | None:
    if codex_shape(data):
        return "codex"
    kind = data.get("type")
    message = data.get("message") if isinstance(data.get("message"), dict) else None
    only = _only_written_by(data)
    if only:
        return only
    # Gemini CLI: a session document whose model records say `gemini`, or JSONL MessageRecords (`id`, `type`,
    # `content`, none of the ChatRecord fields).
    if _is_session_document(data):
        types = _record_types(data)
        return "gemini-cli" if "gemini" in types else None
    if kind in _GEMINI_RECORD_TYPES and "id" in data and "content" in data and not ({"uuid", "message"} & set(data)):
        return "gemini-cli"
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
    if kind == "tool_result" or "usageMetadata" in data or "systemPayload" in data:
        return "qwen-code"
    # Claude Code transcript entries: Anthropic `content`, userType / isSidechain / requestId.
    if kind in ("user", "assistant") and message and "content" in message:
        # Its own keys (`userType`, `isSidechain`, `requestId`, `parentUuid`) or not (an exporter that drops
        # them): no other tool writes `type: user|assistant` around an Anthropic `message`.
        return "claude-code"
    if kind == "summary" and "leafUuid" in data:
        return "claude-code"
    if kind in ("file-history-snapshot", "queue-operation") or (kind == "system" and "isSidechain" in data):
        return "claude-code"
    return None
