"""Celery tasks of the tenant exports (docs/portability.md): writing one, and the sweep of those left behind.

Their names are those they had before they moved here (issue 31): queued messages and the beat's rows name them.
"""

from __future__ import annotations

import logging
import os

from celery import shared_task
from django.conf import settings

from platform_kit.files import private_folder, private_open
from portability_app.services.exports import (
    tenant_export_claim,
    tenant_export_fail,
    tenant_export_path,
    tenant_export_succeed,
    tenant_exports_sweep,
)
from portability_app.tenant_export import tenant_export

logger = logging.getLogger(__name__)


@shared_task(name="aceproject.tasks.tenant_export_run", acks_late=True)
def tenant_export_run(export_id: str) -> str:
    """Write the export's zip to a temporary file beside its place, then rename it there (a download never sees a
    half-written zip), and record the rows per file. A duplicate task finds the export claimed and does nothing."""
    export = tenant_export_claim(export_id=export_id)
    if export is None:
        return "not queued"
    target = tenant_export_path(export)
    partial = target.with_name(f"{target.name}.part")
    try:
        private_folder(target.parent, within=settings.ACE_DATA_DIR)
        with private_open(partial, "wb") as out:
            counts = tenant_export(tenant=export.tenant, out=out)
        os.replace(partial, target)
    except Exception as error:
        logger.exception("tenant export %s failed", export_id)
        partial.unlink(missing_ok=True)
        tenant_export_fail(export_id=export_id, error=f"{type(error).__name__}: {error}")
        return "failed"
    tenant_export_succeed(export_id=export_id, path=target, counts=counts)
    return "succeeded"


@shared_task(name="sessions_app.tasks.sweep_tenant_exports", acks_late=True, time_limit=120, soft_time_limit=100)
def sweep_tenant_exports() -> dict:
    """Every 5 minutes: tenant exports never queued are queued again; those whose worker went away, failed."""
    return tenant_exports_sweep()
