"""Importing a memory export into a tenant: every record through `record_create`, its history restored.

- Idempotent: a record whose exported id was imported into the tenant before (a `RecordImport` row), or that
  is a record of the tenant already (an export of this tenant restored into it), is left alone.
- A valid record saying what a valid record of the same user already says merges into it, as any restatement
  does; an invalidated one is stored as a record of its own (it is history, never recalled).
- A created record gets the exported revisions as its history, and its validity, revision number and times
  (`memory_app.services.record_history_restore`: memory's tables are written by memory's services).
- Provenance: a source session of the tenant with the exported id, else one with the same tool and
  `agent_session_id`; a source message with the exported id, else the message of that session with the same
  `external_id`. What matches nothing is kept on the `RecordImport` row as the source instance's ids.
- One transaction for the whole import, under a lock per tenant: two imports of one file store it once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.db import connection, transaction

from memory_app.models import Record
from memory_app.services import record_create, record_history_restore
from portability_app.models import RecordImport
from sessions_app.models import Message, Session, Tenant


@dataclass(frozen=True)
class ImportSummary:
    records: int  # record lines read
    created: int  # new records, with their history
    merged: int  # merged into a valid record of the tenant that said the same thing
    unchanged: int  # imported before, or already records of the tenant
    external_sources: int  # exported sources that name no session or message of the tenant (kept as references)

    def as_dict(self) -> dict:
        return asdict(self)


def records_import(*, tenant: Tenant, header: dict, records: list[dict], actor: str = "import") -> ImportSummary:
    """Import the validated lines of `portability_app.memory.lines.parse_export`."""
    created = merged = unchanged = external = 0
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"memory-import:{tenant.pk}"])
        ids = [record["id"] for record in records]
        done = set(
            RecordImport.objects.filter(tenant=tenant, origin_record_id__in=ids).values_list(
                "origin_record_id", flat=True
            )
        )
        done |= set(Record.objects.filter(tenant=tenant, pk__in=ids).values_list("pk", flat=True))
        todo = [record for record in records if record["id"] not in done]
        unchanged = len(records) - len(todo)
        sources = _SourceMatcher(tenant=tenant, records=todo)
        for record in todo:
            session_ids, message_ids, missing = sources.resolve(record["sources"])
            write = record_create(
                tenant=tenant,
                user_id=record["user_id"],
                namespace=record["namespace"],
                type=record["type"],
                content=record["content"],
                fields=record["fields"],
                confidence=record["confidence"],
                valid_from=record["valid_from"],
                valid_until=record["valid_until"],
                strategy=record["strategy"],
                strategy_version=record.get("strategy_version"),
                source_session_ids=session_ids,
                source_message_ids=message_ids,
                actor=actor,
                merge_restatements=record["valid"],
            )
            if write.created:
                record_history_restore(record=write.record, line=record)
                created += 1
            else:
                merged += 1
            external += len(missing["sessions"]) + len(missing["messages"])
            RecordImport.objects.create(
                tenant=tenant,
                origin_record_id=record["id"],
                origin_tenant=str(header.get("tenant") or "")[:255],
                record=write.record,
                outcome=RecordImport.Outcome.CREATED if write.created else RecordImport.Outcome.MERGED,
                external_sources=missing,
                actor=actor,
            )
    return ImportSummary(
        records=len(records), created=created, merged=merged, unchanged=unchanged, external_sources=external
    )


class _SourceMatcher:
    """Finds the exported sources among the tenant's live sessions and messages, a few queries for a whole
    import: by id first, then by the ids the agent gave them."""

    def __init__(self, *, tenant: Tenant, records: list[dict]):
        exported_sessions = [s for r in records for s in r["sources"]["sessions"]]
        exported_messages = [m for r in records for m in r["sources"]["messages"]]
        live_sessions = Session.objects.filter(tenant=tenant, deleted_at__isnull=True)
        self.session_ids = set(
            live_sessions.filter(pk__in={s["id"] for s in exported_sessions}).values_list("pk", flat=True)
        )
        agent_ids = {s["agent_session_id"] for s in exported_sessions if s["agent_session_id"]}
        self.by_agent_id = {}
        for pk, tool, agent_session_id in (
            live_sessions.filter(agent_session_id__in=agent_ids)
            .order_by("started_at")
            .values_list("pk", "tool", "agent_session_id")
        ):
            self.by_agent_id.setdefault((tool, agent_session_id), pk)
        # Where each exported session is here: the same id, or the session with the same agent id.
        self.session_here = {}
        for s in exported_sessions:
            here = s["id"] if s["id"] in self.session_ids else self.by_agent_id.get((s["tool"], s["agent_session_id"]))
            if here is not None:
                self.session_here[s["id"]] = here
        live_messages = Message.objects.filter(tenant=tenant, session__deleted_at__isnull=True)
        self.message_ids = set(
            live_messages.filter(pk__in={m["id"] for m in exported_messages}).values_list("pk", flat=True)
        )
        wanted = {
            (self.session_here[m["session"]], m["external_id"])
            for m in exported_messages
            if m["id"] not in self.message_ids and m["external_id"] and m.get("session") in self.session_here
        }
        self.by_external_id = {}
        if wanted:
            for pk, session_id, external_id in live_messages.filter(
                session_id__in={session for session, _ in wanted}, external_id__in={ext for _, ext in wanted}
            ).values_list("pk", "session_id", "external_id"):
                self.by_external_id[(session_id, external_id)] = pk

    def resolve(self, sources: dict) -> tuple[list, list, dict]:
        """(session ids here, message ids here, {sessions, messages} not found here as exported)."""
        sessions, messages, missing = [], [], {"sessions": [], "messages": []}
        for s in sources["sessions"]:
            here = self.session_here.get(s["id"])
            if here is None:
                missing["sessions"].append({**s, "id": str(s["id"])})
            else:
                sessions.append(here)
        for m in sources["messages"]:
            if m["id"] in self.message_ids:
                here = m["id"]
            else:
                here = self.by_external_id.get((self.session_here.get(m.get("session")), m["external_id"]))
            if here is None:
                missing["messages"].append(
                    {**m, "id": str(m["id"]), "session": str(m["session"]) if m.get("session") else None}
                )
            else:
                messages.append(here)
        return sessions, messages, missing
