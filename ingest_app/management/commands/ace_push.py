"""`manage.py ace_push`: the push client (ingest_app/push_client.py, also a standalone script) with the server's
own rules for which files are logs (`detect.is_log_name`)."""

import logging

from django.core.management.base import BaseCommand, CommandError

from ingest_app import push_client
from ingest_app.importers.detect import is_log_name


class Command(BaseCommand):
    help = (
        "Upload the new bytes of this machine's agent logs to a central Open ACE (POST /api/v1/imports/), "
        "labelled with the machine; resumable and idempotent. With --once, send what is new and exit (exit code "
        "0 sent, 1 some parts refused, 3 key refused, 4 server unreachable); else poll every --interval seconds."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        push_client.add_arguments(parser)

    def handle(self, *args, **arguments):
        handler = logging.StreamHandler(self.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        push_client.log.addHandler(handler)
        push_client.log.setLevel(logging.INFO)
        push_client.log.propagate = False
        try:
            options = push_client.options_from(arguments)
        except ValueError as error:
            raise CommandError(str(error), returncode=push_client.EXIT_USAGE) from error
        try:
            code = push_client.run(
                options, once=arguments["once"], interval=arguments["interval"], log_name=is_log_name
            )
        finally:
            push_client.log.removeHandler(handler)
        if code:
            raise CommandError(f"ace_push: exit code {code} (see the log above)", returncode=code)
