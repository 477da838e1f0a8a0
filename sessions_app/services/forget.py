"""Forgetting a user (the right to be forgotten, docs/portability.md): every row of theirs in a tenant deleted,
in one transaction, with an audit row that says what went and when without saying who.

What goes: the user's sessions and everything in them (conversations, messages with their keyword-search
vectors, LLM requests, turns, state versions, per-model usage, the import rows of their log files), the raw
telemetry of their sessions or naming them (an exporter's `user.id`, `user.email`, … — metric points too), the
uploaded copies of their log files under ACE_DATA_DIR/uploads (so a later upload starts from nothing), their
usage roll-ups (so the tenant's totals drop by what they used), the budgets scoped to them (with their usage,
crossings and change log) and their usage in the tenant's other budgets, the import sources that attribute
logs to them, and what the other apps keep of them (signal `user_forgetting`: records with their revisions and
vectors, message vectors, strategy runs, webhook deliveries about them). docs/security.md says what it cannot
reach (the database's WAL and backups, access logs). Other users and other tenants are not touched: another
tenant's user of the same id stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import salted_hmac

from ingest_app.pipeline.uploads import stored_uploads_delete, upload_root
from platform_kit.db import cascade_delete
from platform_kit.models import ServerErrorTally
from sessions_app.models import (
    Conversation,
    ForgetAudit,
    ImportedFile,
    ImportSource,
    LlmRequest,
    Message,
    RetentionEvent,
    Session,
    StateVersion,
    TelemetryRecord,
    Tenant,
    Turn,
    UsageDaily,
    UsageHourly,
)
from sessions_app.services.budgets import user_budgets_forget
from sessions_app.signals import user_forgetting

# Where an OpenTelemetry exporter names who it runs for (Claude Code: user.email, user.account_uuid, user.id; the
# semantic conventions: enduser.id), on a record's attributes or its resource.
TELEMETRY_USER_KEYS = ("user.id", "user.email", "user.account_uuid", "enduser.id")


@dataclass(frozen=True)
class Forgotten:
    deleted: dict[str, int]  # rows per model label
    dry_run: bool
    audit: ForgetAudit | None  # None for a dry run

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


def user_hash(*, tenant_id, user_id: str) -> str:
    """The key the audit keeps instead of the user id (ForgetAudit.user_hash)."""
    return salted_hmac("open-ace.forget-user", f"{tenant_id}:{user_id}", algorithm="sha256").hexdigest()


def user_forget(*, tenant: Tenant, user_id: str, actor: str, dry_run: bool = False) -> Forgotten:
    """Delete every row of `user_id` in `tenant`, or (dry run) count them: the same deletes, rolled back."""
    deleted: dict[str, int] = {}

    def add(counts: dict[str, int]) -> None:
        for label, count in counts.items():
            deleted[label] = deleted.get(label, 0) + count

    quote = connection.ops.quote_name
    sessions = f"SELECT id FROM {quote(Session._meta.db_table)} WHERE tenant_id = %s AND user_id = %s"
    of_user = "tenant_id = %s AND user_id = %s"
    params = [tenant.pk, user_id]
    with transaction.atomic():
        # Writers to these sessions wait (every message write locks its session first), then find them gone.
        list(Session.objects.select_for_update().filter(tenant=tenant, user_id=user_id).values_list("pk"))
        for _, counts in user_forgetting.send(sender=Session, tenant_id=tenant.pk, user_id=user_id):
            add(counts or {})
        # Before their messages go: what they used is taken out of the tenant's budgets, counted from them.
        add(user_budgets_forget(tenant_id=tenant.pk, user_id=user_id))
        in_sessions = f"session_id IN ({sessions})"
        messages = f"SELECT id FROM {quote(Message._meta.db_table)} WHERE {in_sessions}"
        # SET_NULL relations first, deleted rather than cleared; then the sessions' contents leaf first, so no
        # relation clears a column of rows about to go.
        add(cascade_delete(TelemetryRecord, *_telemetry_of_user(sessions, messages, params)))
        uploaded = _log_files_forget(tenant=tenant, user_id=user_id, add=add)
        for model in (Turn, Message, LlmRequest, StateVersion, Conversation):
            add(cascade_delete(model, in_sessions, params))
        add(cascade_delete(Session, of_user, params))
        for model in (UsageHourly, UsageDaily):
            add(cascade_delete(model, of_user, params))
        # The retention trail's entries for the user's records a TTL purged: they name the user.
        add(cascade_delete(RetentionEvent, "tenant_id = %s AND before ->> 'user_id' = %s", params))
        # A server folder whose logs are attributed to the user (its files were dealt with above).
        add(cascade_delete(ImportSource, of_user, params))
        # The server-error tally's last path: a failed request to forget them names them in its URL.
        if ServerErrorTally.objects.filter(last_path__contains=f"/users/{user_id}/").update(last_path=""):
            add({"platform_kit.ServerErrorTally (path cleared)": 1})
        # Last, under their upload locks until the commit: the stored copies of their uploaded logs.
        files = stored_uploads_delete(tenant=tenant, paths=uploaded, dry_run=dry_run)
        if files:
            add({"sessions_app.ImportedFile (uploaded copy)": files})
        audit = None
        if dry_run:
            transaction.set_rollback(True)
        else:
            audit = ForgetAudit.objects.create(
                tenant=tenant,
                user_hash=user_hash(tenant_id=tenant.pk, user_id=user_id),
                deleted=dict(sorted(deleted.items())),
                total=sum(deleted.values()),
                actor=actor[:255],
                forgotten_at=timezone.now(),
            )
    return Forgotten(deleted=dict(sorted(deleted.items())), dry_run=dry_run, audit=audit)


def _log_files_forget(*, tenant: Tenant, user_id: str, add) -> list[str]:
    """The import rows of the user's log files (their sessions', and those of the import sources attributing logs
    to them). An uploaded file's row goes (its stored copy goes last: the paths are returned), so a later upload
    starts from nothing. A file on the server (an import source's, one given to `ace_import`) is not ours to
    delete: its row is kept at its read position, stripped of its session, parser state and figures, so the
    next scan reads only lines written after today instead of importing the forgotten ones again."""
    files = ImportedFile.objects.filter(tenant=tenant).filter(Q(session__user_id=user_id) | Q(source__user_id=user_id))
    prefix = f"{upload_root(tenant)}/"
    uploaded = list(files.filter(path__startswith=prefix).values_list("path", flat=True))
    if uploaded:
        add(cascade_delete(ImportedFile, "tenant_id = %s AND path = ANY(%s)", [tenant.pk, uploaded]))
    kept = files.exclude(path__startswith=prefix).update(
        session=None, agent_session_id="", carry={}, pending=0, lines_read=0, messages_imported=0, issues=0,
        last_error="",
    )  # fmt: skip
    if kept:
        add({"sessions_app.ImportedFile (server file, read position kept)": kept})
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
