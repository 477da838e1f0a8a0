import sys

from django.core.management.base import BaseCommand, CommandError

from memory_app.selectors.export import memory_export_lines
from platform_kit.files import private_open
from portability_app.tenant_export import tenant_export
from sessions_app.models import Tenant


class Command(BaseCommand):
    help = (
        "Export a tenant's memory as JSON Lines (`memory`, to standard output or --out), or all of a tenant's data "
        "as a zip of JSON Lines per table (`tenant --out FILE.zip`). Format: docs/portability.md."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True)
        memory = sub.add_parser("memory", help="Records with provenance and revisions, as JSON Lines")
        memory.add_argument("--tenant", required=True, help="Tenant name")
        memory.add_argument("--user-id", help="Only this user's records")
        memory.add_argument("--out", help="A file to write (default: standard output)")
        tenant = sub.add_parser("tenant", help="Every table of the tenant, a zip of JSON Lines")
        tenant.add_argument("--tenant", required=True, help="Tenant name")
        tenant.add_argument("--out", required=True, help="The zip file to write")

    def handle(self, *args, what, **options):
        try:
            tenant = Tenant.objects.get(name=options["tenant"])
        except Tenant.DoesNotExist:
            raise CommandError(f"No tenant named {options['tenant']!r}.") from None
        if what == "memory":
            out = private_open(options["out"], "wb") if options.get("out") else sys.stdout.buffer
            try:
                for line in memory_export_lines(tenant=tenant, user_id=options.get("user_id")):
                    out.write(line)
            finally:
                out.flush()
                if options.get("out"):
                    out.close()
            return
        with private_open(options["out"], "wb") as out:  # the tenant's data: 0600, like the API's exports
            counts = tenant_export(tenant=tenant, out=out)
        summary = ", ".join(f"{name} {count:,}" for name, count in counts.items())
        self.stderr.write(f"Exported tenant {tenant.name} to {options['out']}: {summary}.")
