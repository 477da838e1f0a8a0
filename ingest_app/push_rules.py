"""The push client's copy of the tools' layouts: `push_client.py` is one standalone file (no Django, no import of
the importers), so the registry's `push_rules` are written into it, between its BEGIN and END lines, as Python
literals. `manage.py ace_push_rules` writes them (`--check`: exit 1 when they drift); so does a new tool's
author, and tests/ingest_app/test_push.py fails until they do."""

from __future__ import annotations

import json
from pathlib import Path

from ingest_app.importers.registry import push_rules

PUSH_CLIENT = Path(__file__).resolve().parent / "push_client.py"
BEGIN = "# BEGIN the tools' layouts"
END = "# END the tools' layouts"


def _literal(value) -> str:
    if isinstance(value, str):
        return f'r"{value}"' if "\\" in value else json.dumps(value)
    items = ", ".join(_literal(item) for item in value)
    if not value:
        return "()"
    return f"({items},)" if len(value) == 1 else f"({items})"


def render() -> str:
    """The block's assignments, one item a line (as `ruff format` keeps them; one item or none: on one line)."""
    lines = []
    for name, values in push_rules().items():
        if len(values) < 2:
            lines.append(f"{name} = {_literal(values)}")
            continue
        lines.append(f"{name} = (")
        lines.extend(f"    {_literal(value)}," for value in values)
        lines.append(")")
    return "\n".join(lines)


def _split(text: str) -> tuple[str, str, str]:
    """The text before the block's assignments (up to the end of the BEGIN comment), the assignments, and the
    rest (from the END line)."""
    begin = text.index(BEGIN)
    end = text.index(END, begin)
    head_end = begin
    while True:  # the BEGIN comment's lines
        newline = text.index("\n", head_end) + 1
        if not text.startswith("#", newline):
            break
        head_end = newline
    return text[:newline], text[newline:end].rstrip("\n"), text[end:]


def written(text: str | None = None) -> str:
    """The assignments the push client holds now."""
    return _split(PUSH_CLIENT.read_text(encoding="utf-8") if text is None else text)[1]


def write() -> bool:
    """Write the registry's rules into the push client; whether it changed."""
    text = PUSH_CLIENT.read_text(encoding="utf-8")
    head, current, tail = _split(text)
    if current == render():
        return False
    PUSH_CLIENT.write_text(f"{head}{render()}\n{tail}", encoding="utf-8")
    return True
