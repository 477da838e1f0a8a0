"""The agent tools Open ACE imports: `TOOLS`, the one list of them, and what the import asks of them.

Each tool has one home, `importers/<tool>/`: its `__init__.py` declares `TOOL = Tool(...)` (`tool.Tool`: its
name and label, where it keeps its logs, how its paths and records are recognised, its parsers, its store when
its sessions are not files), beside its parser and its sample logs (`samples/`). Adding a tool is that folder
plus its line in `TOOLS`; then `manage.py ace_push --write-rules` (the push client's copy of the layouts), and
`manage.py makemigrations` for its `ImportTool` choice (tests/ingest_app/test_registry.py checks both).

The order of `TOOLS` is the order of the `ImportTool` choices, and the order detection asks the tools in:
by path (`layout`), then by the first lines' records (`records`), the first tool that claims one wins.
"""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers import claude_code, codex, gemini_cli, openclaw, opencode, qwen_code
from ingest_app.importers.tool import Layout, Tool

TOOLS: tuple[Tool, ...] = (
    claude_code.TOOL,
    qwen_code.TOOL,
    openclaw.TOOL,
    codex.TOOL,
    gemini_cli.TOOL,
    opencode.TOOL,
)
NAMES = tuple(tool.name for tool in TOOLS)
_BY_NAME = {tool.name: tool for tool in TOOLS}
STORES = tuple(tool for tool in TOOLS if tool.store is not None)


def get(name: str) -> Tool:
    """The tool of that name; KeyError when there is none."""
    return _BY_NAME[name]


def find(name: str | None) -> Tool | None:
    return _BY_NAME.get(name) if name else None


def family(tool: Tool) -> tuple[Tool, ...]:
    """The tool and those it is a fork of or that are forks of it (their records look alike), in registry order."""
    related = {tool.name, tool.fork_of}
    return tuple(other for other in TOOLS if other.name in related or other.fork_of == tool.name)


def by_family() -> tuple[Tool, ...]:
    """The tools in registry order, but a fork beside the tool it forks (the order the help and messages list
    them in)."""
    ordered: list[Tool] = []
    for tool in TOOLS:
        ordered.extend(member for member in family(tool) if member not in ordered)
    return tuple(ordered)


# -- paths ------------------------------------------------------------------------------------------------


def store_layout(path: str | Path) -> Layout | None:
    """The layout of a store's session source (`<store>#<session>`), or None for an ordinary file."""
    for tool in STORES:
        found = tool.store.layout(path)
        if found is not None:
            return found
    return None


def is_store_source(path: str | Path) -> bool:
    return store_layout(path) is not None


def history_stem(name: str) -> str:
    """The session's file stem when `name` is an archive or copy of a session's file, else ""."""
    for tool in TOOLS:
        stem = tool.history_stem(name) if tool.history_stem else ""
        if stem:
            return stem
    return ""


def has_document_form(name: str | None) -> bool:
    tool = find(name)
    return tool is not None and tool.document_parser is not None


# -- the stores: sources that are not files -----------------------------------------------------------------


def expand(root: Path) -> list[Path] | None:
    """The sources an import of `root` itself reads when it is a store; None when it is none."""
    for tool in STORES:
        sources = tool.store.expand(root)
        if sources is not None:
            return sources
    return None


def sources_in(directory: Path, subdirs: list[str], names: list[str]) -> list[Path]:
    """For a directory walk: the sources of the stores in `directory` (each may prune `subdirs`)."""
    return [source for tool in STORES for source in tool.store.sources_in(directory, subdirs, names)]


def source_stat(path: Path):
    """What stands in for `os.stat` for a store's source, or None for an ordinary file."""
    for tool in STORES:
        stat = tool.store.stat(path)
        if stat is not None:
            return stat
    return None


def upload_refusal(name: str) -> str | None:
    """Why a file of that name cannot be uploaded because it is a store (rewritten in place), or None."""
    for tool in STORES:
        if tool.store.upload_names and name.lower().endswith(tool.store.upload_names):
            return tool.store.upload_refusal.format(name=name)
    return None


# -- the push client's copy -------------------------------------------------------------------------------


def push_rules() -> dict[str, tuple]:
    """What the push client (`push_client.py`, a standalone file) knows of the tools' layouts, as the Python
    values of its generated block: written there by `manage.py ace_push --write-rules`, compared by a test."""
    return {
        "DEFAULT_PATHS": tuple(folder for tool in TOOLS if tool.store is None for folder in tool.folders),
        "TOOL_HOMES": tuple(home for tool in TOOLS for home in tool.homes),
        "DOCUMENT_FOLDERS": tuple(folders for tool in TOOLS for folders in tool.document_folders),
        "SKIPPED_LOGS": tuple(skipped for tool in TOOLS for skipped in tool.push_skipped),
        "ARCHIVED_LOGS": tuple(pattern for tool in TOOLS for pattern in tool.push_archives),
    }
