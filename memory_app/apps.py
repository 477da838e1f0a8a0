from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Long-term memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from memory_app import services, tasks
        from sessions_app.signals import (
            messages_amended,
            messages_appended,
            messages_purged,
            session_deleted,
            turn_completed,
            turn_completing,
            user_forgetting,
        )

        messages_appended.connect(tasks.messages_appended_handler, dispatch_uid="memory_app.embed_messages")
        messages_amended.connect(tasks.messages_amended_handler, dispatch_uid="memory_app.embed_amended_messages")
        turn_completing.connect(tasks.turn_completing_handler, dispatch_uid="memory_app.turn_text_waits")
        turn_completed.connect(tasks.turn_completed_handler, dispatch_uid="memory_app.embed_turn_messages")
        session_deleted.connect(services.session_deleted_handler, dispatch_uid="memory_app.forget_deleted_session")
        messages_purged.connect(services.messages_purged_handler, dispatch_uid="memory_app.forget_purged_messages")
        user_forgetting.connect(services.user_forgetting_handler, dispatch_uid="memory_app.forget_user")
