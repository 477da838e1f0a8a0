import sys
from datetime import date

from django.core.management.base import BaseCommand, CommandError

from sessions_app.price_lists import PriceListError
from sessions_app.services.prices import price_import_lines, prices_import


class Command(BaseCommand):
    help = (
        "Model prices. `import FILE` reads LiteLLM's model_prices_and_context_window.json or models.dev's api.json "
        "and says what changed: a changed price gets a row dated --effective-from (default today, UTC), so past usage "
        "keeps its price; a model never priced gets an undated row (its past usage is priced too). By default only "
        "the models this install has used or already prices. Exit status 0 done, 2 a bad file or arguments "
        "(nothing written)."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        load = sub.add_parser("import", help="Import a price list (LiteLLM's or models.dev's JSON)")
        load.add_argument("file", help="The JSON file ('-': standard input)")
        load.add_argument("--dry-run", action="store_true", help="Say what would change; write nothing")
        load.add_argument(
            "--effective-from", type=_day, help="The UTC day a changed price takes effect (YYYY-MM-DD; default today)"
        )
        load.add_argument(
            "--provider",
            action="append",
            default=[],
            help="Only this provider's listings, as the file names it (anthropic, bedrock, openrouter…; repeatable)",
        )
        scope = load.add_mutually_exclusive_group()
        scope.add_argument("--all", action="store_true", help="Every model of the list, not only those used or priced")
        scope.add_argument("--only-known", action="store_true", help="Only models that already have a price")

    def handle(self, *args, action, **options):
        if action == "import":
            self.import_prices(**options)

    def import_prices(self, *, file, dry_run, effective_from, provider, only_known, verbosity=1, **options):
        try:
            data = sys.stdin.buffer.read() if file == "-" else open(file, "rb").read()  # noqa: SIM115
        except OSError as error:
            raise CommandError(f"Cannot read {file}: {error.strerror}.", returncode=2) from None
        try:
            report = prices_import(
                data=data,
                effective_from=effective_from,
                providers=tuple(provider),
                everything=options["all"],
                only_known=only_known,
                dry_run=dry_run,
            )
        except PriceListError as error:
            raise CommandError(f"{file}: {error}. Nothing was written.", returncode=2) from None
        for line in price_import_lines(report, limit=None if verbosity > 1 else 20):
            self.stdout.write(line)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        from argparse import ArgumentTypeError

        raise ArgumentTypeError(f"not a day (YYYY-MM-DD): {text!r}") from None
