"""Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`, and `~/.codex/archived_sessions/`.
`parser` reads the rollouts; `samples/` holds real-shaped ones (and ccusage's fixture, outside the layout)."""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers.codex.parser import CodexParser, codex_shape
from ingest_app.importers.tool import Layout, PathName, Tool

NAME = "codex"


def layout(path: PathName) -> Layout | None:
    if ".codex" in path.parts and {"sessions", "archived_sessions"} & set(path.below(".codex")):
        return Layout(NAME, path.stem)
    return None


TOOL = Tool(
    name=NAME,
    label="Codex CLI",
    member="CODEX",
    parser=CodexParser,
    homes=(".codex",),
    folders=("~/.codex/sessions", "~/.codex/archived_sessions"),
    where="~/.codex/sessions, ~/.codex/archived_sessions",
    layout=layout,
    records=codex_shape,
    samples=Path(__file__).resolve().parent / "samples",
)
