from django.apps import AppConfig


class StrategiesAppConfig(AppConfig):
    name = "strategies_app"
    verbose_name = "Memory strategies"
    default_auto_field = "django.db.models.BigAutoField"
