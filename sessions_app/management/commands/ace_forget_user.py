from django.core.management.base import BaseCommand, CommandError

from sessions_app.models import Tenant
from sessions_app.services.forget import user_forget


class Command(BaseCommand):
    help = (
        "Forget a user: delete every row of theirs in one tenant (sessions and all in them, telemetry naming them, "
        "usage roll-ups, budgets scoped to them, records with their revisions and vectors, strategy runs, webhook "
        "deliveries about them) and their uploaded log files, in one transaction, and audit it. --dry-run only counts."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="Tenant name")
        parser.add_argument("--user-id", required=True, help="The user to forget")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing")

    def handle(self, *args, tenant, user_id, dry_run, **options):
        try:
            tenant = Tenant.objects.get(name=tenant)
        except Tenant.DoesNotExist:
            raise CommandError(f"No tenant named {tenant!r}.") from None
        forgotten = user_forget(tenant=tenant, user_id=user_id, actor="command", dry_run=dry_run)
        for label, count in forgotten.deleted.items():
            self.stdout.write(f"{count:>12,}  {label}")
        verb = "Would delete" if dry_run else "Deleted"
        audit = "" if forgotten.audit is None else f" Audit {forgotten.audit.pk}."
        self.stdout.write(f"{verb} {forgotten.total:,} rows of user {user_id!r} in tenant {tenant.name}.{audit}")
