from django.apps import AppConfig


class IngestAppConfig(AppConfig):
    name = "ingest_app"
    verbose_name = "Imports and telemetry"
    default_auto_field = "django.db.models.BigAutoField"
