"""`ace_providers new-key` prints a new key for ACE_SECRETS_KEYS; `ace_providers rotate` encrypts every stored
provider key again with the first of them; `ace_providers derived-key` prints the key used while ACE_SECRETS_KEYS
is unset (docs/gateway.md, "Keys at rest")."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from gateway_app import secrets
from gateway_app.services.providers import provider_keys_reencrypt

UNREADABLE = 3  # exit status: some keys could not be decrypted (the others were rotated)


class Command(BaseCommand):
    help = "Keys of the providers' API keys at rest: `new-key` prints a new one, `rotate` re-encrypts every stored key."
    requires_system_checks = []

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("new-key", help="Print a new Fernet key for ACE_SECRETS_KEYS (nothing is changed)")
        sub.add_parser("rotate", help="Re-encrypt every stored provider key with the first key of ACE_SECRETS_KEYS")
        sub.add_parser(
            "derived-key",
            help="Print the key derived from SECRET_KEY (what encrypts while ACE_SECRETS_KEYS is unset), to list "
            "after a new one when setting ACE_SECRETS_KEYS for the first time",
        )

    def handle(self, *args, action, **options):
        if action == "new-key":
            self.stdout.write(secrets.new_key())
            return
        if action == "derived-key":
            self.stdout.write(secrets.derived_key())
            return
        configured = [key for key in getattr(settings, secrets.SETTING, "").split(",") if key.strip()]
        with_what = (
            f"the first of the {len(configured)} keys in {secrets.SETTING}"
            if configured
            else f"the key derived from SECRET_KEY ({secrets.SETTING} is unset)"
        )
        rotation = provider_keys_reencrypt()
        self.stdout.write(f"Re-encrypted {rotation.reencrypted} provider key(s) with {with_what}.")
        if not rotation.unreadable:
            return
        for provider in rotation.unreadable:
            self.stderr.write(
                f"Cannot decrypt the API key of provider {provider.name!r} (tenant {provider.tenant.name!r}, id "
                f"{provider.pk}): no key in {secrets.SETTING} decrypts it. Put back the key that encrypted it, or "
                "enter the provider's API key again (admin, or PATCH /api/v1/providers/{id}/)."
            )
        raise CommandError(
            f"{len(rotation.unreadable)} provider key(s) could not be decrypted (named above); the others were "
            "re-encrypted.",
            returncode=UNREADABLE,
        )
