from django.apps import AppConfig
from django.core import checks


class GatewayAppConfig(AppConfig):
    name = "gateway_app"
    verbose_name = "LLM gateway"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from gateway_app.checks import secrets_keys

        checks.register(secrets_keys)
