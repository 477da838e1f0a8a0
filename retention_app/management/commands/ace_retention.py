from django.core.management.base import BaseCommand, CommandError

from retention_app.models import RetentionRun
from retention_app.selectors import tenants_with_retention
from retention_app.services import retention_apply
from sessions_app.models import Tenant


def _day(moment) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d}"


class Command(BaseCommand):
    help = (
        "Apply retention now: purge message content older than each tenant's policy and delete expired records "
        "under purge TTLs (what the daily task does). --dry-run only says what it would do. Each run is recorded "
        "(admin: Retention runs)."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="change nothing; print what would be purged")
        parser.add_argument("--tenant", help="only this tenant (by name)")

    def handle(self, *args, dry_run=False, tenant=None, **options):
        if tenant is not None:
            found = Tenant.objects.filter(name=tenant).first()
            if found is None:
                raise CommandError(f"No tenant named {tenant!r}.")
            tenants = [found]
        else:
            tenants = tenants_with_retention()
        verb = "would purge" if dry_run else "purged"
        totals = [0, 0]
        for each in tenants:
            run = retention_apply(tenant=each, trigger=RetentionRun.Trigger.COMMAND, dry_run=dry_run)
            totals[0] += run.messages_purged
            totals[1] += run.records_purged
            self.stdout.write(
                f"{each.name}: {verb} the content of {run.messages_purged} messages "
                f"(created {_day(run.oldest_message_at)} to {_day(run.newest_message_at)}), "
                f"{'would delete' if dry_run else 'deleted'} {run.records_purged} expired records; "
                f"{run.records_expired} expired records kept (not recalled)."
            )
        self.stdout.write(
            f"{'Dry run' if dry_run else 'Retention applied'}: {len(tenants)} tenants, "
            f"{totals[0]} messages {'to purge' if dry_run else 'purged'}, "
            f"{totals[1]} records {'to delete' if dry_run else 'deleted'}."
        )
