import sys

from django.core.management.base import BaseCommand, CommandError
from rest_framework.exceptions import ValidationError

from platform_kit.api.errors import validation_detail
from portability_app.memory.importer import records_import
from portability_app.memory.lines import parse_export, user_id_map
from sessions_app.models import Tenant


class Command(BaseCommand):
    help = (
        "Import a memory export (JSON Lines, from ace_export memory or GET /api/v1/records/export/) into a tenant. "
        "Every line is checked first; a bad line writes nothing. Importing a file again writes nothing new."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("file", help="The .jsonl file ('-': standard input)")
        parser.add_argument("--tenant", required=True, help="Tenant name (created if new)")
        parser.add_argument(
            "--map-user", action="append", default=[], metavar="OLD=NEW", help="Import user OLD's records as NEW"
        )

    def handle(self, *args, file, tenant, map_user, **options):
        tenant, _ = Tenant.objects.get_or_create(name=tenant)
        try:
            mapping = user_id_map(map_user)
            if file == "-":
                header, records = parse_export(sys.stdin.buffer, user_id_map=mapping)
            else:
                with open(file, "rb") as lines:
                    header, records = parse_export(lines, user_id_map=mapping)
        except ValidationError as error:
            raise CommandError(validation_detail(error.detail)) from None
        except OSError as error:
            raise CommandError(f"Cannot read {file}: {error.strerror}.") from None
        summary = records_import(tenant=tenant, header=header, records=records, actor="command")
        self.stdout.write(
            f"Imported {summary.records:,} records into {tenant.name}: {summary.created:,} created, "
            f"{summary.merged:,} merged, {summary.unchanged:,} unchanged, "
            f"{summary.external_sources:,} sources kept as external references."
        )
