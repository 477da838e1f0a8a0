"""Celery tasks of the tenant exports (docs/portability.md): writing one, and the sweep of those left behind.

Their names are those they had before they moved here (issue 31): queued messages and the beat's rows name them.
"""

from __future__ import annotations

import logging
import tempfile

from celery import shared_task
from django.core.files import File

from platform_kit.storage import ace_storage
from portability_app.services.exports import (
    tenant_export_claim,
    tenant_export_fail,
    tenant_export_name,
    tenant_export_succeed,
    tenant_exports_sweep,
)
from portability_app.tenant_export import tenant_export

logger = logging.getLogger(__name__)


@shared_task(name="aceproject.tasks.tenant_export_run", acks_late=True)
def tenant_export_run(export_id: str) -> str:
    """Write the export's zip to a private temporary file (a zip is written with seeks), then copy it into the
    storage every host reads (a download never sees a half-written zip), and record the rows per file. A
    duplicate task finds the export claimed and does nothing."""
    export = tenant_export_claim(export_id=export_id)
    if export is None:
        return "not queued"
    name = tenant_export_name(export)
    try:
        with tempfile.TemporaryFile(prefix="ace-export-") as out:  # 0600, and gone when closed
            counts = tenant_export(tenant=export.tenant, out=out)
            size = out.tell()
            stored = ace_storage().save(name, File(out, name=name))
        if stored != name:  # a file of that name was there already (never: ids are not reused)
            raise FileExistsError(f"{name} is taken (stored as {stored})")
    except Exception as error:
        logger.exception("tenant export %s failed", export_id)
        tenant_export_fail(export_id=export_id, error=f"{type(error).__name__}: {error}")
        return "failed"
    tenant_export_succeed(export_id=export_id, name=name, size=size, counts=counts)
    return "succeeded"


@shared_task(name="sessions_app.tasks.sweep_tenant_exports", acks_late=True, time_limit=120, soft_time_limit=100)
def sweep_tenant_exports() -> dict:
    """Every 5 minutes: tenant exports never queued are queued again; those whose worker went away, failed."""
    return tenant_exports_sweep()
