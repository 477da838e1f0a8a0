"""Portability, a cross-app feature in a room of its own: a tenant's whole export (a zip of every app's rows), and
the memory export and import between installations."""

from django.apps import AppConfig


class PortabilityAppConfig(AppConfig):
    name = "portability_app"
    verbose_name = "Exports and imports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from portability_app import receivers
        from sessions_app.signals import user_forgetting

        user_forgetting.connect(receivers.user_forgetting_receiver, dispatch_uid="portability_app.forget_user")
