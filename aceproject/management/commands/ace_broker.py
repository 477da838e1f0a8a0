from django.conf import settings
from django.core.management.base import BaseCommand

from aceproject.embedded_broker import SCHEME, broker_socket, embedded_broker_running, stop_embedded_broker


class Command(BaseCommand):
    help = "Manage the embedded broker (Valkey, used when CELERY_BROKER_URL is unset): `stop` or `status`."
    # The system checks load every URL, view and admin module and the API schema (`check` and `migrate` run them),
    # and a failing one must not keep the broker from stopping.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["stop", "status"])

    def handle(self, *args, action, **options):
        if not settings.CELERY_BROKER_URL.startswith(SCHEME):
            self.stdout.write("CELERY_BROKER_URL is set: there is no embedded broker to manage.")
            return
        if action == "status":
            running = embedded_broker_running(settings.ACE_DATA_DIR)
            where = broker_socket(settings.ACE_DATA_DIR)
            self.stdout.write(f"Embedded broker on {where}: {'running' if running else 'not running'}.")
            return
        stopped = stop_embedded_broker(settings.ACE_DATA_DIR)
        self.stdout.write("Stopped the embedded broker." if stopped else "The embedded broker was not running.")
