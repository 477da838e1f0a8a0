"""`manage.py ace_push_rules`: write the tools' layouts (`importers.registry.push_rules`) into the standalone push
client (ingest_app/push_client.py, between its BEGIN and END lines); `--check` only says whether they drifted."""

from django.core.management.base import BaseCommand, CommandError

from ingest_app import push_rules


class Command(BaseCommand):
    help = (
        "Write the tools' layouts from the registry of importers into ingest_app/push_client.py (a standalone file "
        "that cannot import them). With --check, write nothing: exit 1 when the file's copy differs."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="Only check; exit 1 when the copy drifted")

    def handle(self, *args, check=False, **options):
        if check:
            if push_rules.written() != push_rules.render():
                raise CommandError(
                    f"{push_rules.PUSH_CLIENT}: the tools' layouts drifted; run manage.py ace_push_rules"
                )
            self.stdout.write("the push client's layouts are the registry's")
            return
        changed = push_rules.write()
        self.stdout.write(f"{push_rules.PUSH_CLIENT}: {'written' if changed else 'unchanged'}")
