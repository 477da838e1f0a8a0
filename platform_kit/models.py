"""The platform's own bookkeeping: the count of server errors, shared by every web process."""

import uuid

from django.db import models
from django.utils import timezone


class ServerErrorTally(models.Model):
    """How many requests were answered with a server error (a 5xx other than the 503 of an outage) since
    `since`, by every process of the installation, and the last one: one row, shown on /healthz
    (platform_kit.server_errors)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    count = models.BigIntegerField(default=0)
    since = models.DateTimeField(help_text="When counting started")
    last_at = models.DateTimeField(null=True, blank=True)
    last_request_id = models.CharField(max_length=64, blank=True)
    last_path = models.CharField(max_length=500, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "server error tally"
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="servererrortally_one_row")]

    def __str__(self):
        return f"{self.count} server errors since {self.since:%Y-%m-%d %H:%M}"


class AuthFailureWindow(models.Model):
    """How many failed authentications one client address made in one fixed window (a minute for API keys, the
    admin's cool-off for its login form), shared by every process and host (platform_kit.auth_throttle). Rows
    of past windows are deleted as new ones start."""

    scope = models.CharField(max_length=16, help_text="What was tried: api (a bearer key) or admin (the login form)")
    address = models.CharField(max_length=64, help_text="The client's address")
    window_start = models.DateTimeField()
    failures = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = "authentication failures of an address"
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "address", "window_start"], name="authfailurewindow_one_per_window"
            )
        ]
        indexes = [models.Index(fields=["window_start"], name="authfailurewindow_start")]

    def __str__(self):
        return f"{self.failures} failed {self.scope} authentications from {self.address} since {self.window_start}"


class StoredObject(models.Model):
    """A file kept by the database storage (`platform_kit.storage.DatabaseStorage`, the default of ACE_STORAGE):
    an export's zip, a part of an uploaded log. Its bytes are `StoredObjectChunk` rows. A name starts with the id
    of the tenant whose data it holds (`<tenant id>/exports/<id>.zip`): the rows carry it, so the tables can be
    distributed by tenant."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id = models.UUIDField(help_text="The tenant whose data the file holds: the first part of its name")
    name = models.TextField()
    size = models.BigIntegerField(default=0, help_text="Bytes")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "stored file"
        constraints = [models.UniqueConstraint(fields=["tenant_id", "name"], name="storedobject_tenant_name")]

    def __str__(self):
        return self.name


class StoredObjectChunk(models.Model):
    """One piece (`CHUNK_BYTES`, the last one shorter) of a stored file's bytes, at its place (`index`) in it."""

    pk = models.CompositePrimaryKey("tenant_id", "stored_object_id", "index")
    tenant_id = models.UUIDField()
    stored_object_id = models.UUIDField()
    index = models.IntegerField()
    data = models.BinaryField()

    class Meta:
        verbose_name = "stored file chunk"

    def __str__(self):
        return f"chunk {self.index} of {self.stored_object_id}"
