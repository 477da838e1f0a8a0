"""OpenCode sessions: the SQLite database `~/.local/share/opencode/opencode.db` (v1.2 and later) and the JSON
storage of earlier versions (`~/.local/share/opencode/storage/`).

OpenCode keeps no log file per session. Since v1.2.0 a session is rows of a SQLite database (Drizzle schema
`packages/opencode/src/session/session.sql.ts`): `session` (id, parent_id, directory, title, version, time_*),
`message` (id, session_id, time_created, time_updated, `data`: the message as JSON without its ids) and
`part` (id, message_id, session_id, time_*, `data`: the part as JSON). Before, the same objects were JSON
files, `storage/session/<projectID>/<sessionID>.json`, `storage/message/<sessionID>/<messageID>.json`
and `storage/part/<messageID>/<partID>.json`; the one-time migration (`storage/json-migration.ts`) copies
them into the database with the same ids (taken from the file names).

So the importer reads a **source** per session: a virtual path `<anchor>#<sessionID>`, where the anchor is
the database file or the legacy `storage` folder (`<anchor>#<rootID>/<sessionID>` for a sub-agent session,
which `task` tool calls open, named after the top session they belong to). `plan.log_files` expands a
database or storage folder into its sources (`sources_in`, `expand`), `source_stat` stands in for
`os.stat` (size: the bytes of the session's rows; mtime: its last update), and `parse_source` reads one
session whole each time it changed, as a document (`OpenCodeParser.document`). The database is opened
read-only (`mode=ro`), which is safe next to a running OpenCode (WAL mode). When both stores hold a
session (the migration left the JSON files behind), the database wins: the storage folder's sources are
only the sessions the database does not have.

Counting (see docs/accounting.md, OpenCode): an assistant message holds one or more steps, each one API
call that ends with a `step-finish` part carrying that call's tokens and cost (the message's own `tokens`
are only the last step's: `processor.ts` overwrites them, anomalyco/opencode#42324). Each finished step is
one assistant message and one request. A step still streaming is stored at once as far as it is written,
without a request, and completed in place (made its request) when the session is read again with the step
finished; re-reading the session stores nothing twice.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from typing import Any
from urllib.parse import quote

from ingest_app.importers.base import (
    LogParser,
    ParsedMessage,
    ParseIssue,
    ParseResult,
    SourceFile,
    as_int,
    join_texts,
    nano_usd,
    parse_timestamp,
    project_of,
)
from ingest_app.importers.failures import provider_answered
from ingest_app.importers.jsonl import loads_finite

TOOL = "opencode"
_DB_NAME = re.compile(r"^opencode(-[A-Za-z0-9_-]+)?\.db$")  # opencode.db, and channel builds' opencode-<channel>.db
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_SEPARATOR = "#"
_TABLES = {"session", "message", "part"}
# An assistant message's errors that are a failed call the provider answered (message-v2.ts `fromError`): an
# `APICallError` becomes `APIError` (with the response's `statusCode`), a prompt over the window
# `ContextOverflowError` (newer builds).
_FAILED_CALL_ERRORS = {"APIError", "ContextOverflowError"}


# -- sources: one per session ------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A session in a store: the database file or the legacy storage folder (`anchor`), the session's id, and,
    for a sub-agent session, the top session it belongs to (`root`)."""

    anchor: Path
    session_id: str
    root: str = ""

    @property
    def is_database(self) -> bool:
        return self.anchor.name != "storage"

    @property
    def path(self) -> Path:
        tail = f"{self.root}/{self.session_id}" if self.root else self.session_id
        return Path(f"{self.anchor}{_SEPARATOR}{tail}")


def split_source(path: str | Path) -> Source | None:
    """The session source a virtual path names, or None for an ordinary file."""
    anchor, separator, tail = str(path).rpartition(_SEPARATOR)
    names = tail.split("/")
    if not separator or len(names) > 2 or any(name and not _SESSION_ID.match(name) for name in names):
        return None
    anchor_path = Path(anchor)
    if not (_DB_NAME.match(anchor_path.name) or anchor_path.name == "storage"):
        return None
    return Source(anchor_path, names[-1], names[0] if len(names) == 2 else "")


def is_database_name(name: str) -> bool:
    return bool(_DB_NAME.match(name))


def connect(db: Path) -> sqlite3.Connection:
    """The database, read-only (never written, never locked for writing; a running OpenCode goes on)."""
    connection = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True, timeout=5)
    connection.execute("PRAGMA query_only = 1")
    return connection


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _roots(parents: dict[str, str | None]) -> dict[str, str]:
    """Each session's top session ("" for a top session itself), following parent ids (a cycle stops)."""
    roots = {}
    for session_id in parents:
        seen, current = {session_id}, session_id
        while parents.get(current) and parents[current] in parents and parents[current] not in seen:
            current = parents[current]
            seen.add(current)
        roots[session_id] = "" if current == session_id else current
    return roots


def database_sources(db: Path) -> list[Path]:
    """The sessions of a database; `<db>#` alone when it cannot be read or is not an
    OpenCode database (the import then refuses it with the reason)."""
    try:
        with _closing(connect(db)) as connection:
            if not _TABLES <= _tables(connection):
                return [Path(f"{db}{_SEPARATOR}")]
            parents = dict(connection.execute("SELECT id, parent_id FROM session"))
    except sqlite3.Error:
        return [Path(f"{db}{_SEPARATOR}")]
    roots = _roots({str(k): (str(v) if v else None) for k, v in parents.items() if k})
    return [Source(db, session_id, root).path for session_id, root in roots.items() if _SESSION_ID.match(session_id)]


_LEGACY_INFOS: dict[str, tuple[tuple, dict[str, Path]]] = {}


def _legacy_infos(storage: Path) -> dict[str, Path]:
    """Legacy session info files by session id (`session/<projectID>/<sessionID>.json`), listed again only when
    a project folder changed (the import asks for every session)."""
    session_dir = storage / "session"
    projects = []
    for project in sorted(_listdir(session_dir)):
        try:
            projects.append((project, (session_dir / project).stat().st_mtime_ns))
        except OSError:
            continue
    key = tuple(projects)
    cached = _LEGACY_INFOS.get(str(storage))
    if cached and cached[0] == key:
        return cached[1]
    infos = {}
    for project, _ in projects:
        for name in _listdir(session_dir / project):
            if name.endswith(".json"):
                infos[name[: -len(".json")]] = session_dir / project / name
    _LEGACY_INFOS[str(storage)] = (key, infos)
    return infos


def storage_sources(storage: Path, *, skip: set[str] = frozenset()) -> list[Path]:
    """The sessions of a legacy storage folder that have messages, except those in `skip` (in the database)."""
    infos = _legacy_infos(storage)
    ids = [name for name in sorted(_listdir(storage / "message")) if _SESSION_ID.match(name) and name not in skip]
    parents = {}
    for session_id in ids:
        info = _read_json(infos[session_id]) if session_id in infos else None
        parent = info.get("parentID") if isinstance(info, dict) else None
        parents[session_id] = parent if isinstance(parent, str) and parent else None
    roots = _roots(parents)
    return [Source(storage, session_id, roots[session_id]).path for session_id in ids]


def sources_in(directory: Path, subdirs: list[str], names: list[str]) -> list[Path]:
    """For a directory walk: the session sources of the OpenCode stores in `directory` (a database file, a
    legacy `storage` folder next to one, or a `storage` folder of OpenCode's data directory). The storage
    folder is removed from `subdirs` (its thousands of part files are not logs), and so is the `snapshot`
    folder beside a database (OpenCode's git snapshots of the worktrees)."""
    sources: list[Path] = []
    in_db: set[str] = set()
    for name in sorted(names):
        if is_database_name(name):
            found = database_sources(directory / name)
            sources.extend(found)
            in_db.update(split_source(path).session_id for path in found)
            if "snapshot" in subdirs:
                subdirs.remove("snapshot")
    if "storage" in subdirs and _is_storage(directory / "storage"):
        subdirs.remove("storage")
        sources.extend(storage_sources(directory / "storage", skip=in_db))
    return sources


def expand(path: Path) -> list[Path] | None:
    """The sources an import of `path` itself reads when it is an OpenCode store (a database file, or a legacy
    `storage` folder or a file in one); None otherwise."""
    if path.is_file() and is_database_name(path.name):
        return database_sources(path)
    storage = next((p for p in (path, *path.parents) if p.name == "storage" and _is_storage(p)), None)
    if storage is None:
        return None
    if path.is_file():  # a file of the storage: the session it belongs to
        session_id = _session_of_storage_file(storage, path)
        return [p for p in storage_sources(storage) if split_source(p).session_id == session_id]
    return storage_sources(storage)


def _is_storage(path: Path) -> bool:
    return (path / "message").is_dir() and (path / "session").is_dir()


def _session_of_storage_file(storage: Path, path: Path) -> str:
    relative = path.relative_to(storage).parts
    if len(relative) >= 2 and relative[0] == "message":
        return relative[1]
    if len(relative) >= 3 and relative[0] == "session":
        return Path(relative[2]).stem
    if len(relative) >= 2 and relative[0] == "part":
        data = _read_json(path)
        return str(data.get("sessionID") or "") if isinstance(data, dict) else ""
    return ""


# -- what os.stat says of a file, for a session ------------------------------------------------------------


@dataclass(frozen=True)
class SourceStat:
    """What the import needs of `os.stat` for a session: the bytes of its rows or files, its last update, and
    the device, inode and owner of the store."""

    st_size: int
    st_mtime_ns: int
    st_dev: int
    st_ino: int
    st_uid: int

    @property
    def st_mtime(self) -> float:
        return self.st_mtime_ns / 1e9


@dataclass
class _Snapshot:
    """Every session's (bytes of its rows, last update in ms) as of one state of the database."""

    key: tuple  # the database file's and its write-ahead log's mtime and size
    taken: float  # monotonic()
    stats: dict[str, tuple[int, int]]


_SNAPSHOTS: dict[str, _Snapshot] = {}
_SNAPSHOT_EVERY = 2.0  # seconds: while OpenCode keeps writing, sessions are measured one by one in between


def source_stat(path: Path) -> SourceStat | None:
    """The stat of a session source (None for an ordinary file). Raises OSError when the store cannot be read."""
    source = split_source(path)
    if source is None:
        return None
    store = source.anchor.stat()
    if not source.session_id:
        return SourceStat(store.st_size, store.st_mtime_ns, store.st_dev, store.st_ino, store.st_uid)
    if source.is_database:
        size, updated_ms = _database_stat(source.anchor, store, source.session_id)
        return SourceStat(size, updated_ms * 1_000_000, store.st_dev, store.st_ino, store.st_uid)
    size, mtime_ns = 0, 0
    files = [_legacy_infos(source.anchor).get(source.session_id)]
    message_dir = source.anchor / "message" / source.session_id
    for name in _listdir(message_dir):
        files.append(message_dir / name)
        part_dir = source.anchor / "part" / name.removesuffix(".json")
        files.extend(part_dir / part for part in _listdir(part_dir))
    for file in files:
        if file is None:
            continue
        try:
            stat = file.stat()
        except OSError:
            continue
        size += stat.st_size
        mtime_ns = max(mtime_ns, stat.st_mtime_ns)
    return SourceStat(size, mtime_ns, store.st_dev, store.st_ino, store.st_uid)


def _database_stat(db: Path, store: os.stat_result, session_id: str) -> tuple[int, int]:
    """A session's (bytes of its rows, last update in ms), always as the database is now. The import asks for
    every session: one query measures them all and serves until the database changes; while a running
    OpenCode keeps changing it, sessions are measured one by one (an indexed query each) rather than all
    again each time."""
    wal = db.with_name(db.name + "-wal")
    try:
        wal_stat = wal.stat()
        key = (store.st_mtime_ns, store.st_size, wal_stat.st_mtime_ns, wal_stat.st_size)
    except OSError:
        key = (store.st_mtime_ns, store.st_size, 0, 0)
    snapshot = _SNAPSHOTS.get(str(db))
    if snapshot and snapshot.key == key:
        return snapshot.stats.get(session_id, (0, 0))
    try:
        with _closing(connect(db)) as connection:
            if snapshot is None or monotonic() - snapshot.taken >= _SNAPSHOT_EVERY:
                _SNAPSHOTS[str(db)] = snapshot = _Snapshot(key, monotonic(), _measure(connection))
                return snapshot.stats.get(session_id, (0, 0))
            return _measure(connection, session_id).get(session_id, (0, 0))
    except sqlite3.Error as error:
        raise OSError(f"cannot read the OpenCode database: {error}") from error


def _measure(connection: sqlite3.Connection, session_id: str | None = None) -> dict[str, tuple[int, int]]:
    """(bytes of the rows' data, last `time_updated`) of every session, or of one."""
    stats: dict[str, tuple[int, int]] = {}
    for table in ("session", "message", "part"):
        column = "id" if table == "session" else "session_id"
        size = "0" if table == "session" else "coalesce(sum(length(CAST(data AS BLOB))), 0)"
        where, params = (f"WHERE {column} = ?", (session_id,)) if session_id else ("", ())
        rows = connection.execute(
            f"SELECT {column}, {size}, max(time_updated) FROM {table} {where} GROUP BY {column}",  # noqa: S608 - fixed names
            params,
        )
        for key, rows_size, updated in rows:
            before = stats.get(key, (0, 0))
            stats[key] = (before[0] + (as_int(rows_size) or 0), max(before[1], as_int(updated) or 0))
    return stats


# -- reading one session -------------------------------------------------------------------------------------


def parse_source(path: Path, *, carry: dict | None = None, flush: bool = False) -> ParseResult:
    """One session, read whole: every message it holds now, a step still streaming as far as it is written
    (`pending` counts those steps; `flush`, for an idle session, takes a message's own tokens for a call
    that never wrote its step-finish)."""
    source = split_source(path)
    issues: list[ParseIssue] = []

    def failed(message: str, level: str = "error") -> ParseResult:
        issues.append(ParseIssue(str(path), 0, message, level))
        return ParseResult(None, [], issues, 0, 0, dict(carry or {}))

    if source is None or not source.session_id:
        anchor = source.anchor if source else path
        if not anchor.exists():
            return failed("cannot read the file: no such file")
        try:
            with _closing(connect(anchor)) as connection:
                tables = _tables(connection)
        except sqlite3.Error as error:
            return failed(f"not a readable OpenCode database: {error}")
        missing = ", ".join(sorted(_TABLES - tables)) or "none"
        return failed(f"not an OpenCode database: its tables {missing} are missing")
    try:
        stat = source_stat(path)
        document = _read_database(source, issues) if source.is_database else _read_storage(source, issues)
    except (OSError, sqlite3.Error) as error:
        # Locked, being replaced, or gone: nothing read, the next import tries again.
        return failed(f"cannot read the session now: {error}", "warning")
    if document is None:
        return failed(f"the session {source.session_id} is no longer in {source.anchor.name}", "warning")
    layout_source = SourceFile(
        path=path,
        file_key=source.session_id,
        is_subagent=bool(source.root),
        parent_session_id=source.root,
        agent_id=source.session_id if source.root else "",
    )
    parser = OpenCodeParser(layout_source, {"conversation": (carry or {}).get("conversation")})
    parser.feed_document(document)
    pending = parser.finish(flush=flush)
    issues.extend(parser.issues)
    issues.sort(key=lambda issue: issue.line)
    return ParseResult(
        session=parser.session,
        messages=parser.messages,
        issues=issues,
        end_offset=stat.st_size if stat else 0,
        lines_read=len(document["messages"]),
        carry={"tool": TOOL, "document": True},
        tool=TOOL,
        pending=pending,
    )


def _read_database(source: Source, issues: list[ParseIssue]) -> dict | None:
    """The session as {"session": info, "messages": [{"info": ..., "parts": [...]}]}, rows whose `data` is not a
    JSON object reported and left out."""
    path = str(source.path)
    with _closing(connect(source.anchor)) as connection:
        connection.row_factory = sqlite3.Row
        row = connection.execute("SELECT * FROM session WHERE id = ?", (source.session_id,)).fetchone()
        if row is None:
            return None
        info = dict(row)
        messages = connection.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id",
            (source.session_id,),
        ).fetchall()
        parts = connection.execute(
            "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id", (source.session_id,)
        ).fetchall()
    by_message: dict[str, list[dict]] = {}
    for part in parts:
        data = _loads(part["data"])
        if data is None:
            issues.append(ParseIssue(path, 0, f"part {part['id']}: its data is not a JSON object; left out"))
            continue
        by_message.setdefault(part["message_id"], []).append({**data, "id": part["id"]})
    document = []
    for number, message in enumerate(messages, start=1):
        data = _loads(message["data"])
        if data is None:
            issues.append(ParseIssue(path, number, f"message {message['id']}: its data is not a JSON object; left out"))
            continue
        document.append({"info": {**data, "id": message["id"]}, "parts": by_message.get(message["id"], [])})
    return {"session": _session_from_row(info), "messages": document}


def _session_from_row(row: dict) -> dict:
    """A `session` row in the shape of the legacy session file (`Session.Info`)."""
    return {
        "id": row.get("id"),
        "parentID": row.get("parent_id"),
        "directory": row.get("directory"),
        "title": row.get("title"),
        "version": row.get("version"),
        "time": {"created": row.get("time_created"), "updated": row.get("time_updated")},
    }


def _read_storage(source: Source, issues: list[ParseIssue]) -> dict | None:
    storage, path = source.anchor, str(source.path)
    message_dir = storage / "message" / source.session_id
    if not message_dir.is_dir():
        return None
    info_path = _legacy_infos(storage).get(source.session_id)
    info = _read_json(info_path) if info_path else None
    messages = []
    for name in sorted(_listdir(message_dir)):
        if not name.endswith(".json"):
            continue
        data = _read_json(message_dir / name)
        if not isinstance(data, dict):
            issues.append(ParseIssue(path, 0, f"message/{source.session_id}/{name}: not a JSON object; left out"))
            continue
        message_id = name[: -len(".json")]
        parts = []
        part_dir = storage / "part" / message_id
        for part_name in sorted(_listdir(part_dir)):
            part = _read_json(part_dir / part_name) if part_name.endswith(".json") else None
            if not isinstance(part, dict):
                issues.append(ParseIssue(path, 0, f"part/{message_id}/{part_name}: not a JSON object; left out"))
                continue
            parts.append({**part, "id": part_name[: -len(".json")]})
        messages.append({"info": {**data, "id": message_id}, "parts": parts})
    messages.sort(key=lambda m: (_created(m["info"]), m["info"]["id"]))
    return {"session": info if isinstance(info, dict) else {"id": source.session_id}, "messages": messages}


def _created(info: dict) -> int:
    time = info.get("time")
    return (as_int(time.get("created")) or 0) if isinstance(time, dict) else 0


# -- the parser ---------------------------------------------------------------------------------------------


def normalise_tokens(tokens: dict) -> dict[str, int | None]:
    """OpenCode `tokens` {input, output, reasoning, cache {read, write}, total?} to Open ACE token kinds.

    `input` is already without the cache (`Session.getUsage` subtracts it). Reasoning is output; whether
    OpenCode's `output` holds it changed with the AI SDK: v6 builds write `output = outputTokens - reasoning`
    (so reasoning is added), earlier ones wrote the provider's output, reasoning inside for most providers.
    The call's `total` (the provider's, cache included) tells: when it equals input + cache + output,
    reasoning is already inside; otherwise (or without a total) it is added."""
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    input_tokens = as_int(tokens.get("input"))
    output = as_int(tokens.get("output"))
    reasoning = as_int(tokens.get("reasoning")) or 0
    read, write = as_int(cache.get("read")), as_int(cache.get("write"))
    total = as_int(tokens.get("total"))
    if input_tokens is None and output is None:
        return {}
    output_tokens = output or 0
    if reasoning and not (
        total is not None and total == (input_tokens or 0) + (read or 0) + (write or 0) + output_tokens
    ):
        output_tokens += reasoning
    return {
        "input_tokens": input_tokens or 0,
        "output_tokens": output_tokens,
        "cache_read_tokens": read,
        "cache_creation_tokens": write,
        "total_tokens": (input_tokens or 0) + output_tokens,
    }


def _has_usage(tokens: dict) -> bool:
    return any(value for key, value in tokens.items() if key != "total_tokens")


class OpenCodeParser(LogParser):
    """One OpenCode session (its messages and their parts) to ParsedMessages; see the module docstring."""

    tool = TOOL
    document = True

    def load(self, carry: dict) -> None:
        self.data: dict = {"session": {}, "messages": []}

    def feed_document(self, data: Any) -> None:
        """The session as `parse_source` reads it: {"session": info, "messages": [{"info", "parts"}]}."""
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            self.data = data

    def finish(self, *, flush: bool) -> int:
        session = self.data.get("session")
        self._describe_session(session if isinstance(session, dict) else {})
        pending = 0
        for number, message in enumerate(self.data["messages"], start=1):
            message = message if isinstance(message, dict) else {}
            info = message.get("info") if isinstance(message.get("info"), dict) else {}
            parts = message.get("parts") if isinstance(message.get("parts"), list) else []
            parts = [part for part in parts if isinstance(part, dict)]
            parts.sort(key=lambda part: str(part.get("id") or ""))
            self.session.seen_at(parse_timestamp(_created(info) or None))
            if info.get("role") == "user":
                self._user(number, info, parts)
            elif info.get("role") == "assistant":
                pending += self._assistant(number, info, parts, flush=flush)
            else:
                self.issue(number, f"message {info.get('id')}: unknown role {info.get('role')!r}; left out", "warning")
        if not self.session.agent_session_id:
            self.session.agent_session_id = self.source.file_key
        return pending

    # -- the session ---------------------------------------------------------------------------------------
    def _describe_session(self, info: dict) -> None:
        session = self.session
        session.agent_session_id = self.source.file_key
        if self.source.is_subagent:
            session.parent_agent_session_id = self.source.parent_session_id
            session.is_subagent = True
            session.metadata["agent_meta"] = {"title": _text(info.get("title")), "parent_id": info.get("parentID")}
        directory = _text(info.get("directory"))
        if directory:
            session.cwd, session.project = directory, project_of(directory)
        session.version = _text(info.get("version"))
        title = _text(info.get("title"))
        if title and not self.source.is_subagent and not title.startswith(("New session - ", "Child session - ")):
            session.metadata["title"] = title  # OpenCode's default titles name only the time
        time = info.get("time") if isinstance(info.get("time"), dict) else {}
        session.seen_at(parse_timestamp(time.get("created")))

    def _metadata(self, info: dict, kind: str, **extra) -> dict:
        metadata = {"tool": TOOL, "kind": kind, "message_id": info.get("id")}
        if self.source.is_subagent:
            metadata["subagent"] = True
        metadata.update({key: value for key, value in extra.items() if value not in (None, "", [], {})})
        return metadata

    def _emit(self, number: int, info: dict, role: str, content: str, external_id: str, **fields) -> ParsedMessage:
        time = info.get("time") if isinstance(info.get("time"), dict) else {}
        message = ParsedMessage(
            role=role,
            content=content,
            external_id=external_id,
            line=number,
            created_at=parse_timestamp(fields.pop("when", None) or time.get("created")),
            conversation=self.conversation,
            is_subagent=self.source.is_subagent,
            **fields,
        )
        self.messages.append(message)
        return message

    # -- messages --------------------------------------------------------------------------------------------
    def _user(self, number: int, info: dict, parts: list[dict]) -> None:
        message_id = str(info.get("id"))
        texts = [p for p in parts if p.get("type") == "text"]
        typed = [_text(p.get("text")) for p in texts if not p.get("synthetic") and not p.get("ignored")]
        files = [f"[file: {_text(p.get('filename')) or 'file'}]" for p in parts if p.get("type") == "file"]
        # What the user typed; when all of the text is synthetic (a command's expansion), that text.
        content = join_texts([*typed, *files], "\n") or join_texts((_text(p.get("text")) for p in texts), "\n")
        kinds = {_text(p.get("type")) for p in parts}
        model = info.get("model") if isinstance(info.get("model"), dict) else {}
        extra = {"agent": info.get("agent"), "model": model.get("modelID"), "provider": model.get("providerID")}
        if "compaction" in kinds:
            # OpenCode asks the model to summarise the session: its own prompt, not the user's.
            self._emit(number, info, "system", content or "Compact the session", message_id,
                       metadata=self._metadata(info, "compaction", **extra))  # fmt: skip
        elif self.source.is_subagent:
            self._emit(
                number, info, "system", content, message_id, metadata=self._metadata(info, "subagent_prompt", **extra)
            )
        else:
            self.conversation = f"{TOOL}:{message_id}"
            kind = "command" if "subtask" in kinds else "prompt"
            self._emit(number, info, "user", content, message_id, metadata=self._metadata(info, kind, **extra))

    def _assistant(self, number: int, info: dict, parts: list[dict], *, flush: bool) -> int:
        """The message's steps (one API call each), its tool results and its error; returns how many of its
        steps are still streaming.

        A step without its `step-finish` in a message still being written is stored as far as it is written,
        as a message of its own without a request (`unfinished`, no tokens: its call has not reported any);
        when the session is read again with the step finished, the same external id comes back with its
        request id and tokens, and the import makes the stored message that request (`_Append._promote`).
        Not a request from the start: a step the user interrupts never finishes and was no billed call."""
        message_id = str(info.get("id"))
        time = info.get("time") if isinstance(info.get("time"), dict) else {}
        error = info.get("error") if isinstance(info.get("error"), dict) else None
        done = bool(time.get("completed")) or error is not None or flush
        steps = _steps(parts)
        finished = [step for step in steps if step["finish"] is not None]
        streaming = 0
        for index, step in enumerate(steps, start=1):
            external_id = message_id if index == 1 else f"{message_id}:{index}"
            if step["finish"] is None:
                if not done:
                    streaming += 1
                    self._step(number, info, step, external_id, {}, None, unfinished=True)
                    continue
                if not finished and index == len(steps):
                    # No step-finish anywhere (a legacy message file without parts, or an interrupted call):
                    # the message's own tokens, when it has any, are its one call.
                    tokens = normalise_tokens(info["tokens"]) if isinstance(info.get("tokens"), dict) else {}
                    if _has_usage(tokens):
                        self._step(number, info, step, external_id, tokens, None)
                        continue
                self._step(number, info, step, external_id, {}, None, unfinished=True)
                continue
            self._step(number, info, step, external_id, None, step["finish"])
        if not steps and done:
            tokens = normalise_tokens(info["tokens"]) if isinstance(info.get("tokens"), dict) else {}
            if _has_usage(tokens):
                self._step(number, info, {"parts": [], "finish": None}, message_id, tokens, None)
        if error is not None and error.get("name") != "MessageAbortedError":
            self._error(number, info, error)
        return streaming

    def _error(self, number: int, info: dict, error: dict) -> None:
        """An assistant message's `error`. A call the provider answered with an error (`APIError` with a status or
        an error that is not a connection failure, `ContextOverflowError`) is one more request of the message's
        model, without tokens: it failed before its `step-finish`, so no step counted it (the steps before it
        did, each with its own). No request for an error that is no failed call: `ProviderAuthError` (no key:
        nothing was sent), `MessageOutputLengthError` and `StructuredOutputError` (the call completed and its
        step counted it), `UnknownError` (not a provider's answer)."""
        message_id = str(info.get("id"))
        time = info.get("time") if isinstance(info.get("time"), dict) else {}
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        name = _text(error.get("name"))
        text = _text(data.get("message")) or name or "error"
        status = data.get("statusCode")
        metadata = self._metadata(info, "api_error", name=name, status=status, provider=info.get("providerID"))
        fields = {}
        if name in _FAILED_CALL_ERRORS and provider_answered(status, text):
            model = info.get("modelID") if isinstance(info.get("modelID"), str) else None
            fields = {"request_id": self.request_key(f"{message_id}:error"), "model": model}
            metadata["failed_call"] = True
        elif name in _FAILED_CALL_ERRORS:
            metadata["no_answer"] = True
        self._emit(
            number, info, "error", text, f"{message_id}:error", when=time.get("completed"), metadata=metadata, **fields
        )

    def _step(
        self,
        number: int,
        info: dict,
        step: dict,
        external_id: str,
        tokens: dict | None,
        finish: dict | None,
        *,
        unfinished: bool = False,
    ) -> None:
        """One step of an assistant message: its text, reasoning and tool calls, with the call's tokens from its
        step-finish part (`tokens` given: the message's own), then the results of its tool calls."""
        texts, thoughts, calls, results, spawned = [], [], [], [], None
        for part in step["parts"]:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str) and not part.get("synthetic"):
                texts.append(part["text"])
            elif kind == "reasoning" and isinstance(part.get("text"), str):
                thoughts.append(part["text"])
            elif kind == "tool":
                state = part.get("state") if isinstance(part.get("state"), dict) else {}
                calls.append({"id": part.get("callID"), "name": part.get("tool"), "arguments": state.get("input")})
                if state.get("status") in ("completed", "error"):
                    results.append(part)
                meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
                if part.get("tool") == "task" and isinstance(meta.get("sessionId"), str):
                    spawned = meta["sessionId"]
        if finish is not None:
            usage = finish.get("tokens") if isinstance(finish.get("tokens"), dict) else {}
            tokens = normalise_tokens(usage)
        else:
            usage = info.get("tokens") if isinstance(info.get("tokens"), dict) else {}
        is_request = finish is not None or bool(tokens and _has_usage(tokens))
        if not (texts or thoughts or calls or is_request):
            return
        cost = finish.get("cost") if finish is not None else (info.get("cost") if is_request else None)
        metadata = self._metadata(
            info,
            "response" if is_request else "unfinished",
            model=info.get("modelID"),
            provider=info.get("providerID"),
            agent=info.get("agent") or info.get("mode"),
            cost=cost if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
            usage=usage if is_request else None,
            step_finish_id=finish.get("id") if finish is not None else None,
            summary=True if info.get("summary") is True else None,
            spawned_agent_id=spawned,
            aborted=True if unfinished and isinstance(info.get("error"), dict) else None,
        )
        model = info.get("modelID") if isinstance(info.get("modelID"), str) else None
        self._emit(
            number,
            info,
            "assistant",
            join_texts(texts),
            external_id,
            request_id=self.request_key(str(info.get("id"))) if is_request else None,
            model=model,
            thinking=join_texts(thoughts) or None,
            tool_calls=calls or None,
            finish_reason=_text(finish.get("reason")) if finish is not None else _text(info.get("finish")),
            metadata=metadata,
            reported_cost_nano_usd=nano_usd(cost) if is_request else None,  # OpenCode's own cost of the step
            **(tokens or {}),
        )
        for part in results:
            state = part["state"]
            failed = state.get("status") == "error"
            output = state.get("error") if failed else state.get("output")
            state_time = state.get("time") if isinstance(state.get("time"), dict) else {}
            self._emit(
                number,
                info,
                "toolResult",
                output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str),
                str(part.get("id")),
                when=state_time.get("end"),
                tool_name=part.get("tool") if isinstance(part.get("tool"), str) else None,
                metadata=self._metadata(
                    info, "tool_result", call_id=part.get("callID"), title=state.get("title"),
                    status=state.get("status"), is_error=True if failed else None,
                ),
            )  # fmt: skip


def _steps(parts: list[dict]) -> list[dict]:
    """The parts of an assistant message cut into its steps: a `step-start` opens one, a `step-finish` closes
    it. Parts before the first step-start belong to the first step; a patch or snapshot written after a
    step-finish belongs to that step (and is no content)."""
    steps: list[dict] = []
    current: dict | None = None
    for part in parts:
        kind = part.get("type")
        closed = current is not None and current["finish"] is not None
        if kind == "step-start" or current is None or (closed and kind not in ("patch", "snapshot")):
            current = {"parts": [], "finish": None}
            steps.append(current)
        if kind == "step-finish":
            current["finish"] = part
        elif kind not in ("step-start", "patch", "snapshot"):
            current["parts"].append(part)
    return steps


# -- small helpers ------------------------------------------------------------------------------------------


class _closing:
    """`with` for a sqlite3 connection that closes it (sqlite3's own context manager only commits)."""

    def __init__(self, connection: sqlite3.Connection):
        self.connection = connection

    def __enter__(self) -> sqlite3.Connection:
        return self.connection

    def __exit__(self, *exc) -> None:
        self.connection.close()


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_json(path: Path) -> Any:
    try:
        return loads_finite(path.read_bytes())[0]
    except (OSError, ValueError):
        return None


def _loads(data: Any) -> dict | None:
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if not isinstance(data, str):
        return None
    try:
        value, _ = loads_finite(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
