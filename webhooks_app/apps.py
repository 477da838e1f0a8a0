from django.apps import AppConfig


class WebhooksAppConfig(AppConfig):
    name = "webhooks_app"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from ingest_app.signals import import_finished
        from memory_app.signals import record_changed
        from sessions_app.signals import budget_crossed, user_forgetting
        from strategies_app.signals import run_failed
        from webhooks_app import receivers

        record_changed.connect(receivers.record_changed_receiver, dispatch_uid="webhooks_app.records")
        run_failed.connect(receivers.run_failed_receiver, dispatch_uid="webhooks_app.runs")
        import_finished.connect(receivers.import_finished_receiver, dispatch_uid="webhooks_app.imports")
        budget_crossed.connect(receivers.budget_crossed_receiver, dispatch_uid="webhooks_app.budgets")
        user_forgetting.connect(receivers.user_forgetting_receiver, dispatch_uid="webhooks_app.forget_user")
