#!/usr/bin/env python3
"""ace-push: upload the new bytes of this machine's agent logs to a central Open ACE.

One file, Python 3.9+ and its standard library only, so that a machine without Open ACE can run it
(`python3 ace-push.py --server https://ace.example.com --key ace_… --once`); `manage.py ace_push` runs the
same code. It watches the agents' log folders (DEFAULT_PATHS, or the paths given) and uploads each log's new
bytes to `POST /api/v1/imports/`, labelled with this machine's name:

- The server is the judge of what it has: before sending a file that changed, the client asks
  `GET /api/v1/imports/files/` how many bytes of it the server holds (and a hash of their head), and sends the
  bytes from there (`offsets`). A retry after a lost response resends bytes the server already holds: it
  compares and skips them, so nothing is stored twice. A file that was replaced or truncated (its head differs
  from the server's, or it is shorter) is sent whole; so is a whole-document `.json` log whenever it changed.
- A small state file (`~/.ace-push/state-<server+machine>.json`, written atomically) remembers what the server
  acknowledged for each file (size, mtime, inode), so an unchanged file costs nothing, not even a question.
- Network errors and 5xx answers are retried with exponential backoff; a 4xx answer is reported with the
  server's reason. A file the server refuses (not an agent log, a line longer than its limit, a compressed log
  that decompresses to too much) is remembered as refused and not sent again until it changes; the request's
  other files go on. A file counts as sent only when the server's answer says what it stored of it; an answer
  of another shape is reported, and nothing it does not confirm is marked as sent. `--once` sends what is new
  and exits (for cron); without it, it polls every `--interval` seconds.

Exit codes of `--once`: 0 everything new was sent (or nothing was new); 1 the server refused some files' parts
(4xx: see the log); 2 bad arguments; 3 the API key was refused; 4 the server could not be reached (or kept
failing, or answered in a shape the client does not understand) after the retries; the next run resumes where
the server's copy ends.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import random
import re
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from stat import S_ISREG

log = logging.getLogger("ace-push")

# BEGIN the tools' layouts: written from ingest_app.importers.registry by `manage.py ace_push_rules`, not by hand
# (tests/ingest_app/test_push.py fails when they drift). DEFAULT_PATHS: the agents' usual log folders
# (docs/operations.md, "Many machines"). TOOL_HOMES: where each tool keeps its folders (an uploaded path starts at
# the last of these in the file's path, so the server sees the layout its importers recognise). DOCUMENT_FOLDERS:
# where whole-document .json logs are kept. SKIPPED_LOGS: (folders, name ending) of files that are no logs.
# ARCHIVED_LOGS: the patterns of the archived logs' names.
DEFAULT_PATHS = (
    "~/.claude/projects",
    "~/.qwen/projects",
    "~/.qwen/tmp",
    "~/.openclaw/agents",
    "~/.clawdbot/agents",
    "~/.moltbot/agents",
    "~/.codex/sessions",
    "~/.codex/archived_sessions",
    "~/.gemini/tmp",
)
TOOL_HOMES = (
    ".claude",
    ".qwen",
    ".openclaw",
    ".clawdbot",
    ".moltbot",
    ".codex",
    ".gemini",
)
DOCUMENT_FOLDERS = (
    (".qwen", "tmp", "chats"),
    (".gemini", "tmp", "chats"),
)
SKIPPED_LOGS = (
    ((".openclaw", "sessions"), ".trajectory.jsonl"),
    ((".clawdbot", "sessions"), ".trajectory.jsonl"),
    ((".moltbot", "sessions"), ".trajectory.jsonl"),
)
ARCHIVED_LOGS = (r"\.jsonl\.(?:reset|deleted)\.[^/]+$",)
# END the tools' layouts
ARCHIVED_LOG = re.compile("|".join(ARCHIVED_LOGS) or "(?!)")

# Copies of the server's rules, kept small; tests/ingest_app/test_push.py compares them with the originals.
# Machine names: sessions_app.schema.MACHINE_PATTERN. Log names: ingest_app.importers.detect.is_log_name.
# Uploaded paths: ingest_app.api.imports.clean_relative_path.
MACHINE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
_UNSAFE = re.compile(r"[^\w.@+\-]")

HEAD_BYTES = 4096  # what the server's head_sha256 covers
MAX_FILES = 100  # files per upload request (the server's limit)
STATE_VERSION = 1
EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_AUTH, EXIT_UNREACHABLE = 0, 1, 2, 3, 4


def default_machine_name() -> str:
    """This host's short name, in the characters a machine name allows."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname().split(".")[0]).strip("._-")
    return name[:100] or "localhost"


def is_log_name(path: str) -> bool:
    """Whether a file is an agent log the server imports: `.jsonl` (but a tool's files that are no logs), an
    archived transcript, or a whole-document `.json` log in a folder where a tool keeps them."""
    name = PurePosixPath(path).name
    parts = PurePosixPath(path).parts
    if any(name.endswith(ending) and _in_order(parts, folders) for folders, ending in SKIPPED_LOGS):
        return False  # e.g. next to OpenClaw's transcripts: a run's trace, not a transcript
    if name.endswith(".jsonl") or ARCHIVED_LOG.search(name):
        return True
    if name.endswith(".json"):
        return any(_in_order(parts, folders) for folders in DOCUMENT_FOLDERS)
    return False


def is_document(path: str) -> bool:
    """A whole-document log: rewritten as it grows, so it is sent whole whenever it changed."""
    return PurePosixPath(path).name.endswith(".json")


def _in_order(parts, wanted) -> bool:
    position = 0
    for part in parts:
        if position < len(wanted) and part == wanted[position]:
            position += 1
    return position == len(wanted)


def upload_name(path: Path, root: Path) -> str:
    """The path a file is uploaded under: from the last tool home in its path (`.claude/projects/…`), else
    relative to the parent of the folder it was found in; cleaned as the server cleans it."""
    parts = path.absolute().parts
    homes = [index for index, part in enumerate(parts) if part in TOOL_HOMES]
    if homes:
        relative = parts[homes[-1] :]
    else:
        base = root.absolute().parent if root.absolute() != path.absolute() else path.absolute().parent
        relative = path.absolute().relative_to(base).parts
    return "/".join(_UNSAFE.sub("_", part)[:200] for part in relative)


def file_head_sha256(path: Path, size: int) -> str:
    limit = min(size, HEAD_BYTES)
    if limit <= 0:
        return ""
    with path.open("rb") as handle:
        return hashlib.sha256(handle.read(limit)).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# -- state ------------------------------------------------------------------------------------------------


class State:
    """What the server acknowledged per local file: {path: {"name", "size", "mtime_ns", "inode", "refused"}}.
    Only an optimisation (an unchanged file is not even asked about): the server's copy is the truth."""

    def __init__(self, path: Path):
        self.path = path
        self.files: dict[str, dict] = {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == STATE_VERSION and isinstance(data.get("files"), dict):
                self.files = data["files"]
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as error:
            log.warning("state file %s unreadable (%s): asking the server about every file", path, error)

    def unchanged(self, path: Path, stat: os.stat_result) -> bool:
        entry = self.files.get(str(path))
        if not isinstance(entry, dict):
            return False
        return (entry.get("size"), entry.get("mtime_ns"), entry.get("inode")) == (
            stat.st_size,
            stat.st_mtime_ns,
            stat.st_ino,
        )

    def acknowledge(self, path: Path, name: str, stat: os.stat_result, refused: str = "") -> None:
        self.files[str(path)] = {
            "name": name,
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "inode": stat.st_ino,
            "refused": refused,
        }

    def save(self) -> None:
        """Written to a temporary file, flushed, then renamed over the old one: a crash leaves one or the other."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"version": STATE_VERSION, "files": self.files}, indent=0, sort_keys=True)
        handle, temporary = tempfile.mkstemp(prefix=".state-", dir=str(self.path.parent))
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def state_path(state_dir: Path, server: str, machine: str) -> Path:
    digest = hashlib.sha256(f"{server.rstrip('/')} {machine}".encode()).hexdigest()[:16]
    return state_dir / f"state-{digest}.json"


# -- the server -------------------------------------------------------------------------------------------


class ServerError(Exception):
    """The server could not be reached, or answered 5xx (retried), or 429."""


class UnexpectedAnswer(ServerError):
    """A 2xx answer that is not what the API answers (a proxy's page, another server): nothing it does not
    confirm is taken as stored."""


class Refused(Exception):
    """A 4xx answer: `status` and the server's JSON body."""

    def __init__(self, status: int, body: dict):
        detail = body.get("detail") if isinstance(body, dict) else None
        super().__init__(f"HTTP {status}: {detail or body}")
        self.status, self.body = status, body if isinstance(body, dict) else {}


class Server:
    def __init__(self, url: str, key: str, *, timeout: float, retries: int, sleep: Callable[[float], None]):
        self.url = url.rstrip("/")
        self.key = key
        self.timeout = timeout
        self.retries = retries
        self.sleep = sleep
        self.bytes_sent = 0  # the log bytes uploaded (parts' bytes, not the multipart framing)

    def request(self, method: str, path: str, *, body: bytes | None = None, content_type: str = "") -> dict:
        """One call, retried with exponential backoff (and jitter) on network errors, 5xx and 429."""
        headers = {"Authorization": f"Bearer {self.key}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        delay = 1.0
        endpoint = path.split("?", 1)[0]  # what a log line names (the query can list a hundred paths)
        for attempt in range(self.retries + 1):
            try:
                request = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
                with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (the user's URL)
                    answer = json.loads(response.read() or b"{}")
                if not isinstance(answer, dict):
                    raise UnexpectedAnswer(f"{method} {endpoint}: the answer is a JSON {type(answer).__name__}, not "
                                           "an object")  # fmt: skip
                return answer
            except urllib.error.HTTPError as error:
                payload = _json_body(error)
                if error.code < 500 and error.code != 429:
                    raise Refused(error.code, payload) from None
                problem = f"HTTP {error.code}: {payload.get('detail') or error.reason}"
            except (urllib.error.URLError, OSError, ValueError) as error:
                problem = str(getattr(error, "reason", None) or error)
            if attempt == self.retries:
                raise ServerError(f"{method} {endpoint}: {problem}")
            wait = delay * (1 + random.random() / 2)
            log.warning("%s %s failed (%s); retrying in %.1f s", method, endpoint, problem, wait)
            self.sleep(wait)
            delay = min(delay * 2, 60.0)
        raise AssertionError("unreachable")

    def holdings(self, machine: str, names: list[str]) -> dict[str, dict]:
        """What the server holds of these uploaded paths: {name: {"stored_bytes", "head_sha256", …}}."""
        found: dict[str, dict] = {}
        batch: list[str] = []
        for name in [*names, None]:
            if name is not None:
                batch.append(name)
            query_length = sum(len(urllib.parse.quote(n)) + 6 for n in batch)
            if batch and (name is None or len(batch) == MAX_FILES or query_length > 3000):
                query = urllib.parse.urlencode(
                    [("machine", machine), ("page_size", str(MAX_FILES)), *(("path", n) for n in batch)]
                )
                page = self.request("GET", f"/api/v1/imports/files/?{query}")
                results = page.get("results")
                if not isinstance(results, list) or not all(_is_holding(entry) for entry in results):
                    raise UnexpectedAnswer(
                        "GET /api/v1/imports/files/: the answer does not list files with their path and stored_bytes"
                    )
                for entry in results:
                    found[entry["path"]] = entry
                batch = []
        return found

    def upload(self, machine: str, parts: list[Part], *, tool: str, user_id: str) -> dict:
        fields: list[tuple[str, str]] = [("machine", machine), ("tool", tool)]
        if user_id:
            fields.append(("user_id", user_id))
        fields.extend(("paths", part.name) for part in parts)
        if all(part.offset is not None for part in parts):  # else a request of whole files (see _next_request)
            fields.extend(("offsets", str(part.offset)) for part in parts)
        body, content_type = _multipart(fields, parts)
        result = self.request("POST", "/api/v1/imports/", body=body, content_type=content_type)
        self.bytes_sent += sum(len(part.data) for part in parts)
        return result


def _is_holding(entry) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("path"), str)
        and _is_count(entry.get("stored_bytes"))
        and isinstance(entry.get("head_sha256", ""), str)
    )


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_body(error: urllib.error.HTTPError) -> dict:
    try:
        data = json.loads(error.read() or b"{}")
    except (ValueError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


def _multipart(fields: list[tuple[str, str]], parts: list[Part]) -> tuple[bytes, str]:
    boundary = f"ace-push-{uuid.uuid4().hex}"
    chunks: list[bytes] = []
    for name, value in fields:
        chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for part in parts:
        filename = PurePosixPath(part.name).name.replace('"', "_")
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode()
        )
        chunks.append(part.data)
        chunks.append(b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


# -- one push -------------------------------------------------------------------------------------------


@dataclass
class LocalFile:
    path: Path
    name: str  # the path it is uploaded under
    stat: os.stat_result


@dataclass
class Part:
    """Bytes [offset, offset + len(data)) of a file; offset None: the file from its start, replacing the
    server's copy."""

    file: LocalFile
    offset: int | None
    data: bytes

    @property
    def name(self) -> str:
        return self.file.name


@dataclass
class PushResult:
    files_seen: int = 0
    files_sent: int = 0
    bytes_sent: int = 0
    refused: list[str] = field(default_factory=list)  # parts the server refused (4xx)
    unreachable: str = ""
    auth_failed: str = ""

    @property
    def exit_code(self) -> int:
        if self.auth_failed:
            return EXIT_AUTH
        if self.unreachable:
            return EXIT_UNREACHABLE
        return EXIT_REFUSED if self.refused else EXIT_OK


@dataclass
class Options:
    server: str
    key: str
    machine: str
    paths: list[str]
    state_dir: Path
    tool: str = "auto"
    user_id: str = ""
    max_bytes: int = 8 * 1024 * 1024
    timeout: float = 120.0
    retries: int = 5


def find_logs(paths: list[str], log_name: Callable[[str], bool]) -> list[LocalFile]:
    """The log files under the paths (a path may be a file), each once, in a stable order. As `ace_import` reads
    a tree: only regular files (a FIFO would block the read forever), and a symbolic link only when what it
    points to lies inside the folder given."""
    found: dict[str, LocalFile] = {}
    for raw in paths:
        root = Path(os.path.expanduser(raw)).absolute()
        if root.is_file():
            candidates = [root]
        elif root.is_dir():
            candidates = []
            for directory, subdirs, names in os.walk(root):
                subdirs.sort()
                candidates.extend(Path(directory) / name for name in sorted(names))
        else:
            continue
        for path in candidates:
            if str(path) in found or not (root == path or log_name(str(path))):
                continue
            try:
                stat = path.stat()
                inside = root == path or not path.is_symlink() or _within(path.resolve(), root.resolve())
            except (OSError, RuntimeError):  # gone, unreadable, a loop of links
                continue
            if not S_ISREG(stat.st_mode) or not inside:
                log.warning("%s: skipped (%s)", path, "not a regular file" if inside else "a link out of the folder")
                continue
            found[str(path)] = LocalFile(path, upload_name(path, root), stat)
    return list(found.values())


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def push_once(options: Options, *, log_name: Callable[[str], bool] = is_log_name, sleep=time.sleep) -> PushResult:
    """Send what is new in the logs under `options.paths`; the state file records what the server acknowledged."""
    result = PushResult()
    state = State(state_path(options.state_dir, options.server, options.machine))
    server = Server(options.server, options.key, timeout=options.timeout, retries=options.retries, sleep=sleep)
    files = find_logs(options.paths, log_name)
    result.files_seen = len(files)
    changed = [f for f in files if not state.unchanged(f.path, f.stat)]
    if not changed:
        log.info("%d log files, nothing new", len(files))
        return result
    try:
        _send(server, options, state, changed, result)
    except Refused as refused:
        if refused.status in (401, 403):
            result.auth_failed = str(refused)
            log.error("the server refused the API key (%s): check --key / ACE_API_KEY", refused)
        else:
            result.refused.append(str(refused))
            advice = " (lower --max-bytes below the server's ACE_MAX_UPLOAD_BYTES)" if refused.status == 413 else ""
            log.error("the server refused the request: %s%s", refused, advice)
    except ServerError as error:
        result.unreachable = str(error)
        log.error("giving up for now: %s (the next run resumes where the server's copy ends)", error)
    finally:
        state.save()
        result.bytes_sent = server.bytes_sent
    log.info(
        "%d log files, %d changed, %d sent (%s bytes)", len(files), len(changed), result.files_sent, result.bytes_sent
    )
    return result


def _send(server: Server, options: Options, state: State, changed: list[LocalFile], result: PushResult) -> None:
    by_name: dict[str, LocalFile] = {}
    for file in changed:
        if file.name in by_name:  # two local files under one uploaded path (e.g. two roots' `projects/a.jsonl`)
            log.warning("%s: uploaded as %s like %s; skipped", file.path, file.name, by_name[file.name].path)
            continue
        by_name[file.name] = file
    held = server.holdings(options.machine, list(by_name))
    todo: dict[str, tuple[LocalFile, int | None]] = {}  # name: (file, offset to send from; None: whole)
    for name, file in by_name.items():
        start = _resume_offset(file, held.get(name))
        if start is not None and start >= file.stat.st_size:
            state.acknowledge(file.path, name, file.stat)  # the server has it all already
            continue
        todo[name] = (file, start)
    retried: set = set()
    while todo:
        parts = _next_request(todo, options.max_bytes)
        try:
            response = server.upload(options.machine, parts, tool=options.tool, user_id=options.user_id)
        except Refused as refused:
            errors = refused.body.get("errors") or {}
            if not isinstance(errors, dict):
                errors = {}
            per_file = bool(errors) and all(str(key).startswith("files.") for key in errors)
            if refused.status in (401, 403) or (refused.status == 413 and not per_file) or refused.status >= 500:
                raise
            if refused.status in (400, 413) and per_file:
                # Files the server will not take (not an agent log, a name it does not read, a line longer than
                # its limit, a compressed log that decompresses to too much: 413): remembered as refused, not
                # sent again until they change; the request's other files go in the next one.
                for key, messages in errors.items():
                    index = int(key.split(".")[1]) if key.split(".")[1].isdigit() else -1
                    if 0 <= index < len(parts):
                        part = parts[index]
                        reason = " ".join(map(str, messages)) if isinstance(messages, list) else str(messages)
                        log.warning("%s: refused by the server: %s", part.name, reason)
                        state.acknowledge(part.file.path, part.name, part.file.stat, refused=reason)
                        todo.pop(part.name, None)
                if all(part.name in todo for part in parts):  # none named: do not loop
                    result.refused.append(str(refused))
                    for part in parts:
                        todo.pop(part.name, None)
                continue
            # The server's copy is not what we thought (a race, a server restored from a backup, a replaced file):
            # ask again, once per file; a 409 means its bytes differ, so the file goes whole.
            names = [part.name for part in parts]
            again = [name for name in names if name not in retried]
            if not again:
                result.refused.append(f"{', '.join(names)}: {refused}")
                log.error("refused by the server: %s (%s)", refused, json.dumps(errors)[:500])
                for part in parts:
                    todo.pop(part.name, None)
                continue
            log.warning(
                "the server's copy of %s is not where expected (%s); asking it again", ", ".join(names), refused
            )
            fresh = server.holdings(options.machine, names)
            for part in parts:
                retried.add(part.name)
                start = None if refused.status == 409 else _resume_offset(part.file, fresh.get(part.name))
                todo[part.name] = (part.file, start)
            continue
        _record(response, parts, todo, state, result)
        state.save()


def _resume_offset(file: LocalFile, held: dict | None) -> int | None:
    """Where to send a file from: the end of the server's copy; None (whole, replacing it) when the file is a
    whole-document log, or is shorter than the server's copy, or starts otherwise."""
    stored = int(held.get("stored_bytes") or 0) if held else 0
    if is_document(file.name):
        same = held and stored == file.stat.st_size and held.get("content_sha256") == file_sha256(file.path)
        return stored if same else None
    if stored == 0:
        return 0
    if stored > file.stat.st_size or held.get("head_sha256") != file_head_sha256(file.path, stored):
        return None
    return stored


def _next_request(todo: dict[str, tuple[LocalFile, int | None]], max_bytes: int) -> list[Part]:
    """The parts of the next request: files in order, up to `max_bytes` of log and MAX_FILES files; a file
    larger than what is left is cut (its next part goes in a later request, from where the server's copy ends),
    except a whole-document log, which is only ever read whole (it goes alone if it is that large). A request
    either replaces files (no offsets) or appends to them, never both."""
    parts: list[Part] = []
    budget = max_bytes
    replacing = None
    for file, start in list(todo.values()):
        if len(parts) == MAX_FILES or budget <= 0:
            break
        if replacing is None:
            replacing = start is None
        elif replacing != (start is None):
            continue
        offset = start or 0
        length = file.stat.st_size - offset
        if is_document(file.name):
            if parts and length > budget:
                continue
        else:
            length = min(length, budget)
        with file.path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(length)
        parts.append(Part(file, start, data))
        budget -= max(len(data), 1)
    return parts


def _record(response: dict, parts: list[Part], todo: dict, state: State, result: PushResult) -> None:
    """What the server acknowledged, file by file: a file it holds to its end is acknowledged in the state; a
    file cut short continues from the server's copy's end. A part the answer says nothing about (no per-file
    result, or one without what it stored) is not acknowledged: UnexpectedAnswer names it, and the next run asks
    the server what it holds."""
    files = response.get("files")
    if not isinstance(files, list):
        for part in parts:
            todo.pop(part.name, None)
        raise UnexpectedAnswer(
            "POST /api/v1/imports/ answered without per-file results ('files'): "
            f"{', '.join(part.name for part in parts)} not marked as sent"
        )
    answers = {entry.get("path"): entry for entry in files if isinstance(entry, dict)}
    unconfirmed = []
    for part in parts:
        file, answer = part.file, answers.get(part.name)
        start = part.offset or 0
        end = start + len(part.data)
        status = answer.get("status") if answer else None
        stored = answer.get("stored_bytes") if answer else None
        if status not in ("imported", "unchanged", "refused") or (status != "refused" and not _is_count(stored)):
            unconfirmed.append(part.name)
            todo.pop(part.name, None)
            continue
        log.info(
            "sent %s: bytes %d-%d (%d bytes%s) -> %s, %s messages",
            part.name,
            start,
            end,
            len(part.data),
            ", replacing the server's copy" if part.offset is None else "",
            status,
            answer.get("messages", 0),
        )
        if status == "refused":
            reason = str(answer.get("reason") or "refused")
            log.warning("%s: refused by the server: %s", part.name, reason)
            state.acknowledge(file.path, part.name, file.stat, refused=reason)
            todo.pop(part.name, None)
            continue
        if stored >= file.stat.st_size:
            state.acknowledge(file.path, part.name, file.stat)
            todo.pop(part.name, None)
            result.files_sent += 1
        else:
            todo[part.name] = (file, stored)
    if unconfirmed:
        raise UnexpectedAnswer(
            f"POST /api/v1/imports/ answered without saying what it stored of {', '.join(unconfirmed)}: not marked "
            "as sent"
        )


# -- the command line -------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="Log folders or files (default: the agents' usual folders)"
    )
    parser.add_argument("--server", required=True, help="The Open ACE base URL, e.g. https://ace.example.com")
    parser.add_argument("--key", default=os.environ.get("ACE_API_KEY", ""), help="An API key (default: $ACE_API_KEY)")
    parser.add_argument("--machine", default="", help="This machine's name (default: the host name)")
    parser.add_argument("--once", action="store_true", help="Send what is new and exit (for cron)")
    parser.add_argument("--interval", type=float, default=60.0, help="Seconds between polls (default: 60)")
    parser.add_argument(
        "--state-dir", default="~/.ace-push", help="Where the state file is kept (default: ~/.ace-push)"
    )
    parser.add_argument("--tool", default="auto", help="Force a log format (default: auto, detected per file)")
    parser.add_argument("--user-id", default="", help="Attribute new sessions to this user (default: the log's)")
    parser.add_argument(
        "--max-bytes", type=int, default=8 * 1024 * 1024, help="Log bytes per request at most (default: 8 MiB)"
    )
    parser.add_argument("--retries", type=int, default=5, help="Retries of a failed request, with backoff (default: 5)")
    parser.add_argument("--timeout", type=float, default=120.0, help="Seconds to wait for an answer (default: 120)")


def options_from(arguments: dict) -> Options:
    """Options from parsed arguments; ValueError says what is wrong."""
    machine = arguments.get("machine") or default_machine_name()
    if not re.fullmatch(MACHINE_PATTERN, machine):
        raise ValueError(f"--machine {machine!r}: letters, digits, '.', '_' and '-' only, up to 100")
    if not arguments.get("key"):
        raise ValueError("an API key is needed: --key or $ACE_API_KEY (`manage.py ace_apikey create` on the server)")
    server = arguments["server"]
    if urllib.parse.urlsplit(server).scheme not in ("http", "https"):
        raise ValueError(f"--server {server!r}: an http:// or https:// URL is expected")
    if arguments.get("max_bytes", 1) < 1 or arguments.get("interval", 1) <= 0:
        raise ValueError("--max-bytes and --interval must be positive")
    return Options(
        server=server,
        key=arguments["key"],
        machine=machine,
        paths=list(arguments.get("paths") or DEFAULT_PATHS),
        state_dir=Path(os.path.expanduser(arguments.get("state_dir") or "~/.ace-push")),
        tool=arguments.get("tool") or "auto",
        user_id=arguments.get("user_id") or "",
        max_bytes=arguments.get("max_bytes") or 8 * 1024 * 1024,
        timeout=arguments.get("timeout") or 120.0,
        retries=max(arguments.get("retries", 5), 0),
    )


def run(options: Options, *, once: bool, interval: float, log_name: Callable[[str], bool] = is_log_name) -> int:
    """`--once`: one push, its exit code. Otherwise poll until interrupted; after a failed push, wait longer
    (doubling up to ten intervals) before the next."""
    log.info("pushing %s to %s as machine %s", ", ".join(options.paths), options.server, options.machine)
    if once:
        return push_once(options, log_name=log_name).exit_code
    wait = interval
    while True:
        result = push_once(options, log_name=log_name)
        if result.auth_failed:
            return EXIT_AUTH
        wait = interval if result.exit_code == EXIT_OK else min(wait * 2, interval * 10)
        try:
            time.sleep(wait)
        except KeyboardInterrupt:
            return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ace-push", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        options = options_from(vars(arguments))
    except ValueError as error:
        parser.error(str(error))
    try:
        return run(options, once=arguments.once, interval=arguments.interval)
    except KeyboardInterrupt:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
