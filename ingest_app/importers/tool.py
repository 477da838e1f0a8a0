"""What a tool's folder declares: `Tool`, the description of one agent tool (its name, where it keeps its logs, how
its files and records are recognised, its parsers, its sample logs), and `Store`, a source of sessions that is not a
tree of log files (OpenCode's SQLite database).

Each tool's package (`importers/<tool>/`) declares `TOOL = Tool(...)`; `registry.TOOLS` lists them. Nothing here
imports a tool: the tools import this module, the registry imports the tools (as Django's `AppConfig` lives apart
from the registry of apps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import os

    from ingest_app.importers.base import LogParser, ParseResult


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
class PathName:
    """A log's path, split as every layout reads it: `parts`, the file `name`, its session `stem` (an archive's or
    a copy's is the session's: `Tool.history_stem`) and the `agent_id` an `agent-<id>` stem names."""

    path: PurePath
    parts: tuple[str, ...]
    name: str
    stem: str
    agent_id: str

    def after(self, marker: str, home: str = "") -> str:
        """The folder after `marker`, looked for below the tool's `home` when given (a path can hold another
        `tmp` or `projects` above it)."""
        index = self.parts.index(marker, self.parts.index(home) if home else 0)
        return self.parts[index + 1] if index + 1 < len(self.parts) else ""

    def below(self, home: str) -> tuple[str, ...]:
        """The parts from `home` on (the whole path from the first `home` in it)."""
        return self.parts[self.parts.index(home) :]


@dataclass(frozen=True)
class Store:
    """A source of sessions that is not a tree of log files: one store (a database, a folder of JSON objects)
    holds many sessions, each read as a source of its own under a virtual path (`<store>#<session>`).

    `layout` tells a source's virtual path (None for any other path); `expand` the sources of a path that is a
    store itself (None when it is not); `sources_in` those of the stores in a folder met in a walk (it may remove
    the store's own folders from `subdirs`); `stat` stands in for `os.stat` (None for any other path); `parse`
    reads one source whole. `upload_names` are file names of a store, refused by the upload API with
    `upload_refusal` (`{name}`: the name given): a store is rewritten in place, so its new bytes are no log's."""

    layout: Callable[[str | Path], Layout | None]
    expand: Callable[[Path], list[Path] | None]
    sources_in: Callable[[Path, list[str], list[str]], list[Path]]
    stat: Callable[[Path], os.stat_result | None]
    parse: Callable[..., ParseResult]
    upload_names: tuple[str, ...] = ()
    upload_refusal: str = ""


def _never(_record: dict) -> bool:
    return False


@dataclass(frozen=True)
class Tool:
    """One agent tool: everything the import, detection, the push client and the upload API know of it.

    - `name` is the value stored (`ImportedFile.tool`, `Session.tool`, the `ImportTool` choice) and `label` its
      choice label; `member` the choice's member name (`CLAUDE_CODE`).
    - `parser` reads its log lines; `document_parser` the whole-document `.json` form of a tool that has one,
      kept in `document_folders` (folder names in order, e.g. `(".gemini", "tmp", "chats")`).
    - `homes` are the folders of a home directory it keeps its logs under (`.claude`), `folders` its default log
      folders (`~/.claude/projects`: what `ace_push` watches) and `where` what `ace_import --help` says of them.
    - `layout` reads a path (`PathName`) in its storage: a `Layout`, or None when the path is not in it.
    - `records` says whether a JSON line is one of its records, by what no other tool writes, and `shape`
      whether it has the looser shape of one; detection by content asks every tool's `records`, then every
      tool's `shape`, in the registry's order. `fork_of` names the tool this one is a fork of: their
      records look alike, so `marks` says which fields only this one of the two writes, and a file in one's
      layout whose lines bear the other's marks is refused. `unrecognised` says why JSON lines that look like
      this tool's are no one's (or None).
    - `history_stem` gives the session's file stem for a file name that is an archive or copy of it (OpenClaw's
      `.reset.<ts>`), else ""; `is_log` says whether a `.jsonl` file in its layout is a log (OpenClaw's run
      traces are not), `renamed_from` the name a file had before the tool renamed it (OpenClaw's archives: the
      import moves the file's row to it) and `header_session_id` the session id a log's first record names;
      `push_skipped` the (folders, name ending) of files the push client skips, `push_archives` the
      patterns of the other names it sends (its archives).
    - `store` is its source of sessions when that is not a tree of log files (`Store`).
    - `samples` is the folder of its sample logs (real record shapes, read by the tests)."""

    name: str
    label: str
    member: str
    parser: type[LogParser]
    where: str
    samples: Path
    document_parser: type[LogParser] | None = None
    document_folders: tuple[tuple[str, ...], ...] = ()
    homes: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    layout: Callable[[PathName], Layout | None] | None = None
    records: Callable[[dict], bool] = _never
    shape: Callable[[dict], bool] = _never
    marks: Callable[[dict], bool] = _never
    unrecognised: Callable[[list[dict]], str | None] | None = None
    fork_of: str = ""
    history_stem: Callable[[str], str] | None = None
    is_log: Callable[[str], bool] | None = None
    renamed_from: Callable[[str], str | None] | None = None
    header_session_id: Callable[[dict], str] | None = None
    push_skipped: tuple[tuple[tuple[str, ...], str], ...] = ()
    push_archives: tuple[str, ...] = ()
    store: Store | None = None

    def parser_for(self, path: str | PurePath) -> type[LogParser]:
        """Its parser for this file: the document form for a `.json` file, when it has one, else the line form."""
        if self.document_parser is not None and PurePath(path).name.endswith(".json"):
            return self.document_parser
        return self.parser

    @property
    def detected_by_lines(self) -> bool:
        return self.records is not _never or self.shape is not _never
