"""The Django admin of the ingest side: import sources, imported files and the OTLP telemetry received.

Importing a module registers its admins (Django's autodiscovery imports this package).
"""

from ingest_app.admin import imports, telemetry  # noqa: F401
