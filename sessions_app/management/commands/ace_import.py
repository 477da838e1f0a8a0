import re

from django.core.management.base import BaseCommand, CommandError

from sessions_app.models import ImportTool, Tenant
from sessions_app.schema import MACHINE_PATTERN
from sessions_app.services.apikeys import tenant_get_or_create
from sessions_app.services.imports import ImportPathError, format_issue, import_path


class Command(BaseCommand):
    help = (
        "Import Claude Code, Qwen Code or OpenClaw session logs from a file or a directory tree. Running it "
        "again imports only what is new. The last line of the output is the summary."
    )
    # The system checks load every URL, view and serializer of the project (the API schema's too): most of a
    # small import's time, and nothing an import uses. `manage.py check` and the server run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("path", help="A .jsonl log or a directory (e.g. ~/.claude/projects)")
        parser.add_argument(
            "--tool", choices=ImportTool.values, default=ImportTool.AUTO, help="The log format (default: detect)"
        )
        parser.add_argument("--tenant", default="demo", help="The tenant to import into (default: demo)")
        parser.add_argument(
            "--user-id", default="", help="Attribute new sessions to this user (default: the log's or the OS user)"
        )
        parser.add_argument(
            "--machine",
            default=None,
            help="The machine the logs were written on, for new sessions (default: this host's name)",
        )

    def handle(self, *args, path, tool, tenant, user_id, machine, **options):
        if machine is not None and not re.fullmatch(MACHINE_PATTERN, machine):
            raise CommandError(f"--machine {machine!r}: letters, digits, '.', '_' and '-' only, up to 100.")
        if not Tenant.objects.filter(name=tenant).exists():
            self.stdout.write(f"Tenant '{tenant}' created.")
        target = tenant_get_or_create(name=tenant)
        try:
            summary = import_path(tenant=target, path=path, tool=tool, user_id=user_id or None, machine=machine)
        except ImportPathError as error:
            raise CommandError(str(error)) from error
        for issue in summary.issues:
            self.stdout.write(format_issue(issue))
        if summary.issues_total > len(summary.issues):
            self.stdout.write(f"… and {summary.issues_total - len(summary.issues):,} more issues")
        self.stdout.write(summary.line())
