"""Tenants and their API keys: every row of every app belongs to one tenant; a key acts for exactly one."""

import uuid

from django.db import models
from django.utils import timezone


class Tenant(models.Model):
    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class ApiKey(models.Model):
    """An API key; only its SHA-256 digest is stored. The first characters (`prefix`) find the row."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Enforced by the LLM gateway (gateway_app.limits): a call over either gets a 429 with Retry-After.
    requests_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Gateway calls a minute this key may make (empty: no limit)"
    )
    tokens_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens a minute this key's gateway calls may use (empty: no limit)"
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self):
        return f"{self.prefix}… ({self.tenant})"

    @property
    def is_active(self):
        return self.revoked_at is None
