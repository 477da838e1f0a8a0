"""Portability, a cross-app feature in a room of its own: a tenant's whole export (a zip of every app's rows), and
the memory export and import between installations."""

from django.apps import AppConfig


class PortabilityAppConfig(AppConfig):
    name = "portability_app"
    verbose_name = "Exports and imports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from platform_kit.storage import stored_kind_register
        from portability_app import receivers
        from sessions_app.signals import user_forgetting

        user_forgetting.connect(receivers.user_forgetting_receiver, dispatch_uid="portability_app.forget_user")
        stored_kind_register("exports", _exports_in_use)


def _exports_in_use(tenant_id, names: list[str]) -> set[str]:
    """Export zips (`<tenant id>/exports/<export id>.zip`) of exports queued, running or succeeded: a failed or
    withdrawn export's zip, or one whose export was deleted, is not."""
    from platform_kit.storage import ids_in_names
    from portability_app.models import ExportStatus, TenantExport

    by_id = ids_in_names(names, suffix=".zip")
    keeping = (ExportStatus.QUEUED, ExportStatus.RUNNING, ExportStatus.SUCCEEDED)
    exports = TenantExport.objects.filter(tenant_id=tenant_id, pk__in=list(by_id), status__in=keeping)
    return {by_id[pk] for pk in exports.values_list("pk", flat=True)}
