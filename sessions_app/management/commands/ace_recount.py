from django.core.management.base import BaseCommand, CommandError

from sessions_app.models import Session, Tenant
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from sessions_app.services.rollups import rollups_rebuild


class Command(BaseCommand):
    help = (
        "Audit the maintained counters: recount sessions from their messages and report any difference. "
        "With --rollups, also each tenant's hourly and daily roll-ups and sessions' usage by model (a scan of the "
        "tenant's messages); --fix rebuilds those from the messages. "
        "Exits with status 1 when counters disagree (and were not fixed)."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Only this tenant's sessions")
        parser.add_argument("--session", action="append", default=[], help="Only this session id (repeatable)")
        parser.add_argument("--limit", type=int, default=1000, help="At most this many sessions, newest first")
        parser.add_argument(
            "--rollups", action="store_true", help="Also recount the hourly roll-ups and usage by model, per tenant"
        )
        parser.add_argument(
            "--fix", action="store_true", help="With --rollups: rebuild the roll-ups of tenants that differ"
        )

    def handle(self, *args, tenant=None, session=(), limit=1000, rollups=False, fix=False, **options):
        if fix and not rollups:
            raise CommandError("--fix rebuilds roll-ups: use it with --rollups.")
        sessions = Session.objects.order_by("-started_at")
        if tenant:
            sessions = sessions.filter(tenant__name=tenant)
        if session:
            sessions = sessions.filter(pk__in=session)
        checked = drifted = 0
        for item in sessions[:limit]:  # at most --limit rows (not a server-side cursor: a pooler would lose it)
            checked += 1
            drift = session_count_drift(session=item)
            if drift:
                drifted += 1
                details = ", ".join(f"{k}: counted {a}, messages say {b}" for k, (a, b) in drift.items())
                self.stdout.write(self.style.ERROR(f"{item.pk} {item}: {details}"))
        self.stdout.write(f"Checked {checked} sessions: {drifted} with differences.")
        if rollups:
            drifted += self.check_rollups(Tenant.objects.filter(name=tenant) if tenant else Tenant.objects.all(), fix)
        if drifted:
            raise SystemExit(1)

    def check_rollups(self, tenants, fix: bool) -> int:
        """Tenants whose roll-ups differ and were not rebuilt."""
        unfixed = 0
        for tenant in tenants.order_by("name"):
            drift = rollup_drift(tenant=tenant)
            if not any(drift.values()):
                self.stdout.write(f"Tenant {tenant}: roll-ups agree with the messages.")
                continue
            for table, rows in drift.items():
                for key, diff in rows[:20]:
                    details = ", ".join(f"{k}: counted {a}, messages say {b}" for k, (a, b) in diff.items())
                    self.stdout.write(self.style.ERROR(f"Tenant {tenant} {table} {key}: {details}"))
            summary = ", ".join(f"{len(rows)} {table} rows" for table, rows in drift.items())
            if fix:
                written = rollups_rebuild(tenant=tenant)
                self.stdout.write(
                    self.style.SUCCESS(
                        f"Tenant {tenant}: {summary} differed; rebuilt {written['hourly_rows']} hourly, "
                        f"{written['daily_rows']} daily and {written['session_model_rows']} session-model rows "
                        "from the messages."
                    )
                )
            else:
                unfixed += 1
                self.stdout.write(self.style.ERROR(f"Tenant {tenant}: {summary} differ (--fix rebuilds them)."))
        return unfixed
