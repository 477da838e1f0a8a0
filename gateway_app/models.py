"""A tenant's upstream providers, and the per-key rate windows the gateway counts calls in."""

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from gateway_app import secrets
from sessions_app.models import ApiKey, Tenant

MAX_URL_LENGTH = 2000
PROVIDER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ProviderKind(models.TextChoices):
    # OpenAI's Chat Completions API: OpenAI itself and the compatible ones (Qwen/DashScope, DeepSeek, Kimi, GLM,
    # MiniMax, vLLM, Ollama, ...).
    OPENAI = "openai", "OpenAI-compatible (chat completions)"
    ANTHROPIC = "anthropic", "Anthropic (messages)"


class Provider(models.Model):
    """An upstream the gateway forwards to: `/gateway/{name}/...` with the provider's own key."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    name = models.CharField(
        max_length=64, help_text="In the gateway's URL: /gateway/<name>/v1/... (letters, digits, '.', '_', '-')"
    )
    kind = models.CharField(max_length=16, choices=ProviderKind.choices)
    base_url = models.CharField(
        "base URL",
        max_length=MAX_URL_LENGTH,
        help_text="As the official SDK takes it: https://api.openai.com/v1, https://api.anthropic.com",
    )
    # Fernet token (gateway_app.secrets); the key itself is never shown again, only its last characters.
    api_key_encrypted = models.TextField(editable=False, blank=True)
    api_key_hint = models.CharField("API key", max_length=8, editable=False, blank=True)
    active = models.BooleanField(default=True, help_text="Inactive: its calls are refused (403)")
    allowed_models = ArrayField(
        models.CharField(max_length=255),
        default=list,
        blank=True,
        help_text="The models its calls may ask for (empty: any)",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["tenant", "name"]
        constraints = [
            models.UniqueConstraint("tenant", Lower("name"), name="provider_tenant_name"),
        ]

    def __str__(self):
        return self.name

    @property
    def api_key(self) -> str:
        return secrets.decrypt(self.api_key_encrypted) if self.api_key_encrypted else ""

    @api_key.setter
    def api_key(self, plain: str) -> None:
        self.api_key_encrypted = secrets.encrypt(plain) if plain else ""
        self.api_key_hint = f"…{plain[-4:]}" if len(plain) >= 12 else ("…" if plain else "")

    def allows_model(self, model: str) -> bool:
        return not self.allowed_models or model in self.allowed_models


class RateWindow(models.Model):
    """A key's calls and tokens through the gateway in the current minute and the one before (one row per key:
    the sliding-window estimate of gateway_app.limits)."""

    api_key = models.OneToOneField(ApiKey, on_delete=models.CASCADE, primary_key=True, related_name="+")
    minute = models.DateTimeField()
    requests = models.PositiveIntegerField(default=0)
    tokens = models.BigIntegerField(default=0)
    previous_requests = models.PositiveIntegerField(default=0)
    previous_tokens = models.BigIntegerField(default=0)

    def __str__(self):
        return f"{self.api_key_id} at {self.minute:%Y-%m-%d %H:%M}"
