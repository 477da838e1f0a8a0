from django.apps import AppConfig


class StrategiesAppConfig(AppConfig):
    name = "strategies_app"
    verbose_name = "Memory strategies"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.db.models.signals import post_save

        from memory_app.signals import strategy_names_wanted
        from sessions_app.models import Tenant
        from sessions_app.signals import messages_appended, state_changed, turn_completed, user_forgetting
        from strategies_app import triggers
        from strategies_app.services import runs, strategies

        messages_appended.connect(triggers.messages_appended_trigger, dispatch_uid="strategies_app.messages")
        turn_completed.connect(triggers.turn_completed_trigger, dispatch_uid="strategies_app.turns")
        state_changed.connect(triggers.state_changed_trigger, dispatch_uid="strategies_app.state")
        post_save.connect(triggers.tenant_created, sender=Tenant, dispatch_uid="strategies_app.builtin_strategies")
        user_forgetting.connect(runs.user_forgetting_handler, dispatch_uid="strategies_app.forget_user")
        strategy_names_wanted.connect(strategies.strategy_names_handler, dispatch_uid="strategies_app.strategy_names")
