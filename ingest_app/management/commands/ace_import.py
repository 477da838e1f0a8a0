import argparse
import re
import textwrap

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter

from ingest_app.models import ImportTool
from sessions_app.schema import MACHINE_PATTERN

# Exit statuses (the help's epilog and docs/accounting.md say the same).
EXIT_IMPORTED = 0  # every file imported, or unchanged since the last import
EXIT_FAILED = 1  # nothing was imported: the path or the database could not be used (a CommandError's status)
EXIT_USAGE = 2  # the arguments were wrong (argparse's status)
EXIT_REFUSED = 3  # the import ran, but files were refused or lines skipped: each is named on stderr

# Where each tool keeps its logs by default, as the help lists them (README's "Importing agent logs" too). A copy of
# the registry's (`Tool.where`), kept here so that `--help` starts without loading the importers (test_startup);
# tests/ingest_app/test_registry.py fails when they drift.
TOOL_LOGS = (
    ("Claude Code", "~/.claude/projects (sessions and their sub-agents)"),
    ("Qwen Code", "~/.qwen/projects (JSONL), ~/.qwen/tmp (older JSON)"),
    ("Gemini CLI", "~/.gemini/tmp (chats/session-*.json and .jsonl)"),
    ("OpenClaw", "~/.openclaw/agents (older installs ~/.clawdbot, ~/.moltbot), archives included"),
    ("Codex CLI", "~/.codex/sessions, ~/.codex/archived_sessions"),
    ("OpenCode", "~/.local/share/opencode (its opencode.db, or the older storage/ folder)"),
)

DESCRIPTION = "\n\n".join(
    [
        textwrap.fill(
            "Import agent session logs from a file or a directory tree: each file's tool is recognised by where it "
            "lives and by its content. Running it again reads only what is new.",
            width=79,
        ),
        "Tools and where they keep their logs:\n" + "\n".join(f"  {tool:<12} {where}" for tool, where in TOOL_LOGS),
        textwrap.fill(
            "Problems (path:line: level: message) and every file not imported, with the reason, go to stderr; the "
            "summary line goes to stdout, last. On a terminal a progress line shows the files and bytes read, the "
            "rate and the time left (--no-progress hides it; piped, nothing is drawn).",
            width=79,
            break_on_hyphens=False,
        ),
    ]
)
EPILOG = (
    "exit status:\n"
    f"  {EXIT_IMPORTED}  every file was imported (or was unchanged since the last import; files that are not\n"
    "     regular files, and links to files outside the path, are skipped and named on stderr)\n"
    f"  {EXIT_FAILED}  nothing was imported: the path does not exist or cannot be read, or the database\n"
    "     cannot be used (not reachable, or not migrated: run `manage.py migrate`)\n"
    f"  {EXIT_USAGE}  wrong arguments\n"
    f"  {EXIT_REFUSED}  imported, but some files were refused (not an agent log, another tool's log than\n"
    "     --tool, unreadable, their session deleted, past a reading limit such as\n"
    "     ACE_IMPORT_MAX_LINE_BYTES) or some lines skipped (not JSON): each is listed on stderr;\n"
    "     the rest was imported, and the next run tries the refused files again"
)


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's order of the options, with the description's and the epilog's lines kept as written."""


class Command(BaseCommand):
    help = DESCRIPTION
    # The system checks load every URL, view and serializer of the project (the API schema's too): most of a
    # small import's time, and nothing an import uses. `manage.py check` and the server run them.
    requires_system_checks = []

    def create_parser(self, prog_name, subcommand, **kwargs):
        return super().create_parser(prog_name, subcommand, formatter_class=_HelpFormatter, epilog=EPILOG, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("path", help="A log file or a directory (e.g. ~/.claude/projects)")
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
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="Show the progress line (default: when stderr is a terminal)",
        )

    def handle(self, *args, path, tool, tenant, user_id, machine, progress, **options):
        # The import services load here, not with the command: `ace_import --help` starts without them.
        from ingest_app.pipeline import ImportPathError, import_path

        if machine is not None and not re.fullmatch(MACHINE_PATTERN, machine):
            raise CommandError(f"--machine {machine!r}: letters, digits, '.', '_' and '-' only, up to 100.")
        target = self._tenant(tenant)
        shown = None
        if progress is not False and (progress or self.stderr.isatty()):
            from ingest_app.management.import_progress import DELAY_SECONDS, TerminalProgress

            # Asked for, it shows at once; on a terminal by default, only once the import has run a moment.
            shown = TerminalProgress(self.stderr._out, delay=0 if progress else DELAY_SECONDS)
        try:
            summary = import_path(
                tenant=target, path=path, tool=tool, user_id=user_id or None, machine=machine, progress=shown
            )
        except ImportPathError as error:
            raise CommandError(str(error)) from error
        self._report_problems(summary)
        self.stdout.write(summary.line())
        if summary.files_refused or summary.lines_skipped:
            not_imported = _not_imported(summary)
            raise CommandError(f"{not_imported} (listed above); the rest was imported", returncode=EXIT_REFUSED)

    def _tenant(self, name: str):
        """The tenant to import into, made if new; a database that cannot be used is a clear error, not a traceback."""
        from django.db import OperationalError, ProgrammingError

        from sessions_app.models import Tenant
        from sessions_app.services.apikeys import tenant_get_or_create

        try:
            exists = Tenant.objects.filter(name=name).exists()
        except ProgrammingError as error:  # no tables (or older ones): a data folder never migrated
            first = str(error).splitlines()[0]
            raise CommandError(
                f"the database is not set up for Open ACE ({first}): run `manage.py migrate` first (scripts/up runs it)"
            ) from error
        except OperationalError as error:
            raise CommandError(f"cannot reach the database: {str(error).strip()}") from error
        if not exists:
            self.stdout.write(f"Tenant '{name}' created.")
        return tenant_get_or_create(name=name)

    def _report_problems(self, summary) -> None:
        """Every problem on stderr: the issues (up to the summary's MAX_ISSUES), then each file not imported and
        why (all of them)."""
        from ingest_app.importers import ParseIssue
        from ingest_app.pipeline import format_issue

        refused = [result for result in summary.files if result.status == "refused"]
        refused_paths = {result.path for result in refused}
        for issue in summary.issues:
            if not (issue.line == 0 and issue.level == "error" and issue.path in refused_paths):  # listed below
                self.stderr.write(format_issue(issue))
        if summary.issues_total > len(summary.issues):
            self.stderr.write(f"… and {summary.issues_total - len(summary.issues):,} more issues")
        for result in refused:
            self.stderr.write(format_issue(ParseIssue(result.path, 0, result.reason or "not imported")))


def _not_imported(summary) -> str:
    parts = []
    if summary.files_refused:
        parts.append(f"{summary.files_refused:,} file{'s' if summary.files_refused != 1 else ''} refused")
    if summary.lines_skipped:
        parts.append(f"{summary.lines_skipped:,} line{'s' if summary.lines_skipped != 1 else ''} skipped")
    return " and ".join(parts)
