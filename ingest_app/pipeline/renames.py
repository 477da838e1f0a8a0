"""A log file that was imported under another name: its `ImportedFile` row follows it.

A tool may rename a log it still counts (`Tool.renamed_from`): OpenClaw renames a session's live transcript
`<session>.jsonl` to `<session>.jsonl.reset.<timestamp>` on /reset (`.deleted.<timestamp>` when the session is
deleted): the same bytes under a new name, the history of the same session. Read as a new file, it would be
read again from its first byte; its messages would be stored once (their external ids), but every line would be
parsed again and the import would report it as new. Instead the row of the old name is moved to the new one,
and reading goes on from its offset.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ingest_app.importers import registry
from ingest_app.importers.jsonl import read_head
from ingest_app.importers.limits import LogLimitExceeded
from ingest_app.models import ImportedFile
from ingest_app.pipeline.batch import fingerprint
from ingest_app.pipeline.paths import record_path
from sessions_app.models import Tenant


def follow_rename(
    *, tenant: Tenant, path: Path, stat: os.stat_result, uploaded: bool
) -> tuple[ImportedFile, str] | None:
    """The row of the file `path` was imported as before it was renamed, now moved to `path`, and the old
    path; None when `path` is not a renamed file that was imported.

    The old name is the one its tool renamed it from (OpenClaw: `<session>.jsonl` in the same folder). It is the
    same file when the bytes imported before are unchanged (the row's fingerprint at its offset) and its session
    header names the same session (`Tool.header_session_id`), and, on this machine, when it is the same inode on
    the same device (an uploaded file is written anew each time, so there the inode says nothing and the bytes
    and the session id decide). A file the old name still points to is not taken from it."""
    tool, old_name = next(
        ((tool, old) for tool in registry.TOOLS if tool.renamed_from and (old := tool.renamed_from(path.name))),
        (None, None),
    )
    if tool is None:
        return None
    old_path = path.with_name(old_name)
    record = ImportedFile.objects.filter(tenant=tenant, path=record_path(old_path)).first()
    if record is None or not record.offset or not record.head_hash or stat.st_size < record.offset:
        return None
    if not uploaded:
        if (record.device, record.inode) != (stat.st_dev, stat.st_ino) or _same_inode(old_path, stat):
            return None
    if record.agent_session_id and _header_session_id(path, tool.header_session_id) != record.agent_session_id:
        return None
    if fingerprint(path, record.offset) != record.head_hash:
        return None
    if not ImportedFile.objects.filter(pk=record.pk, path=record_path(old_path)).update(path=record_path(path)):
        return None  # another import moved it first
    record.path = record_path(path)
    return record, str(old_path)


def _same_inode(path: Path, stat: os.stat_result) -> bool:
    try:
        other = path.stat()
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (stat.st_dev, stat.st_ino)


def _header_session_id(path: Path, session_id) -> str:
    """The session id the log's header (its first line) names (`session_id`, the tool's reading of it), or ""
    when it has none."""
    try:
        head = read_head(path, limit=1)
    except LogLimitExceeded:  # a first line too long: refused when the file is judged
        return ""
    for line in head:
        try:
            data = json.loads(line)
        except ValueError:
            return ""
        if isinstance(data, dict) and session_id(data):
            return session_id(data)
    return ""
