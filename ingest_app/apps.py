from django.apps import AppConfig


class IngestAppConfig(AppConfig):
    name = "ingest_app"
    verbose_name = "Imports and telemetry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from platform_kit.storage import stored_kind_register
        from sessions_app.signals import user_forgetting

        user_forgetting.connect(_user_forgetting, dispatch_uid="ingest_app.forget_user")
        stored_kind_register("uploads", _uploads_in_use)


def _uploads_in_use(tenant_id, names: list[str]) -> set[str]:
    """An uploaded log's stored parts (`<tenant id>/uploads/<segment id>`) that are still one of its segments."""
    from ingest_app.models import UploadSegment
    from platform_kit.storage import ids_in_names

    by_id = ids_in_names(names)
    segments = UploadSegment.objects.filter(tenant_id=tenant_id, pk__in=list(by_id)).values_list("pk", flat=True)
    return {by_id[pk] for pk in segments}


def _user_forgetting(sender, **kwargs):
    # The import pipeline loads when a user is forgotten, not with every process (`ace_import --help` starts
    # without it: tests/test_startup.py).
    from ingest_app.forget import user_forgetting_receiver

    return user_forgetting_receiver(sender, **kwargs)
