"""The sessions an import's files go to: found by (tenant, tool, the tool's session id), created when missing
(under an advisory lock per id), locked for the batch and described from their logs; the round of its parent
that spawned a sub-agent; the user a new session belongs to."""

from __future__ import annotations

import json
import os
import pwd
import re
import uuid
from pathlib import Path

from django.db import connection
from django.utils import timezone

from ingest_app.importers import ParsedSession, ParseResult, describe_layout
from ingest_app.pipeline.plan import FileInBatch, ImportOptions
from platform_kit.db import update_rows
from platform_kit.redaction import redact, redact_text
from sessions_app.models import Message, Session

UNKNOWN_USER = "unknown"
_HOME = re.compile(r"^(?:/home|/Users|[A-Za-z]:[\\/]+Users)[\\/]+([^\\/]+)")
_NAME_RANK = {"": 0, "fallback": 1, "prompt": 2, "summary": 3, "title": 4}


class SessionResolver:
    """The tenant's sessions by (tool, agent session id), looked up once per run, and the sessions a batch's
    files go to."""

    def __init__(self, *, options: ImportOptions):
        self.options = options
        # Sessions by (tool, agent session id), and the ids known to have none yet: looked up once per run.
        self.by_key: dict[tuple[str, str], Session] = {}
        self.absent: set[str] = set()
        self.made_in_batch: list[tuple[str, str]] = []  # made in the current batch's transaction

    def load(self, files: list[Path]) -> None:
        """The tenant's sessions that the files' paths name, in one query (a file's own content may name
        another; that one is looked up when it is met)."""
        ids = set()
        for path in files:
            layout = describe_layout(path)
            ids.add((layout.parent_session_id if layout.is_subagent else layout.file_key)[:255])
        ids.discard("")
        if not ids:
            return
        for session in self._machine_sessions(ids):
            self.by_key.setdefault((session.tool, session.agent_session_id), session)
        self.absent = ids - {key[1] for key in self.by_key}

    def forget_absent(self) -> None:
        """No id is known to have no session any more (other processes may have made them)."""
        self.absent = set()

    def start_batch(self) -> None:
        self.made_in_batch = []

    def forget_made_in_batch(self) -> None:
        """The sessions the batch's transaction made, forgotten: it was rolled back."""
        for key in self.made_in_batch:
            self.by_key.pop(key, None)

    def find(self, tool: str, agent_session_id: str) -> Session | None:
        key = agent_session_id[:255]
        session = self.by_key.get((tool, key))
        if session is None and key not in self.absent:
            session = self.lookup([(tool, key)]).get((tool, key))
        return session

    def lookup(self, keys) -> dict[tuple[str, str], Session]:
        """The tenant's oldest session for each (tool, agent session id), in one query; remembered."""
        keys = set(keys)
        found: dict[tuple[str, str], Session] = {}
        for session in self._machine_sessions({key[1] for key in keys}):
            key = (session.tool, session.agent_session_id)
            if key in keys:
                found.setdefault(key, session)
        self.by_key.update(found)
        return found

    def _machine_sessions(self, agent_session_ids) -> list[Session]:
        """The tenant's sessions with these agent session ids on this import's machine, oldest first; then
        those without a machine (imported before sessions had one), which the machine's files continue. Two
        machines' sessions never merge, even if their tools gave them the same id."""
        rows = Session.objects.filter(
            tenant=self.options.tenant,
            agent_session_id__in=agent_session_ids,
            machine__in={self.options.machine, ""},
        )
        return sorted(rows, key=lambda session: (session.machine != self.options.machine, session.created_at))

    def resolve(self, files: list[FileInBatch]) -> int:
        """Give each file the session its messages go to, locked for the batch; create those that do not
        exist yet (described from their files). Returns how many were created."""
        wanted = self._wanted(files)
        self._look_up_or_lock_for_creation({key for key in wanted.values() if isinstance(key, tuple)})
        new: dict[tuple[str, str], Session] = {}
        for file, key in wanted.items():
            if isinstance(key, tuple) and key not in self.by_key and key not in new:
                new[key] = self._new_session(file)
        existing_ids = {
            key if not isinstance(key, tuple) else self.by_key[key].pk for key in wanted.values() if key not in new
        }
        locked = {
            session.pk: session
            for session in Session.objects.select_for_update().filter(pk__in=existing_ids).order_by("pk")
        }
        by_pk = {**locked, **{session.pk: session for session in new.values()}}
        with_messages: set[uuid.UUID] = {pk for pk, session in locked.items() if session.last_seq}
        changed: dict[uuid.UUID, set] = {}
        for file, key in wanted.items():
            session_id = key if not isinstance(key, tuple) else (new[key] if key in new else self.by_key[key]).pk
            session = by_pk.get(session_id)
            if session is None or session.deleted_at is not None:
                file.refused = "its session was deleted through the API; not imported"
                continue
            file.session = session
            file.record.session_id = session.pk
            file.record.agent_session_id = file.parsed.session.attributed_session_id[:255]
            if file.has_messages:
                fields = describe_session(
                    session, file.parsed.session, file.parsed.messages, has_messages=session.pk in with_messages
                )
                if session.pk in locked:
                    changed.setdefault(session.pk, set()).update(fields)
                with_messages.add(session.pk)
        self.made_in_batch = list(new)
        if new:
            Session.objects.bulk_create(new.values())
            self.by_key.update(new)
        self._save_described(changed, by_pk)
        return len(new)

    @staticmethod
    def _wanted(files: list[FileInBatch]) -> dict[FileInBatch, tuple[str, str] | uuid.UUID]:
        """Each file's session: the one its row names while the log names the same, else (tool, agent session
        id). Files without messages and without a session yet want none."""
        wanted: dict[FileInBatch, tuple[str, str] | uuid.UUID] = {}
        for file in files:
            record, info = file.record, file.parsed.session
            if not file.has_messages and record.session_id is None:
                continue
            key = info.attributed_session_id[:255]
            if record.session_id is not None and key == record.agent_session_id:
                wanted[file] = record.session_id
            else:
                wanted[file] = (file.parsed.tool, key)
        return wanted

    def _look_up_or_lock_for_creation(self, keys: set[tuple[str, str]]) -> None:
        """The sessions of `keys` not known yet, looked up; the ids of those still missing, locked for their
        creation in this transaction, and looked up again."""
        missing = [key for key in keys if key not in self.by_key and key[1] not in self.absent]
        if missing:
            self.lookup(missing)
        to_create = sorted(key for key in keys if key not in self.by_key)
        if to_create:
            lock_for_creation(tenant_id=self.options.tenant.pk, keys=to_create)
            self.lookup(to_create)  # created by another import meanwhile?

    @staticmethod
    def _save_described(changed: dict[uuid.UUID, set], by_pk: dict[uuid.UUID, Session]) -> None:
        """The existing sessions whose description changed, saved (the fields that changed, `updated_at`)."""
        described = [by_pk[pk] for pk, fields in changed.items() if fields]
        if described:
            now = timezone.now()
            for session in described:
                session.updated_at = now
            fields = set().union(*changed.values())
            update_rows(Session, described, [*sorted(fields), "updated_at"])

    def _new_session(self, file: FileInBatch) -> Session:
        info, stat = file.parsed.session, file.stat
        user = (
            self.options.user_id
            or info.user
            or user_from_cwd(info.cwd)
            or ("" if self.options.uploaded else _file_owner(stat))
            or UNKNOWN_USER
        )
        return Session(
            tenant=self.options.tenant,
            tool=file.parsed.tool,
            agent_session_id=info.attributed_session_id[:255],
            user_id=user[:255],
            project=info.project[:255],
            machine=self.options.machine,
            started_at=info.started_at or timezone.now(),
            metadata={"imported": True},
        )


def lock_for_creation(*, tenant_id, keys: list[tuple[str, str]]) -> None:
    """Lock the (tool, agent session id)s of sessions about to be made, until the transaction ends: one
    creator per (tenant, tool, id) at a time — an import, or the OTLP receiver (ingest_app.otlp) — in one
    order. Look the sessions up again after it: another creator may have made them meanwhile."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(key)) FROM unnest(%s::text[]) WITH ORDINALITY AS t(key, n) "
            "ORDER BY n",
            [[f"{tenant_id}:{tool}:{key}" for tool, key in sorted(keys)]],
        )


class SpawnRounds:
    """The rounds in which sessions spawned their sub-agents: a sub-agent file joins the round of its parent
    that spawned it (docs/accounting.md, Sub-agents)."""

    def __init__(self, *, sessions: SessionResolver, tool: str | None):
        self.sessions = sessions
        self.tool = tool
        # The rounds in which a session spawned its sub-agents, from the files read in this run:
        # {(tool, agent session id, "agent" | "tool_use", id): conversation reference or None}.
        self.spawns: dict[tuple, str | None] = {}

    def subagent_seed(self, path: Path) -> dict | None:
        """The carry a sub-agent file's first read starts with: the round that spawned it, when known."""
        layout = describe_layout(path)
        if not layout.is_subagent or not layout.parent_session_id or not layout.agent_id:
            return None
        tool = layout.tool or self.tool
        if not tool:
            return None
        spawn = self._spawn_round(tool, layout.parent_session_id, "agent", layout.agent_id)
        if not spawn:
            meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
            try:
                tool_use_id = json.loads(meta.read_text(encoding="utf-8")).get("toolUseId")
            except (OSError, ValueError, AttributeError):
                tool_use_id = None
            if isinstance(tool_use_id, str) and tool_use_id:
                spawn = self._spawn_round(tool, layout.parent_session_id, "tool_use", tool_use_id)
        return {"conversation": spawn} if spawn else None

    def _spawn_round(self, tool: str, parent_id: str, kind: str, value: str) -> str | None:
        """The conversation reference of the parent's round that spawned an agent: from the parent's file as
        this run read it, else from the database (the parent was imported before)."""
        spawn = self.spawns.get((tool, parent_id[:255], kind, value))
        if spawn:
            return spawn
        parent = self.sessions.find(tool, parent_id)
        if parent is None:
            return None
        messages = Message.objects.filter(session=parent).exclude(conversation=None)
        if kind == "agent":
            messages = messages.filter(metadata__spawned_agent_id=value)
        else:
            messages = messages.filter(role="assistant", tool_calls__contains=[{"id": value}])
        return messages.values_list("conversation__conversation_id", flat=True).first()

    def note(self, parsed: ParseResult) -> None:
        """Remember the rounds that spawned sub-agents, for the sub-agent files read after this one. A
        message without a reference of its own (None) leaves the lookup to the database."""
        key = (parsed.tool, parsed.session.attributed_session_id[:255])
        for message in parsed.messages:
            agent = message.metadata.get("spawned_agent_id")
            if agent:
                self.spawns.setdefault((*key, "agent", agent), message.conversation)
            if message.tool_calls and message.role == "assistant":
                for call in message.tool_calls:
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        self.spawns.setdefault((*key, "tool_use", call["id"]), message.conversation)


def describe_session(session: Session, info: ParsedSession, messages, *, has_messages: bool) -> set:
    """Name, project, start and metadata from what the log says; the fields that changed."""
    metadata = dict(session.metadata)
    changed = set()
    if info.is_subagent:
        agent = {"agent_session_id": info.agent_session_id, **info.metadata.get("agent_meta", {})}
        subagents = dict(metadata.get("subagents") or {})
        if subagents.get(info.agent_session_id) != agent and len(subagents) < 200:
            subagents[info.agent_session_id] = agent
            metadata["subagents"] = subagents
    else:
        for name, value in (("cwd", info.cwd), ("git_branch", info.git_branch), ("version", info.version)):
            if value:
                metadata[name] = value
        for name, value in info.metadata.items():
            if name not in ("agent_meta",) and isinstance(value, str | int | bool | list | dict):
                metadata[name] = value
        # Roll-ups are keyed by project: once the session has messages its project is fixed.
        if info.project and not session.project and not has_messages:
            session.project = info.project[:255]
            changed.add("project")
    name, source = _name_from_log(session, info, messages)
    current = metadata.get("name_source", "" if not session.name else "user")
    if name and current != "user" and _NAME_RANK[source] > _NAME_RANK.get(current, 0):
        session.name = redact_text(" ".join(name.split()))[:255]
        metadata["name_source"] = source
        changed.add("name")
    if info.started_at and info.started_at < session.started_at:
        session.started_at = info.started_at
        changed.add("started_at")
    metadata = redact(metadata)  # what the log says about the session (a title, an agent's settings) may hold one
    if metadata != session.metadata:
        session.metadata = metadata
        changed.add("metadata")
    return changed


def _name_from_log(session: Session, info: ParsedSession, messages) -> tuple[str, str]:
    """The best name the log gives the session and where it comes from (a `_NAME_RANK` key), or ("", "")."""
    name, source = "", ""
    if isinstance(info.metadata.get("title"), str) and info.metadata["title"].strip():
        name, source = info.metadata["title"], "title"
    elif isinstance(info.metadata.get("summary"), str) and info.metadata["summary"].strip():
        name, source = info.metadata["summary"], "summary"
    elif not info.is_subagent:
        prompt = next(
            (m.metadata.get("body") or m.content for m in messages if m.role == "user" and m.content.strip()), ""
        )
        if prompt:
            name, source = prompt, "prompt"
        elif not session.name and info.project:
            name, source = f"{info.project} {info.agent_session_id[:8]}", "fallback"
    return name, source


def user_from_cwd(cwd: str) -> str:
    match = _HOME.match(cwd or "")
    return match.group(1) if match else ""


def _file_owner(stat: os.stat_result) -> str:
    try:
        return pwd.getpwuid(stat.st_uid).pw_name
    except (KeyError, AttributeError):
        return ""
