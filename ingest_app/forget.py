"""Forgetting a user (sessions_app.services.forget, docs/portability.md): what the ingest side keeps of them goes
with the rest, in the forgetting transaction, through the ledger's signal `user_forgetting` (connected in apps.py).

While their sessions are still there to say which: the raw telemetry of their sessions and messages or naming them
(an exporter's `user.id`, `user.email`, … — metric points too), the import rows of their log files, the import
sources that attribute logs to them. Last, handed back to the ledger to run after every row is gone: the uploaded
log files they uploaded (so a later upload starts from nothing): their segments, then after the commit their bytes
in the storage and this host's copies under ACE_DATA_DIR/uploads, each file under its upload lock until the commit
(a deleted file is not rolled back).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.db.models import Q

from ingest_app.models import ImportedFile, ImportSource, TelemetryRecord
from ingest_app.pipeline.paths import record_path
from ingest_app.pipeline.upload_copies import stored_uploads_delete, upload_root
from platform_kit.db import cascade_delete
from sessions_app.models import Message, Session, Tenant

# Where an OpenTelemetry exporter names who it runs for (Claude Code: user.email, user.account_uuid, user.id; the
# semantic conventions: enduser.id), on a record's attributes or its resource.
TELEMETRY_USER_KEYS = ("user.id", "user.email", "user.account_uuid", "enduser.id")


def user_forgetting_receiver(
    sender, *, tenant_id, user_id: str, dry_run: bool, last: Callable[[Callable[[], dict[str, int]]], None], **kwargs
) -> dict[str, int]:
    """signals.user_forgetting: the user's telemetry, log-file rows and import sources go now ({model label: rows});
    the stored copies of their uploads are counted or deleted last (`last`)."""
    tenant = Tenant.objects.get(pk=tenant_id)
    deleted: dict[str, int] = {}

    def add(counts: dict[str, int]) -> None:
        for label, count in counts.items():
            deleted[label] = deleted.get(label, 0) + count

    quote = connection.ops.quote_name
    params = [tenant.pk, user_id]
    sessions = f"SELECT id FROM {quote(Session._meta.db_table)} WHERE tenant_id = %s AND user_id = %s"
    messages = f"SELECT id FROM {quote(Message._meta.db_table)} WHERE session_id IN ({sessions})"
    # SET_NULL relations of the ledger's rows: deleted here rather than cleared when the sessions go.
    add(cascade_delete(TelemetryRecord, *_telemetry_of_user(sessions, messages, params)))
    uploaded = _log_files_forget(tenant=tenant, user_id=user_id, add=add)
    # A server folder whose logs are attributed to the user (its files were dealt with above).
    add(cascade_delete(ImportSource, "tenant_id = %s AND user_id = %s", params))

    def uploads_forget() -> dict[str, int]:
        files = stored_uploads_delete(tenant=tenant, paths=uploaded, dry_run=dry_run)
        return {f"{ImportedFile._meta.label} (uploaded copy)": files} if files else {}

    last(uploads_forget)
    return deleted


def _log_files_forget(*, tenant: Tenant, user_id: str, add) -> list[str]:
    """The import rows of the user's log files (their sessions', and those of the import sources attributing logs
    to them). An uploaded file's row goes (its stored copy goes last: the paths are returned), so a later upload
    starts from nothing. A file on the server (an import source's, one given to `ace_import`) is not ours to
    delete: its row is kept at its read position, stripped of its session, parser state and figures, so the
    next scan reads only lines written after today instead of importing the forgotten ones again."""
    files = ImportedFile.objects.filter(tenant=tenant).filter(Q(session__user_id=user_id) | Q(source__user_id=user_id))
    prefix = f"{record_path(upload_root(tenant))}/"
    uploaded = list(files.filter(path__startswith=prefix).values_list("path", flat=True))
    if uploaded:
        add(cascade_delete(ImportedFile, "tenant_id = %s AND path = ANY(%s)", [tenant.pk, uploaded]))
    kept = files.exclude(path__startswith=prefix).update(
        session=None, agent_session_id="", carry={}, pending=0, lines_read=0, messages_imported=0, issues=0,
        last_error="",
    )  # fmt: skip
    if kept:
        add({f"{ImportedFile._meta.label} (server file, read position kept)": kept})
    return uploaded


def _telemetry_of_user(sessions: str, messages: str, params: list) -> tuple[str, list]:
    """The raw telemetry of the user's sessions and messages, and any that names them: a metric point or event
    whose attributes or resource carry their id, or their session's id without its session row (a deleted
    session's points are stored unattached)."""
    named = " OR ".join(
        f"{column} ->> '{key}' = %s" for column in ("attributes", "resource") for key in TELEMETRY_USER_KEYS
    )
    agent_ids = sessions.replace("SELECT id FROM", "SELECT agent_session_id FROM", 1) + " AND agent_session_id <> ''"
    where = (
        f"session_id IN ({sessions}) OR message_id IN ({messages})"
        f" OR (tenant_id = %s AND ({named} OR attributes ->> 'session.id' IN ({agent_ids})))"
    )
    user_id = params[1]
    return where, [*params, *params, params[0], *[user_id] * (2 * len(TELEMETRY_USER_KEYS)), *params]
