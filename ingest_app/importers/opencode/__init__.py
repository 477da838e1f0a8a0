"""OpenCode: no file per session. `~/.local/share/opencode/opencode.db` (or the legacy `storage/` folder) is a
store of sessions, read as one source per session, `<store>#<session>` (`<store>#<top session>/<session>` for a
sub-agent's): see `parser`. `samples/` holds a database's dump (`opencode.sql`) and a storage folder's
objects (`storage.json`), from which the tests build them."""

from __future__ import annotations

from pathlib import Path

from ingest_app.importers.opencode import parser
from ingest_app.importers.tool import Layout, Store, Tool

NAME = "opencode"


def layout(path: str | Path) -> Layout | None:
    """A session source's virtual path names the session and the top session it belongs to."""
    source = parser.split_source(path)
    if source is None:
        return None
    return Layout(NAME, source.session_id, bool(source.root), source.root, source.session_id if source.root else "")


TOOL = Tool(
    name=NAME,
    label="OpenCode",
    member="OPENCODE",
    parser=parser.OpenCodeParser,
    where="~/.local/share/opencode (its opencode.db, or the older storage/ folder)",
    store=Store(
        layout=layout,
        expand=parser.expand,
        sources_in=parser.sources_in,
        stat=parser.source_stat,
        parse=parser.parse_source,
        upload_names=(".db", ".db-wal", ".sqlite"),
        upload_refusal=(
            "{name!r}: an OpenCode database (or another SQLite file) cannot be uploaded: it is rewritten in place, "
            "so its new bytes are not a log's new lines. Import it where it lives: "
            "`manage.py ace_import ~/.local/share/opencode`."
        ),
    ),
    samples=Path(__file__).resolve().parent / "samples",
)
