from django.apps import AppConfig


class GatewayAppConfig(AppConfig):
    name = "gateway_app"
    verbose_name = "LLM gateway"
    default_auto_field = "django.db.models.BigAutoField"
