from django.core.management.base import BaseCommand, CommandError

from sessions_app.models import ApiKey
from sessions_app.services.apikeys import apikey_create, apikeys_revoke


class Command(BaseCommand):
    help = "Create, list or revoke API keys. `create` prints the new key as the last line."
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a key (and the tenant, if new)")
        create.add_argument("--tenant", required=True, help="Tenant name")
        create.add_argument("--name", default="", help="What the key is for")
        listing = sub.add_parser("list", help="List keys (never the keys themselves)")
        listing.add_argument("--tenant", help="Only this tenant's keys")
        revoke = sub.add_parser("revoke", help="Revoke a key by its prefix")
        revoke.add_argument("prefix")

    def handle(self, *args, action, **options):
        if action == "create":
            new = apikey_create(tenant_name=options["tenant"], name=options["name"])
            self.stdout.write(f"Created API key {new.api_key.prefix} for tenant {new.api_key.tenant.name}.")
            self.stdout.write("It is shown only now; store it safely.")
            self.stdout.write(new.plain_key)
        elif action == "list":
            keys = ApiKey.objects.select_related("tenant")
            if options.get("tenant"):
                keys = keys.filter(tenant__name=options["tenant"])
            for key in keys:
                state = "revoked" if key.revoked_at else "active"
                self.stdout.write(f"{key.prefix}\t{key.tenant.name}\t{key.name}\t{state}\t{key.created_at:%Y-%m-%d}")
        elif action == "revoke":
            if not apikeys_revoke(keys=ApiKey.objects.filter(prefix=options["prefix"])):
                raise CommandError(f"No active key with prefix {options['prefix']}.")
            self.stdout.write(f"Revoked {options['prefix']}.")
