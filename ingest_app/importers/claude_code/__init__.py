"""Claude Code: `~/.claude/projects/<project>/<session>.jsonl`, sub-agents in
`<project>/<session>/subagents/agent-<id>.jsonl` (older: `<project>/agent-<id>.jsonl`). `parser` reads the
transcripts; `samples/` holds real-shaped ones."""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers.claude_code.parser import ClaudeCodeParser
from ingest_app.importers.tool import Layout, PathName, Tool

NAME = "claude-code"


def layout(path: PathName) -> Layout | None:
    parts = path.parts
    if ".claude" not in parts or "projects" not in path.below(".claude"):
        return None
    project = path.after("projects", ".claude")
    if "subagents" in parts:
        parent = parts[parts.index("subagents") - 1]
        return Layout(NAME, f"{parent}/subagents/{path.stem}", True, parent, path.agent_id, project)
    if path.agent_id:
        return Layout(NAME, path.stem, True, "", path.agent_id, project)
    return Layout(NAME, path.stem, project_dir=project)


def shape(data: dict) -> bool:
    """Claude Code transcript entries: Anthropic `content`, userType / isSidechain / requestId."""
    kind = data.get("type")
    message = data.get("message") if isinstance(data.get("message"), dict) else None
    if kind in ("user", "assistant") and message and "content" in message:
        # Its own keys (`userType`, `isSidechain`, `requestId`, `parentUuid`) or not (an exporter that drops
        # them): no other tool writes `type: user|assistant` around an Anthropic `message`.
        return True
    if kind == "summary" and "leafUuid" in data:
        return True
    return kind in ("file-history-snapshot", "queue-operation") or (kind == "system" and "isSidechain" in data)


TOOL = Tool(
    name=NAME,
    label="Claude Code",
    member="CLAUDE_CODE",
    parser=ClaudeCodeParser,
    homes=(".claude",),
    folders=("~/.claude/projects",),
    where="~/.claude/projects (sessions and their sub-agents)",
    layout=layout,
    shape=shape,
    samples=Path(__file__).resolve().parent / "samples",
)
