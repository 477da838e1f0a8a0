"""A tenant's full export made in the background (docs/portability.md): queued from the API or the admin, written
by a worker to a zip under ACE_DATA_DIR/exports/<tenant>/<id>.zip, then downloaded."""

import uuid

from django.db import models
from django.utils import timezone

from sessions_app.models.tenancy import Tenant


class ExportStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    WITHDRAWN = "withdrawn"  # its zip deleted: it held a user forgotten since


class TenantExport(models.Model):
    """One export of all a tenant's data. Only the services change it: `tenant_export_request` makes it queued,
    the worker claims it (running) and finishes it (succeeded with the file, or failed with the error)."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    status = models.CharField(max_length=16, choices=ExportStatus.choices, default=ExportStatus.QUEUED)
    requested_by = models.CharField(max_length=255, help_text="api:<key prefix>, admin:<user>")
    path = models.CharField(max_length=1000, blank=True, help_text="The zip, once written")
    size = models.BigIntegerField(null=True, blank=True, help_text="Bytes of the zip")
    counts = models.JSONField(default=dict, blank=True, help_text="Rows per file, as in the zip's manifest")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="tenantexport_tenant_created")]

    def __str__(self):
        return f"{self.tenant} export {self.created_at:%Y-%m-%d %H:%M} ({self.status})"
