from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions and usage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Tracing is opt-in via the standard OTEL_* variables; without them this installs nothing.
        from sessions_app.tracing import configure_tracing

        configure_tracing()

        from django.db.models.signals import post_delete, post_save

        from sessions_app.models import ApiKey
        from sessions_app.services.apikeys import apikeys_forget

        def key_changed(sender, **kwargs):
            apikeys_forget()  # the web process's cached key checks (a revoked key must stop working here at once)

        post_save.connect(key_changed, sender=ApiKey, weak=False, dispatch_uid="sessions_app.apikey_saved")
        post_delete.connect(key_changed, sender=ApiKey, weak=False, dispatch_uid="sessions_app.apikey_deleted")
