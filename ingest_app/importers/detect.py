"""Which agent wrote a log file: by where the file lives, then by the shape of its first lines.

Both are the tools' own (`registry.TOOLS`, each tool's `importers/<tool>/`): `describe_layout` asks each tool's
`layout` whether a path is in its storage (a store's session source, `<store>#<session>`, first), and
`explain_detection` asks each tool's `records` whether the first lines are its records. A tool may write two
forms (Gemini CLI: JSON documents, then JSONL; Qwen Code: JSON documents, then JSONL ChatRecords):
`parser_for` picks by the file's suffix (`.json` is a document).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath

from ingest_app.importers import registry
from ingest_app.importers.base import LogParser
from ingest_app.importers.registry import history_stem, store_layout
from ingest_app.importers.tool import Layout, PathName


def parser_for(tool: str, path: str | Path) -> type[LogParser]:
    """The parser of `tool` for this file: the tool's document form for a `.json` file, when it has one, else
    its line form."""
    return registry.get(tool).parser_for(path)


@dataclass(frozen=True)
class Detection:
    tool: str | None
    reason: str


def describe_layout(path: str | Path) -> Layout:
    """What a file's path says: the tool whose storage it lies in (None when none), the session's file key, and
    whether it is a sub-agent's file (of which parent session, which agent) and in which project."""
    found = store_layout(path)
    if found is not None:
        return found
    path = PurePath(path)
    name = path.name
    stem = history_stem(name) or (name[: -len(".jsonl")] if name.endswith(".jsonl") else path.stem)
    agent_id = stem[len("agent-") :] if stem.startswith("agent-") else ""
    named = PathName(path, path.parts, name, stem, agent_id)
    for tool in registry.TOOLS:
        found = tool.layout(named) if tool.layout else None
        if found is not None:
            return found
    return Layout(None, stem, bool(agent_id), "", agent_id)


def is_log_name(path: str | Path) -> bool:
    """Whether a directory walk should read this file: every `.jsonl` file (its lines decide the tool) but those
    a tool says are no log (OpenClaw's run traces), an archive of a session's file (OpenClaw's
    `<session>.jsonl.reset.<ts>`, `.deleted.<ts>`; compressed ones too, so that they are refused with the reason),
    and a `.json` file where a tool that writes whole-document logs keeps them (a `.json` file elsewhere is read
    only when named on its own)."""
    path = Path(path)
    name = path.name
    if name.endswith(".jsonl"):
        tool = registry.find(describe_layout(path).tool)
        return tool is None or tool.is_log is None or tool.is_log(name)
    if history_stem(name):
        return True
    if name.endswith(".json"):
        return registry.has_document_form(describe_layout(path).tool)
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
    shapes = Counter(shape_of(data) for data in objects)
    if shapes[tool] or not (objects or other):
        return Detection(tool, in_layout)
    if not objects:
        return Detection(None, f"{in_layout}, but none of its first {other} non-blank lines is a JSON object")
    # A fork's look-alike records are told apart by the fields only one writes (explain_detection), not here.
    siblings = {sibling.name for sibling in registry.family(registry.get(tool))}
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

    A fork and the tool it forks (Qwen Code, Gemini CLI) write look-alike records; a file in one's storage
    layout whose lines have fields only the other writes (`Tool.marks`) is refused rather than read by the
    wrong parser."""
    layout = describe_layout(path)
    objects, other = head_objects(first_lines)
    tool = registry.find(layout.tool)
    family = registry.family(tool) if tool else ()
    if len(family) > 1:
        marks = Counter(name for name in (_marked_by(family, data) for data in objects) if name)
        if marks and layout.tool not in marks:
            (name, count), *_ = marks.most_common()
            return Detection(
                None,
                f"the path is in the {layout.tool} storage layout, but {count} of the first {len(objects)} JSON "
                f"lines have fields only {name} writes",
            )
    if tool and tool.parser_for(path).document:
        return Detection(layout.tool, f"the path is in the {layout.tool} storage layout")
    if tool:
        return _judge_layout(layout.tool, objects, other)
    if not objects:
        if other:
            return Detection(None, f"none of the first {other} non-blank lines is a JSON object")
        return Detection(None, "the file is empty")
    votes = Counter(name for name in map(shape_of, objects) if name)
    if not votes:
        for candidate in registry.TOOLS:
            reason = candidate.unrecognised(objects) if candidate.unrecognised else None
            if reason:
                return Detection(None, reason)
        types = sorted({str(data["type"]) for data in objects if "type" in data})[:6] or ["no `type` field"]
        return Detection(
            None,
            f"{len(objects)} JSON lines, but none has the shape of a record of {_known()} "
            f"(types seen: {', '.join(types)})",
        )
    (name, count), *rest = votes.most_common()
    if rest and rest[0][1] == count:
        return Detection(None, f"the lines look equally like {name} and {rest[0][0]} records")
    return Detection(name, f"{count} of the first {len(objects)} JSON lines have the shape of {name} records")


def detect_tool(path: str | Path, first_lines: Iterable[str | dict]) -> str | None:
    return explain_detection(path, first_lines).tool


def shape_of(data: dict) -> str | None:
    """The tool whose record a JSON line is: the first in the registry's order whose `records` claim it, else
    the first whose `shape` does, else None."""
    for tool in registry.TOOLS:
        if tool.records(data):
            return tool.name
    for tool in registry.TOOLS:
        if tool.shape(data):
            return tool.name
    return None


def _marked_by(family: tuple, data: dict) -> str | None:
    """Which tool of a family alone writes a record like this (by its `marks`), or None."""
    for tool in family:
        if tool.marks(data):
            return tool.name
    return None


def _known() -> str:
    """The labels of the tools detected by their lines, a fork beside the tool it forks: "A, B or C"."""
    labels = [tool.label for tool in registry.by_family() if tool.detected_by_lines]
    return ", ".join(labels[:-1]) + f" or {labels[-1]}" if len(labels) > 1 else "".join(labels)
