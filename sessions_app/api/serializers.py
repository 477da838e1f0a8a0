"""Serializers: strict on input (wrong types are refused, not coerced), plain on output."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from platform_kit.api.fields import (
    BoundedDateTimeField,
    JSONObjectField,
    RejectUnknownFieldsMixin,
    StoredJSONField,
    StrictCharField,
    StrictIntegerField,
    StrictNumberField,
)
from platform_kit.api.serializers import ModelSerializer
from sessions_app.models import Conversation, Message, Role, Session, StateVersion, Turn
from sessions_app.schema import (
    INT32_MAX,
    MACHINE_MAX_LENGTH,
    MAX_TOKENS,
    MESSAGE_INPUT_FIELDS,
    MESSAGE_TEXT_LIMITS,
    MESSAGE_TURN_FIELDS,
    ROLE_COUNTERS,
    STATS_FIELDS,
    TOKEN_FIELDS,
)
from sessions_app.validators import MACHINE_NAME


# -- sessions ---------------------------------------------------------------------------------------
class SessionSerializer(RejectUnknownFieldsMixin, ModelSerializer):
    name = StrictCharField(max_length=255, required=False, allow_blank=True)
    tool = StrictCharField(max_length=64, required=False, allow_blank=True)
    agent_session_id = StrictCharField(max_length=255, required=False, allow_blank=True)
    user_id = StrictCharField(max_length=255)
    app = StrictCharField(max_length=255, required=False, allow_blank=True)
    project = StrictCharField(max_length=255, required=False, allow_blank=True)
    machine = StrictCharField(
        max_length=MACHINE_MAX_LENGTH,
        required=False,
        allow_blank=True,
        validators=[MACHINE_NAME],
        help_text="The machine the agent ran on (letters, digits, `.`, `_`, `-`; up to 100). Sessions imported "
        "from uploads get the upload's `machine`; local imports the server's host name.",
    )
    metadata = JSONObjectField(required=False)
    active = serializers.BooleanField(source="is_active", read_only=True)
    stats = serializers.SerializerMethodField()

    class Meta:
        model = Session
        fields = [
            "id",
            "name",
            "tool",
            "agent_session_id",
            "user_id",
            "app",
            "project",
            "machine",
            "metadata",
            "started_at",
            "ended_at",
            "active",
            "last_message_at",
            "created_at",
            "updated_at",
            "stats",
        ]
        read_only_fields = ["id", "ended_at", "last_message_at", "created_at", "updated_at"]

    @extend_schema_field({"type": "object", "properties": {f: {"type": "integer"} for f in STATS_FIELDS}})
    def get_stats(self, session):
        from sessions_app.selectors.usage import session_stats

        return session_stats(session=session)


class SessionUpdateSerializer(SessionSerializer):
    user_id = StrictCharField(max_length=255, required=False)


# -- messages ---------------------------------------------------------------------------------------
CACHE_WRITE_HELP = {
    "5m": "Of cache_creation_tokens, those written to a 5-minute cache (the default lifetime).",
    "1h": "Of cache_creation_tokens, those written to a 1-hour cache (priced higher).",
}


def validate_cache_writes(attrs: dict) -> dict:
    """Cache writes by lifetime add up to no more than the cache writes they are part of (accounting.cache_writes
    fills in what is left out)."""
    written = attrs.get("cache_creation_tokens")
    lifetimes = (attrs.get("cache_creation_5m_tokens") or 0) + (attrs.get("cache_creation_1h_tokens") or 0)
    if written is not None and lifetimes > written:
        raise serializers.ValidationError(
            {
                "cache_creation_tokens": [
                    f"Must be at least cache_creation_5m_tokens + cache_creation_1h_tokens ({lifetimes}): "
                    "it is their sum, or leave it out."
                ]
            }
        )
    return attrs


class MessageInSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    role = serializers.ChoiceField(
        choices=Role.choices,
        error_messages={"invalid_choice": f'"{{input}}" is not a role. Use one of: {", ".join(Role.values)}.'},
    )
    content = StrictCharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    created_at = BoundedDateTimeField(required=False)
    external_id = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["external_id"], allow_null=True)
    conversation = StrictCharField(
        required=False,
        max_length=MESSAGE_TEXT_LIMITS["conversation"],
        allow_null=True,
        help_text="A conversation id of this session, or your own conversation id (created on first use).",
    )
    auth_type = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["auth_type"], allow_blank=True)
    request_id = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["request_id"], allow_blank=True)
    model = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["model"], allow_blank=True)
    thinking = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    tool_calls = StoredJSONField(required=False, allow_null=True)
    tool_name = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["tool_name"], allow_blank=True)
    input_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    output_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    cache_read_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    cache_creation_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    cache_creation_5m_tokens = StrictIntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS, help_text=CACHE_WRITE_HELP["5m"]
    )
    cache_creation_1h_tokens = StrictIntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS, help_text=CACHE_WRITE_HELP["1h"]
    )
    total_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    elapsed_ms = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=INT32_MAX)
    finish_reason = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["finish_reason"], allow_blank=True)
    feishu_conversation_id = StrictCharField(
        required=False, max_length=MESSAGE_TEXT_LIMITS["feishu_conversation_id"], allow_blank=True
    )
    metadata = JSONObjectField(required=False)

    def validate(self, attrs):
        return validate_cache_writes(attrs)

    def validate_tool_calls(self, value):
        if value is not None and not isinstance(value, list | dict):
            raise serializers.ValidationError("Must be a JSON array (or object) of tool calls.")
        return value


class MessageBatchSerializer(serializers.ListSerializer):
    child = MessageInSerializer()

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("child", MessageInSerializer())
        kwargs.setdefault("allow_empty", False)
        kwargs.setdefault("max_length", settings.ACE_MAX_BATCH)
        kwargs["error_messages"] = {
            "max_length": f"A batch holds at most {settings.ACE_MAX_BATCH} messages; split it.",
            "empty": "The batch is empty.",
            "not_a_list": "Send one message object or a list of them.",
        }
        super().__init__(*args, **kwargs)


class MessageSerializer(ModelSerializer):
    session = serializers.UUIDField(source="session_id", read_only=True)
    conversation = serializers.UUIDField(source="conversation_id", read_only=True, allow_null=True)

    class Meta:
        model = Message
        fields = [
            "id",
            "session",
            "conversation",
            "seq",
            *MESSAGE_INPUT_FIELDS,
            *MESSAGE_TURN_FIELDS,
            "created_at",
            "received_at",
            "content_purged_at",  # set when retention purged its content (docs/retention.md)
        ]
        read_only_fields = fields


# -- conversations and stats ------------------------------------------------------------------------
class StatsSerializer(serializers.Serializer):
    """The contract's counters (plus message_system)."""

    requests = serializers.IntegerField()
    conversations = serializers.IntegerField()
    messages = serializers.IntegerField()
    message_user = serializers.IntegerField()
    message_assistant = serializers.IntegerField()
    message_toolresult = serializers.IntegerField()
    message_error = serializers.IntegerField()
    message_system = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_creation_tokens = serializers.IntegerField()
    cache_creation_5m_tokens = serializers.IntegerField(help_text=CACHE_WRITE_HELP["5m"])
    cache_creation_1h_tokens = serializers.IntegerField(help_text=CACHE_WRITE_HELP["1h"])
    total_tokens = serializers.IntegerField()


class ConversationSerializer(ModelSerializer):
    session = serializers.UUIDField(source="session_id", read_only=True)
    message_count = serializers.IntegerField(source="messages", read_only=True)

    class Meta:
        model = Conversation
        fields = [
            "id",
            "session",
            "ordinal",
            "conversation_id",
            "feishu_conversation_id",
            "message_count",
            "started_at",
            "last_message_at",
            "requests",
            *ROLE_COUNTERS.values(),
            *TOKEN_FIELDS,
        ]
        read_only_fields = fields


class CostSerializer(serializers.Serializer):
    cost_usd = serializers.DecimalField(
        max_digits=24,
        decimal_places=6,
        help_text="USD of the priced tokens (model prices in the admin), as a string with 6 decimals. "
        "Computed when read, so a corrected price shows at once.",
    )
    unpriced_tokens = serializers.IntegerField(
        help_text="Input, output and cache tokens of models without a price: not in cost_usd. 0 when all are priced."
    )


class SessionStatsSerializer(StatsSerializer, CostSerializer):
    unpriced_models = serializers.ListField(child=serializers.CharField(allow_blank=True))


class UsageSerializer(StatsSerializer, CostSerializer):
    """Grouped usage: the counters, sessions started, and cost."""

    sessions = serializers.IntegerField(
        help_text="Sessions whose first message falls in the group (by model: the model of that first message)"
    )


class GroupedRowSerializer(UsageSerializer):
    key = serializers.CharField(
        allow_null=True, help_text="The day, tool, user_id, project, machine, model or session id"
    )
    # Grouped by session only:
    name = serializers.CharField(required=False)
    tool = serializers.CharField(required=False)
    user_id = serializers.CharField(required=False)
    project = serializers.CharField(required=False)
    machine = serializers.CharField(required=False)
    started_at = BoundedDateTimeField(required=False)


class GroupedStatsSerializer(serializers.Serializer):
    group_by = serializers.CharField()
    since = BoundedDateTimeField(allow_null=True)
    until = BoundedDateTimeField(allow_null=True)
    results = GroupedRowSerializer(many=True)
    totals = UsageSerializer()
    unpriced_models = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        help_text="Models with tokens in the window but no price ('' for messages without a model)",
    )


class GroupedStatsQuerySerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(
        choices=["day", "tool", "user_id", "project", "machine", "model", "session"], default="day"
    )
    since = BoundedDateTimeField(required=False)
    until = BoundedDateTimeField(required=False)
    tool = serializers.CharField(required=False)
    user_id = serializers.CharField(required=False)
    project = serializers.CharField(required=False, allow_blank=True, help_text="'' selects sessions without one")
    machine = serializers.CharField(
        required=False, allow_blank=True, help_text="'' selects sessions without one (imported before machines)"
    )
    model = serializers.CharField(required=False, allow_blank=True)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=100)

    def validate(self, attrs):
        if attrs.get("since") and attrs.get("until") and attrs["since"] >= attrs["until"]:
            raise serializers.ValidationError({"until": ["Must be after `since`."]})
        if attrs.get("group_by") == "session" and "model" in attrs:
            raise serializers.ValidationError(
                {"model": ["Cannot narrow group_by=session: a session uses many models. Group by model instead."]}
            )
        return attrs


# -- state ------------------------------------------------------------------------------------------
class StateSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    data = serializers.DictField()
    updated_at = BoundedDateTimeField(allow_null=True)


class StateVersionSerializer(ModelSerializer):
    updated_at = BoundedDateTimeField(source="created_at")

    class Meta:
        model = StateVersion
        fields = ["version", "data", "change", "updated_at"]


# -- chat turns -------------------------------------------------------------------------------------
class NameListField(serializers.ListField):
    child = StrictCharField(max_length=255)


class ToolCallSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """{id, name, arguments, result}; OpenAI's {id, type, function: {name, arguments}} is accepted too."""

    id = StrictCharField(required=False, max_length=255, allow_blank=True)
    type = StrictCharField(required=False, max_length=32)
    name = StrictCharField(max_length=255)
    arguments = StoredJSONField(required=False, allow_null=True)
    result = StoredJSONField(required=False, allow_null=True)

    def openapi_request_schema(self, schema):
        # OpenAI's form names the call inside `function`.
        function = {
            "type": "object",
            "description": "OpenAI's form: {name, arguments} (instead of `name` and `arguments`)",
            "properties": {"name": schema["properties"]["name"], "arguments": {}},
            "required": ["name"],
        }
        schema = {**schema, "properties": {**schema["properties"], "function": function}}
        if self.partial:
            return schema
        schema.pop("required", None)  # `name` was the only one
        return {**schema, "anyOf": [{"required": ["name"]}, {"required": ["function"]}]}

    def to_internal_value(self, data):
        if isinstance(data, dict) and isinstance(data.get("function"), dict) and "name" not in data:
            function = data["function"]
            data = {**{k: v for k, v in data.items() if k != "function"}, **function}
        return super().to_internal_value(data)


class TurnStartSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    attachments = serializers.ListField(child=StoredJSONField(), required=False, help_text="Attachment ids")
    thinking_mode = StrictCharField(
        required=False, max_length=MESSAGE_TEXT_LIMITS["thinking_mode"], allow_blank=True, default=""
    )
    conversation = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["conversation"], allow_null=True)
    external_id = StrictCharField(required=False, max_length=MESSAGE_TEXT_LIMITS["external_id"], allow_null=True)


class SystemReadySerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    system_prompt = StrictCharField(allow_blank=True, trim_whitespace=False)


class CheckpointSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    content = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    thinking = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Send `content` and/or `thinking`.")
        return attrs

    def openapi_request_schema(self, schema):
        return {**schema, "minProperties": 1}


class TurnCompleteSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    thinking = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    tool_calls = ToolCallSerializer(many=True, required=False)
    tool_names = NameListField(required=False, help_text="Tools actually called")
    model = StrictCharField(max_length=255)
    max_tokens = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=INT32_MAX)
    temperature = StrictNumberField(required=False, allow_null=True, min_value=0, max_value=10)
    finish_reason = serializers.ChoiceField(
        choices=["stop", "length", "tool_calls", "error"],
        error_messages={"invalid_choice": '"{input}" is not a finish reason. Use stop, length, tool_calls or error.'},
    )
    input_tokens = StrictIntegerField(min_value=0, max_value=MAX_TOKENS)
    output_tokens = StrictIntegerField(min_value=0, max_value=MAX_TOKENS)
    total_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    cache_read_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    cache_creation_tokens = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS)
    cache_creation_5m_tokens = StrictIntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS, help_text=CACHE_WRITE_HELP["5m"]
    )
    cache_creation_1h_tokens = StrictIntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_TOKENS, help_text=CACHE_WRITE_HELP["1h"]
    )
    elapsed_ms = StrictIntegerField(min_value=0, max_value=INT32_MAX)
    skill_names = NameListField(required=False)
    available_tool_names = NameListField(required=False, help_text="Tools offered to the model this turn")
    requests = StrictIntegerField(
        required=False, min_value=0, max_value=INT32_MAX, help_text="LLM API calls made (default 1)"
    )
    error = StrictCharField(required=False, allow_blank=True, help_text="What went wrong, with finish_reason error")
    tool_schema = serializers.JSONField(
        required=False, help_text="The tools' function schema: traced as the ai:ToolSchema span, never stored"
    )

    def validate(self, attrs):
        return validate_cache_writes(attrs)


class TurnSerializer(ModelSerializer):
    turn = serializers.UUIDField(source="id", read_only=True)
    conversation = serializers.UUIDField(source="conversation_id", read_only=True)
    session = serializers.UUIDField(source="session_id", read_only=True)
    user_message = MessageSerializer(read_only=True)
    assistant_message = MessageSerializer(read_only=True)

    class Meta:
        model = Turn
        fields = [
            "turn",
            "session",
            "conversation",
            "status",
            "external_id",
            "started_at",
            "system_ready_at",
            "completed_at",
            "user_message",
            "assistant_message",
        ]
        read_only_fields = fields


class TurnProgressSerializer(ModelSerializer):
    """What system-ready and checkpoints answer: the turn's state, not the text just sent."""

    turn = serializers.UUIDField(source="id", read_only=True)

    class Meta:
        model = Turn
        fields = ["turn", "status", "system_ready_at", "last_activity_at"]
        read_only_fields = fields
