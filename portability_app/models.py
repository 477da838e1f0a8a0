"""The models of portability (docs/portability.md).

`TenantExport`: a tenant's full export made in the background, queued from the API or the admin, written by a
worker to a zip under ACE_DATA_DIR/exports/<tenant>/<id>.zip, then downloaded. Its table was
sessions_app_tenantexport until migration 0002 (the model moved here in issue 31, its rows with it).

`RecordImport`: one record of a memory export imported into a tenant. Its table was memory_app_recordimport until
migration 0004 (moved here in issue 31 with the import itself, `portability_app.memory`)."""

import uuid

from django.db import models
from django.utils import timezone

from memory_app.models import Record
from sessions_app.models import Tenant


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


class RecordImport(models.Model):
    """One record of a memory export imported into this tenant (docs/portability.md): where it came from and
    what it became. Importing the same export again finds the row and writes nothing. The exported provenance
    that names no session or message of this tenant is kept here, as the ids the source instance gave them."""

    class Outcome(models.TextChoices):
        CREATED = "created", "created with its history"
        MERGED = "merged", "merged into a record saying the same"

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    origin_record_id = models.UUIDField("origin record ID", help_text="The record's id in the export")
    origin_tenant = models.CharField(max_length=255, blank=True, help_text="The tenant the export came from")
    record = models.ForeignKey(Record, on_delete=models.CASCADE, related_name="imports")
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    external_sources = models.JSONField(
        default=dict, blank=True, help_text="Exported sources not found here: {sessions: [...], messages: [...]}"
    )
    actor = models.CharField(max_length=255)
    imported_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-imported_at"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "origin_record_id"], name="record_import_origin_unique")
        ]

    def __str__(self):
        return f"{self.origin_record_id} → {self.record_id} ({self.outcome})"
