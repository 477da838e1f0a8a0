"""Portability in the admin: tenant exports (and the Tenant admin's action that queues them), the memory export
and import pages. Importing a module registers its admins (Django's autodiscovery imports this package)."""

from portability_app.admin import exports, memory  # noqa: F401
