"""The audit of forgotten users (the right to be forgotten: docs/portability.md)."""

import uuid

from django.db import models
from django.utils import timezone

from sessions_app.models.tenancy import Tenant


class ForgetAudit(models.Model):
    """One user forgotten in one tenant: what was deleted, when and by whom — without the user's id. The user
    is kept as a keyed hash (HMAC-SHA256 of tenant and user id under the installation's SECRET_KEY): whoever
    knows the id (and the key) can check that it was forgotten; the row alone does not say who it was."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    user_hash = models.CharField(max_length=64, db_index=True, help_text="HMAC-SHA256 of the tenant and user id")
    deleted = models.JSONField(default=dict, help_text="Rows deleted per table: {model: count}")
    total = models.BigIntegerField(default=0, help_text="Rows deleted in all")
    actor = models.CharField(max_length=255, help_text="api, admin:<staff user>, or command")
    forgotten_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-forgotten_at"]
        verbose_name = "forgotten user"
        verbose_name_plural = "forgotten users"

    def __str__(self):
        return f"{self.user_hash[:12]}… forgotten {self.forgotten_at:%Y-%m-%d %H:%M}"
