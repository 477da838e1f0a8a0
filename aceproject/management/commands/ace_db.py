from django.conf import settings
from django.core.management.base import BaseCommand

from aceproject.embedded_db import embedded_database_running, stop_embedded_database


class Command(BaseCommand):
    help = "Manage the embedded PostgreSQL (used when DATABASE_URL is unset): `stop` or `status`."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["stop", "status"])

    def handle(self, *args, action, **options):
        if settings.DATABASE_URL:
            self.stdout.write("DATABASE_URL is set: there is no embedded database to manage.")
            return
        pgdata = settings.ACE_DATA_DIR / "pg"
        if action == "status":
            running = embedded_database_running(settings.ACE_DATA_DIR)
            self.stdout.write(f"Embedded PostgreSQL in {pgdata}: {'running' if running else 'not running'}.")
            return
        from django.db import connections

        connections.close_all()
        stopped = stop_embedded_database(settings.ACE_DATA_DIR)
        self.stdout.write("Stopped the embedded PostgreSQL." if stopped else "The embedded PostgreSQL was not running.")
