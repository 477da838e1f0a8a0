from django.core.management.base import BaseCommand

from sessions_app.models import Session
from sessions_app.selectors import session_count_drift


class Command(BaseCommand):
    help = (
        "Audit the maintained counters: recount sessions from their messages and report any difference. "
        "Exits with status 1 when a session's counters disagree."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Only this tenant's sessions")
        parser.add_argument("--session", action="append", default=[], help="Only this session id (repeatable)")
        parser.add_argument("--limit", type=int, default=1000, help="At most this many sessions, newest first")

    def handle(self, *args, tenant=None, session=(), limit=1000, **options):
        sessions = Session.objects.order_by("-started_at")
        if tenant:
            sessions = sessions.filter(tenant__name=tenant)
        if session:
            sessions = sessions.filter(pk__in=session)
        checked = drifted = 0
        for item in sessions[:limit].iterator():
            checked += 1
            drift = session_count_drift(session=item)
            if drift:
                drifted += 1
                details = ", ".join(f"{k}: counted {a}, messages say {b}" for k, (a, b) in drift.items())
                self.stdout.write(self.style.ERROR(f"{item.pk} {item}: {details}"))
        self.stdout.write(f"Checked {checked} sessions: {drifted} with differences.")
        if drifted:
            raise SystemExit(1)
