import os

import anyio
from django.core.management.base import BaseCommand, CommandError

from mcp_app.server import mcp_server, tenant_bound
from mcp_app.stdio import serve_stdio
from sessions_app.services.apikeys import apikey_authenticate


class Command(BaseCommand):
    help = (
        "Serve the MCP tools (remember, recall, forget, context, usage) over stdio for the tenant of the API key "
        "in ACE_API_KEY (or --key). stdout carries only the protocol; errors go to stderr."
    )
    requires_system_checks = []  # stderr is the client's log: the one line that matters if the key is refused

    def add_arguments(self, parser):
        parser.add_argument("--key", help="The API key (default: the ACE_API_KEY environment variable)")

    def handle(self, *args, key=None, **options):
        key = (key or os.environ.get("ACE_API_KEY", "")).strip()
        if not key:
            raise CommandError("Set ACE_API_KEY (or pass --key) to an Open ACE API key: ace_apikey create prints one.")
        api_key = apikey_authenticate(plain_key=key)
        if api_key is None:
            raise CommandError("ACE_API_KEY is not an active API key (unknown or revoked).")
        with tenant_bound(api_key.tenant):
            anyio.run(serve_stdio, mcp_server())
