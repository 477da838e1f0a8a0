from django.apps import AppConfig


class PortabilityAppConfig(AppConfig):
    name = "portability_app"
    verbose_name = "Exports and imports"
    default_auto_field = "django.db.models.BigAutoField"
