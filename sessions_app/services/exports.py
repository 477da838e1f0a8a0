"""Background tenant exports (docs/portability.md): requested from the API or the admin, written by a worker.

sessions_app keeps the row and its life (queued → running → succeeded | failed); the zip is written by
`aceproject.tasks.tenant_export_run` (aceproject reads every app's tables, `aceproject/tenant_export.py`), queued
here by name so that this app imports nothing above it. The task claims the row with a conditional UPDATE, so a
task delivered twice writes the file once.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from platform_kit.tasks import enqueue_or_leave_to_sweep
from sessions_app.models import ExportStatus, Tenant, TenantExport

TASK = "aceproject.tasks.tenant_export_run"


def tenant_export_path(export: TenantExport) -> Path:
    """Where the export's zip is written: ACE_DATA_DIR/exports/<tenant id>/<export id>.zip."""
    return Path(settings.ACE_DATA_DIR) / "exports" / str(export.tenant_id) / f"{export.pk}.zip"


def export_filename(export: TenantExport) -> str:
    """The name a download is saved as: <tenant>-<export id>.zip."""
    return f"{export.tenant.name}-{export.pk}.zip"


def tenant_export_request(*, tenant: Tenant, requested_by: str) -> TenantExport:
    """A queued export of all the tenant's data; the worker is asked for it once the row is committed."""
    with transaction.atomic():
        export = TenantExport.objects.create(tenant=tenant, requested_by=requested_by[:255])
        transaction.on_commit(
            lambda: enqueue_or_leave_to_sweep(
                TASK, str(export.pk), what=f"tenant export {export.pk}", sweep="nothing (request another export)"
            )
        )
    return export


def tenant_export_claim(*, export_id) -> TenantExport | None:
    """Queued → running, for one worker only: None when the export is not queued (taken, finished, gone)."""
    claimed = TenantExport.objects.filter(pk=export_id, status=ExportStatus.QUEUED).update(
        status=ExportStatus.RUNNING, started_at=timezone.now()
    )
    return TenantExport.objects.select_related("tenant").get(pk=export_id) if claimed else None


def tenant_export_succeed(*, export_id, path: Path, counts: dict[str, int]) -> None:
    TenantExport.objects.filter(pk=export_id, status=ExportStatus.RUNNING).update(
        status=ExportStatus.SUCCEEDED,
        path=str(path),
        size=path.stat().st_size,
        counts=counts,
        error="",
        finished_at=timezone.now(),
    )


def tenant_export_fail(*, export_id, error: str) -> None:
    TenantExport.objects.filter(pk=export_id, status=ExportStatus.RUNNING).update(
        status=ExportStatus.FAILED, error=error[:2000], finished_at=timezone.now()
    )
