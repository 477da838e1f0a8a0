"""OpenClaw: `~/.openclaw/agents/<agent>/sessions/<session>.jsonl` (older installs: `.clawdbot`, `.moltbot`), with
the same session's archives `<session>.jsonl.reset.<ts>` / `.deleted.<ts>` (zstd-compressed too) and
pre-compaction copies `<session>.checkpoint.<uuid>.jsonl` (`parser.transcript_name`): their file key is the
session's. `parser` reads the transcripts; `samples/` holds real-shaped ones (`samples/backup/`: a whole
sessions folder with its archives)."""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers.openclaw.parser import OpenClawParser, transcript_name
from ingest_app.importers.tool import Layout, PathName, Tool

NAME = "openclaw"
HOMES = (".openclaw", ".clawdbot", ".moltbot")
_ENTRY_KINDS = ("model_change", "thinking_level_change", "compaction", "custom_message", "session_info")
_MESSAGE_ROLES = ("user", "assistant", "toolResult", "bashExecution")


def layout(path: PathName) -> Layout | None:
    for home in HOMES:
        if home in path.parts and "sessions" in path.below(home):
            agent = path.after("agents", home) if "agents" in path.below(home) else ""
            return Layout(NAME, path.stem, project_dir=agent)
    return None


def records(data: dict) -> bool:
    """pi-coding-agent transcripts: a `session` header, then entries with id/parentId."""
    kind = data.get("type")
    message = data.get("message") if isinstance(data.get("message"), dict) else None
    if kind == "session" and "id" in data and ("cwd" in data or "version" in data):
        return True
    if kind in _ENTRY_KINDS:
        return True
    return bool(kind == "message" and message and message.get("role") in _MESSAGE_ROLES)


def history_stem(name: str) -> str:
    """The session's file stem when `name` is an archive or checkpoint of it (the same session's bytes under
    another name, zstd-compressed or not), else ""."""
    found = transcript_name(name.removesuffix(".zst"))
    return found.stem if found is not None and found.variant != "live" else ""


def renamed_from(name: str) -> str | None:
    """The live transcript's name an archive had before OpenClaw renamed it on /reset or delete, else None."""
    found = transcript_name(name)
    return found.live_name if found is not None and found.variant in ("reset", "deleted") else None


def header_session_id(data: dict) -> str:
    """The `id` of a transcript's `session` header, or ""."""
    return data["id"] if data.get("type") == "session" and isinstance(data.get("id"), str) else ""


def is_log(name: str) -> bool:
    """A transcript, not a run trace (`.trajectory.jsonl`, which repeats their usage)."""
    return transcript_name(name) is not None


TOOL = Tool(
    name=NAME,
    label="OpenClaw",
    member="OPENCLAW",
    parser=OpenClawParser,
    homes=HOMES,
    folders=tuple(f"~/{home}/agents" for home in HOMES),
    where="~/.openclaw/agents (older installs ~/.clawdbot, ~/.moltbot), archives included",
    layout=layout,
    records=records,
    history_stem=history_stem,
    renamed_from=renamed_from,
    header_session_id=header_session_id,
    is_log=is_log,
    push_skipped=tuple(((home, "sessions"), ".trajectory.jsonl") for home in HOMES),
    push_archives=(r"\.jsonl\.(?:reset|deleted)\.[^/]+$",),
    samples=Path(__file__).resolve().parent / "samples",
)
