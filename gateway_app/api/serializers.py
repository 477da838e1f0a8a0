from django.core.validators import RegexValidator
from rest_framework import serializers

from gateway_app.models import MAX_URL_LENGTH, PROVIDER_NAME_PATTERN, Provider, ProviderKind
from gateway_app.services.providers import (
    API_KEY_PATTERN,
    API_KEY_RULE,
    MAX_ALLOWED_MODELS,
    MAX_API_KEY_LENGTH,
    MAX_MODEL_NAME_LENGTH,
    NAME_RULE,
)
from platform_kit.api.fields import RejectUnknownFieldsMixin, StrictCharField
from platform_kit.api.serializers import ModelSerializer

PROVIDER_FIELDS = [
    "id", "name", "kind", "base_url", "api_key_hint", "active", "models", "created_at", "updated_at",
]  # fmt: skip
MODELS_HELP = "The models its calls may ask for (exact names); empty: any model"


class ProviderSerializer(ModelSerializer):
    kind = serializers.ChoiceField(choices=ProviderKind.choices, read_only=True)
    api_key_hint = serializers.CharField(
        read_only=True,
        help_text="The key's last 4 characters (…abcd), or … for a short key: the key itself is never shown",
    )
    models = serializers.ListField(
        child=serializers.CharField(), source="allowed_models", read_only=True, help_text=MODELS_HELP
    )

    class Meta:
        model = Provider
        fields = PROVIDER_FIELDS
        read_only_fields = fields


class ProviderWriteSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """Input of create and PATCH; the service checks the name's uniqueness, the URL and the key
    (gateway_app/services/providers.py)."""

    name = StrictCharField(
        max_length=64,
        validators=[RegexValidator(PROVIDER_NAME_PATTERN, message=NAME_RULE)],
        help_text="In the gateway's URL, /gateway/<name>/v1/…: letters, digits, '.', '_', '-'",
    )
    kind = serializers.ChoiceField(
        choices=ProviderKind.choices,
        help_text="openai: chat completions (OpenAI and the compatible ones); anthropic: messages",
    )
    base_url = StrictCharField(
        max_length=MAX_URL_LENGTH,
        help_text="As the official SDK takes it: https://api.openai.com/v1, https://api.anthropic.com",
    )
    api_key = StrictCharField(
        max_length=MAX_API_KEY_LENGTH,
        validators=[RegexValidator(API_KEY_PATTERN, message=API_KEY_RULE)],
        write_only=True,
        help_text="The provider's key, sent upstream on every call; stored encrypted, never shown again "
        "(api_key_hint). On PATCH, replaces it",
    )
    active = serializers.BooleanField(required=False, help_text="false: its calls are refused")
    models = serializers.ListField(
        child=StrictCharField(max_length=MAX_MODEL_NAME_LENGTH),
        source="allowed_models",
        required=False,
        max_length=MAX_ALLOWED_MODELS,
        help_text=MODELS_HELP,
    )
