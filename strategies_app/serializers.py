from rest_framework import serializers

from memory_app.models import RecordType
from platform_kit.api.fields import FiniteNumberField, RejectUnknownFieldsMixin
from platform_kit.api.serializers import ModelSerializer
from strategies_app.models import Extractor, RunStatus, Strategy, StrategyRun, StrategyVersion, Trigger


class StrategySerializer(ModelSerializer):
    periodic_task = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="The django-celery-beat task id"
    )

    class Meta:
        model = Strategy
        fields = [
            "id", "name", "description", "type", "enabled", "builtin", "version", "prompt", "extractor",
            "on_tool_result", "on_state_keys", "message_threshold", "accumulated_threshold", "schedule_minutes",
            "periodic_task", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["id", "builtin", "version", "periodic_task", "created_at", "updated_at"]


class StrategyWriteSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """Input of create and PATCH; the service validates the combinations (prompt placeholders, ranges)."""

    name = serializers.SlugField(max_length=100)
    type = serializers.ChoiceField(choices=RecordType.choices)
    description = serializers.CharField(required=False, allow_blank=True)
    prompt = serializers.CharField(trim_whitespace=False, max_length=20_000)
    extractor = serializers.ChoiceField(choices=Extractor.choices, required=False)
    enabled = serializers.BooleanField(required=False)
    on_tool_result = serializers.BooleanField(required=False)
    on_state_keys = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=50)
    message_threshold = FiniteNumberField(required=False, allow_null=True)
    accumulated_threshold = FiniteNumberField(required=False, allow_null=True)
    schedule_minutes = serializers.IntegerField(required=False, allow_null=True)


class StrategyVersionSerializer(ModelSerializer):
    class Meta:
        model = StrategyVersion
        fields = ["version", "type", "description", "prompt", "extractor", "settings", "actor", "created_at"]


class RunRequestSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    session = serializers.UUIDField(required=False, help_text="Run over this session's unread messages")
    user_id = serializers.CharField(required=False, max_length=255, help_text="…or over all of a user's sessions")

    def validate(self, attrs):
        if not attrs.get("session") and not attrs.get("user_id"):
            raise serializers.ValidationError("Give `session` (one session) or `user_id` (all of a user's sessions).")
        return attrs

    def openapi_request_schema(self, schema):
        return {
            **schema,
            "anyOf": [
                {"required": ["session"]},
                {"required": ["user_id"], "properties": {"user_id": {"type": "string", "minLength": 1}}},
            ],
        }


class RunAcceptedSerializer(serializers.Serializer):
    run = serializers.UUIDField()


class StrategyRunSerializer(ModelSerializer):
    strategy = serializers.SlugRelatedField(slug_field="name", read_only=True)
    strategy_id = serializers.UUIDField(read_only=True)
    strategy_version = serializers.IntegerField(source="strategy_version.version", read_only=True)
    status = serializers.ChoiceField(choices=RunStatus.choices, read_only=True)
    trigger = serializers.ChoiceField(choices=Trigger.choices, read_only=True)

    class Meta:
        model = StrategyRun
        fields = [
            "id", "strategy", "strategy_id", "strategy_version", "trigger", "trigger_detail", "status", "session",
            "user_id", "extractor", "from_seq", "to_seq", "sessions_processed", "messages_processed", "candidates",
            "added", "updated", "invalidated", "unchanged", "decisions", "input_tokens", "output_tokens",
            "llm_latency_ms", "duration_ms", "attempts", "error", "queued_at", "started_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields
