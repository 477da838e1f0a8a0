from django.apps import AppConfig


class RetentionAppConfig(AppConfig):
    name = "retention_app"
    verbose_name = "Retention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from retention_app import services
        from sessions_app.signals import user_forgetting

        user_forgetting.connect(services.user_forgetting_handler, dispatch_uid="retention_app.forget_user")
