"""Background tenant exports (docs/portability.md): requested from the API or the admin, written by a worker.

The row and its life (queued → running → succeeded | failed | withdrawn) are kept here; the zip (in the storage every
host reads, platform_kit.storage: `tenant_export_name`) is written by the
task `tenant_export_run` (`portability_app.tasks`, named "aceproject.tasks.tenant_export_run", where it was
first; it reads every app's tables, `portability_app/tenant_export.py`), queued here by name: a service never
imports a task module. The task claims the row with a conditional UPDATE, so a task delivered twice writes the
file once. Forgetting a user withdraws the exports that hold them (`portability_app.receivers`).
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.http import content_disposition_header

from platform_kit.storage import ace_storage, stored_chunks
from platform_kit.tasks import enqueue_or_leave_to_sweep
from portability_app.models import ExportStatus, TenantExport
from sessions_app.models import ForgetAudit, Tenant

TASK = "aceproject.tasks.tenant_export_run"
# The exports sweep (`portability_app.tasks.sweep_tenant_exports`, every 5 minutes): an export still queued this
# long after it was asked for was never queued (the broker refused) or its task was lost, and is queued again;
# one still running this long after it started lost its worker (stopped, killed) and is marked failed.
QUEUED_TOO_LONG = timedelta(minutes=5)
RUNNING_TOO_LONG = timedelta(hours=12)


def tenant_export_name(export: TenantExport) -> str:
    """The export's zip in the storage every host reads (platform_kit.storage): <tenant id>/exports/<id>.zip."""
    return f"{export.tenant_id}/exports/{export.pk}.zip"


def export_response(export: TenantExport) -> StreamingHttpResponse:
    """The export's zip as a download, streamed from the storage (on any host); FileNotFoundError when it is not
    there (deleted)."""
    storage = ace_storage()
    name = tenant_export_name(export)
    chunks = stored_chunks(name, storage=storage)
    response = StreamingHttpResponse(chunks, content_type="application/zip")
    response["Content-Length"] = str(export.size if export.path == name else storage.size(name))
    response["Content-Disposition"] = content_disposition_header(True, export_filename(export))
    return response


def export_filename(export: TenantExport) -> str:
    """The name a download is saved as: <tenant>-<export id>.zip."""
    return f"{export.tenant.name}-{export.pk}.zip"


def tenant_export_request(*, tenant: Tenant, requested_by: str) -> TenantExport:
    """A queued export of all the tenant's data; the worker is asked for it once the row is committed."""
    with transaction.atomic():
        export = TenantExport.objects.create(tenant=tenant, requested_by=requested_by[:255])
        transaction.on_commit(
            lambda: enqueue_or_leave_to_sweep(
                TASK, str(export.pk), what=f"tenant export {export.pk}", sweep="the exports sweep"
            )
        )
    return export


def tenant_export_claim(*, export_id) -> TenantExport | None:
    """Queued → running, for one worker only: None when the export is not queued (taken, finished, gone)."""
    claimed = TenantExport.objects.filter(pk=export_id, status=ExportStatus.QUEUED).update(
        status=ExportStatus.RUNNING, started_at=timezone.now()
    )
    return TenantExport.objects.select_related("tenant").get(pk=export_id) if claimed else None


def tenant_export_succeed(*, export_id, name: str, size: int, counts: dict[str, int]) -> None:
    with transaction.atomic():
        updated = TenantExport.objects.filter(pk=export_id, status=ExportStatus.RUNNING).update(
            status=ExportStatus.SUCCEEDED,
            path=name,
            size=size,
            counts=counts,
            error="",
            finished_at=timezone.now(),
        )
        export = TenantExport.objects.get(pk=export_id)
        if updated and ForgetAudit.objects.filter(tenant_id=export.tenant_id, forgotten_at__gte=export.started_at):
            # A user was forgotten while it was written: it may hold them.
            tenant_exports_withdraw(tenant_id=export.tenant_id, since=export.started_at)


def tenant_exports_withdraw(*, tenant_id, since=None) -> int:
    """Delete the zips of the tenant's succeeded exports (finished at or after `since`, if given): a user was
    just forgotten, and an export written before holds them. The rows stay, `withdrawn`, saying why; the files go
    after the commit (a rolled-back forget, a dry run, deletes none). A running export is withdrawn as it
    finishes (`tenant_export_succeed`). Returns how many."""
    exports = TenantExport.objects.filter(tenant_id=tenant_id, status=ExportStatus.SUCCEEDED)
    if since is not None:
        exports = exports.filter(finished_at__gte=since)
    exports = list(exports.select_for_update())
    if not exports:
        return 0
    now = timezone.now()
    TenantExport.objects.filter(pk__in=[export.pk for export in exports]).update(
        status=ExportStatus.WITHDRAWN,
        error=f"Withdrawn at {now:%Y-%m-%d %H:%M:%S} UTC: a user it held was forgotten. Request a new export.",
    )
    names = [tenant_export_name(export) for export in exports]
    transaction.on_commit(lambda: [ace_storage().delete(name) for name in names])
    return len(exports)


def tenant_export_fail(*, export_id, error: str) -> None:
    TenantExport.objects.filter(pk=export_id, status=ExportStatus.RUNNING).update(
        status=ExportStatus.FAILED, error=error[:2000], finished_at=timezone.now()
    )


def tenant_exports_sweep(*, now=None) -> dict[str, int]:
    """Queue again the exports left queued, and fail the ones whose worker went away (see QUEUED_TOO_LONG)."""
    now = now or timezone.now()
    stuck = TenantExport.objects.filter(status=ExportStatus.QUEUED, created_at__lt=now - QUEUED_TOO_LONG)
    requeued = 0
    for export_id in stuck.order_by("created_at").values_list("pk", flat=True)[:100]:
        requeued += enqueue_or_leave_to_sweep(
            TASK, str(export_id), what=f"tenant export {export_id}", sweep="the next sweep"
        )
    hours = int(RUNNING_TOO_LONG.total_seconds() // 3600)
    lost = TenantExport.objects.filter(status=ExportStatus.RUNNING, started_at__lt=now - RUNNING_TOO_LONG).update(
        status=ExportStatus.FAILED,
        error=f"Its worker stopped while writing it (still running after {hours} hours): request another export.",
        finished_at=now,
    )
    return {"requeued": requeued, "failed": lost}
