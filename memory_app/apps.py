from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Long-term memory"
    default_auto_field = "django.db.models.BigAutoField"
