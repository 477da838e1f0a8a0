from django.conf import settings
from django.core.management.base import BaseCommand

from aceproject.embedded_db import (
    embedded_database_state,
    start_embedded_database,
    stop_embedded_database,
)


class Command(BaseCommand):
    help = (
        "Manage the embedded PostgreSQL (used when DATABASE_URL is unset): `start`, `stop` or `status`. "
        "While web, worker or beat run, they start it again when they find it stopped: stop them first."
    )
    # The system checks load every URL, view and admin module and the API schema (`check` and `migrate` run them),
    # and a failing one must not keep the database from stopping.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, *args, action, **options):
        if settings.DATABASE_URL:
            self.stdout.write("DATABASE_URL is set: there is no embedded database to manage.")
            return
        pgdata = settings.ACE_DATA_DIR / "pg"
        if action == "status":
            state = embedded_database_state(settings.ACE_DATA_DIR)
            described = {"ready": "running", "stopped": "not running"}.get(state, state)
            self.stdout.write(f"Embedded PostgreSQL in {pgdata}: {described}.")
            return
        if action == "start":
            started = start_embedded_database(settings.ACE_DATA_DIR)
            self.stdout.write("Started the embedded PostgreSQL." if started else "The embedded PostgreSQL was running.")
            return
        from django.db import connections

        connections.close_all()
        stopped = stop_embedded_database(settings.ACE_DATA_DIR)
        self.stdout.write("Stopped the embedded PostgreSQL." if stopped else "The embedded PostgreSQL was not running.")
