from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions and usage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Tracing is opt-in via the standard OTEL_* variables; without them this installs nothing.
        from sessions_app.tracing import configure_tracing

        configure_tracing()
