from django.apps import AppConfig


class IngestAppConfig(AppConfig):
    name = "ingest_app"
    verbose_name = "Imports and telemetry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from sessions_app.signals import user_forgetting

        user_forgetting.connect(_user_forgetting, dispatch_uid="ingest_app.forget_user")


def _user_forgetting(sender, **kwargs):
    # The import pipeline loads when a user is forgotten, not with every process (`ace_import --help` starts
    # without it: tests/test_startup.py).
    from ingest_app.forget import user_forgetting_receiver

    return user_forgetting_receiver(sender, **kwargs)
