from django.apps import AppConfig


class IngestAppConfig(AppConfig):
    name = "ingest_app"
    verbose_name = "Imports and telemetry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from ingest_app import forget
        from sessions_app.signals import user_forgetting

        user_forgetting.connect(forget.user_forgetting_receiver, dispatch_uid="ingest_app.forget_user")
