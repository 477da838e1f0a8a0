import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from ingest_app.models import ImportSource
from memory_app.sample_data import memory_sample_create
from platform_kit.files import private_open
from sessions_app.models import Session
from sessions_app.sample_data import sample_data_create
from sessions_app.services.apikeys import apikey_create, tenant_get_or_create


def local_url() -> str:
    """The address of the web process on this machine: $ACE_HOST:$ACE_PORT, as the Procfile binds it (all
    interfaces, 0.0.0.0 or ::, are reached at the loopback address)."""
    host = settings.ACE_HOST
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"  # an IPv6 address
    return f"http://{host}:{settings.ACE_PORT}"


class Command(BaseCommand):
    help = "First start: an admin user (credentials printed), a demo tenant with an API key, and sample data."
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--no-sample-data", action="store_true", help="Only the admin user")
        parser.add_argument("--tenant", default="demo", help="The tenant for the sample data (default: demo)")

    @transaction.atomic
    def handle(self, *args, no_sample_data=False, tenant="demo", **options):
        url = local_url()
        user_model = get_user_model()
        username = settings.ACE_ADMIN_USERNAME
        if not user_model.objects.filter(is_superuser=True).exists():
            password = settings.ACE_ADMIN_PASSWORD or secrets.token_urlsafe(12)
            user_model.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(self.style.SUCCESS(f"Admin user created: {username} / {password}"))
        else:
            self.stdout.write(
                f"An admin user exists already (reset a password: python manage.py changepassword {username})."
            )

        if no_sample_data:
            return
        demo = tenant_get_or_create(name=tenant)
        key_file = settings.ACE_DATA_DIR / f"{tenant}_api_key"
        if not key_file.exists():
            new = apikey_create(tenant_name=tenant, name="created by ace_bootstrap")
            with private_open(key_file, "w") as handle:
                handle.write(new.plain_key + "\n")
        if not Session.objects.filter(tenant=demo).exists():
            count = sample_data_create(tenant=demo)
            memories = memory_sample_create(tenant=demo)
            self.stdout.write(f"Sample data: {count} sessions and {memories} memories in tenant '{tenant}'.")
        for directory in settings.ACE_IMPORT_DIRS:  # agent-log directories for the import collector
            source, created = ImportSource.objects.get_or_create(
                tenant=demo, path=str(Path(directory).expanduser().absolute())
            )
            if created:
                self.stdout.write(f"Import source added: {source.path} (the collector scans it every 5 minutes).")
        self.stdout.write("")
        self.stdout.write(f"  Home:     {url}/")
        self.stdout.write(f"  Admin:    {url}/admin/")
        self.stdout.write(f"  API docs: {url}/api/docs/")
        gateway = f"http://{settings.ACE_HOST}:{settings.ACE_GATEWAY_PORT}/gateway/<provider>/v1"
        self.stdout.write(f"  Gateway:  {gateway} (add a provider first: docs/gateway.md)")
        self.stdout.write(f"  API key for tenant '{tenant}' (kept in {key_file}):")
        self.stdout.write(f"    {key_file.read_text().strip()}")
