"""Forgetting a user (the right to be forgotten, docs/portability.md): every row of theirs in a tenant deleted,
in one transaction, with an audit row that says what went and when without saying who.

What goes: the user's sessions and everything in them (conversations, messages with their keyword-search
vectors, LLM requests, turns, state versions, per-model usage), their usage roll-ups (so the tenant's totals drop
by what they used), the budgets scoped to them (with their usage, crossings and change log) and their usage in
the tenant's other budgets, and what the other apps keep of them (signal `user_forgetting`: the ingest side's
raw telemetry of their sessions or naming them, import rows of their log files, import sources attributing logs
to them and uploaded copies of their log files (ingest_app.forget); records with their revisions and vectors,
message vectors, strategy runs, webhook deliveries about them, the retention trail's entries for
their records a TTL purged (retention_app)). docs/security.md says what it cannot reach (the
database's WAL and backups, access logs). Other users and other tenants are not touched: another tenant's user of
the same id stays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from platform_kit.db import cascade_delete
from platform_kit.models import ServerErrorTally
from sessions_app.models import (
    Conversation,
    ForgetAudit,
    LlmRequest,
    Message,
    Session,
    StateVersion,
    Tenant,
    Turn,
    UsageDaily,
    UsageHourly,
    UsagePlan,
)
from sessions_app.services.budgets import user_budgets_forget
from sessions_app.signals import user_forgetting


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
        # What the other apps keep of the user goes first, while the sessions still say which (the SET_NULL
        # relations to them too: deleted rather than cleared); what must go last they hand to `last`.
        last: list[Callable[[], dict[str, int]]] = []
        for _, counts in user_forgetting.send(
            sender=Session, tenant_id=tenant.pk, user_id=user_id, dry_run=dry_run, last=last.append
        ):
            add(counts or {})
        # Before their messages go: what they used is taken out of the tenant's budgets, counted from them.
        add(user_budgets_forget(tenant_id=tenant.pk, user_id=user_id))
        in_sessions = f"session_id IN ({sessions})"
        # The sessions' contents leaf first, so no relation clears a column of rows about to go.
        for model in (Turn, Message, LlmRequest, StateVersion, Conversation):
            add(cascade_delete(model, in_sessions, params))
        add(cascade_delete(Session, of_user, params))
        # Their roll-ups, and their own usage plan (the tenant's stays).
        for model in (UsageHourly, UsageDaily, UsagePlan):
            add(cascade_delete(model, of_user, params))
        # The server-error tally's last path: a failed request to forget them names them in its URL.
        if ServerErrorTally.objects.filter(last_path__contains=f"/users/{user_id}/").update(last_path=""):
            add({"platform_kit.ServerErrorTally (path cleared)": 1})
        # Last, what cannot be rolled back (the stored copies of their uploaded logs, under their upload locks
        # until the commit): nothing after it may fail but the audit.
        for step in last:
            add(step())
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
