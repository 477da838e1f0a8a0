"""Serializers: strict on input (wrong types are refused, not coerced), plain on output."""

from decimal import Decimal

from django.conf import settings
from django.utils import timezone
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
from sessions_app.models import Conversation, Message, Role, Session, StateVersion, Turn, Weekday
from sessions_app.schema import (
    INT32_MAX,
    LONG_CONTEXT_FIELDS,
    MACHINE_MAX_LENGTH,
    MAX_REPORTED_COST_NANO_USD,
    MAX_TOKENS,
    MESSAGE_INPUT_FIELDS,
    MESSAGE_TEXT_LIMITS,
    MESSAGE_TURN_FIELDS,
    NANO_PER_USD,
    REPORTED_COST_FIELDS,
    ROLE_COUNTERS,
    STATS_FIELDS,
    TOKEN_FIELDS,
)
from sessions_app.selectors.blocks import RECENT, WINDOW_MAX
from sessions_app.selectors.weekly import WEEKS_MAX
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


REPORTED_COST_HELP = (
    "What your provider or tool said the call cost, in USD (kept beside the cost Open ACE computes, and compared "
    "with it: docs/accounting.md, 'The tools' own cost')."
)


def reported_cost_field(**kwargs) -> serializers.DecimalField:
    return serializers.DecimalField(
        required=False,
        allow_null=True,
        max_digits=16,
        decimal_places=9,
        min_value=Decimal(0),
        max_value=Decimal(MAX_REPORTED_COST_NANO_USD) / NANO_PER_USD,
        help_text=REPORTED_COST_HELP,
        **kwargs,
    )


def reported_cost_usd(nano: int | None) -> str | None:
    """Nano-dollars as the API writes money: a decimal string (nine places: what was reported, exactly)."""
    return None if nano is None else str((Decimal(nano) / NANO_PER_USD).quantize(Decimal("0.000000001")))


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
    reported = attrs.pop("reported_cost_usd", None)
    if reported is not None:
        attrs["reported_cost_nano_usd"] = int(reported * NANO_PER_USD)
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
    reported_cost_usd = reported_cost_field()
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
    reported_cost_usd = serializers.SerializerMethodField(help_text=REPORTED_COST_HELP)

    @extend_schema_field({"type": "string", "format": "decimal", "nullable": True})
    def get_reported_cost_usd(self, message) -> str | None:
        return reported_cost_usd(message.reported_cost_nano_usd)

    class Meta:
        model = Message
        fields = [
            "id",
            "session",
            "conversation",
            "seq",
            *(name for name in MESSAGE_INPUT_FIELDS if name not in (*LONG_CONTEXT_FIELDS, *REPORTED_COST_FIELDS)),
            "reported_cost_usd",
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
    reported_cost_usd = serializers.DecimalField(
        max_digits=24,
        decimal_places=6,
        allow_null=True,
        help_text="What the sources themselves reported the calls cost (Claude Code's OTLP cost_usd, OpenCode's and "
        "OpenClaw's cost, a client's reported_cost_usd); null when none reported one.",
    )
    reported_cost_requests = serializers.IntegerField(help_text="The requests that reported a cost")
    cost_difference_usd = serializers.DecimalField(
        max_digits=24,
        decimal_places=6,
        allow_null=True,
        help_text="Reported minus computed cost, over each model's usage (per day) whose every request reported a "
        "cost; null when there is none.",
    )
    cost_difference_percent = serializers.FloatField(
        allow_null=True, help_text="cost_difference_usd in percent of the computed cost it is compared with"
    )
    cost_flagged = serializers.BooleanField(help_text="The reported cost differs from ours by more than 1%")


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


# -- plan windows: 5-hour blocks and weeks (docs/accounting.md, "Plan windows") ------------------------------
ALL_TOKENS_HELP = "input + output + cache read + cache write (ccusage's totalTokens)"


def _money(help_text: str = "", **kwargs):
    return serializers.DecimalField(max_digits=24, decimal_places=6, help_text=help_text, **kwargs)


class PlanUsageSerializer(serializers.Serializer):
    """A window's usage as a percent of the plan's limits (null where the plan sets no limit of that kind)."""

    token_counting = serializers.ChoiceField(
        choices=["input_output", "all"], help_text="Which tokens count against the token limit"
    )
    tokens = serializers.IntegerField(help_text="The window's tokens as the plan counts them")
    token_limit = serializers.IntegerField(allow_null=True)
    tokens_percent = serializers.FloatField(allow_null=True)
    cost_usd = _money("The window's API-equivalent cost")
    cost_limit = _money(allow_null=True)
    cost_percent = serializers.FloatField(allow_null=True)
    messages = serializers.IntegerField(help_text="The window's requests (API responses)")
    message_limit = serializers.IntegerField(allow_null=True)
    messages_percent = serializers.FloatField(allow_null=True)
    percent = serializers.FloatField(allow_null=True, help_text="The highest of the three: the nearest limit")
    projected_tokens = serializers.IntegerField(allow_null=True, help_text="The projection's tokens as counted")
    projected_percent = serializers.FloatField(allow_null=True, help_text="`percent` of the projection")
    status = serializers.ChoiceField(
        choices=["ok", "warning", "exceeds"],
        allow_null=True,
        help_text="Of the projection when there is one: exceeds over 100 %, warning over 80 %, else ok",
    )


class AppliedPlanSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    applies = serializers.ChoiceField(choices=["user", "tenant"], help_text="The user's own plan, or the tenant's")
    user_id = serializers.CharField(allow_blank=True)
    preset = serializers.CharField()
    token_counting = serializers.CharField()
    token_limit = serializers.IntegerField(allow_null=True)
    cost_limit = _money(allow_null=True)
    message_limit = serializers.IntegerField(allow_null=True)
    weekly_token_limit = serializers.IntegerField(allow_null=True)
    weekly_cost_limit = _money(allow_null=True)
    weekly_message_limit = serializers.IntegerField(allow_null=True)
    week_starts_on = serializers.CharField()
    week_start_hour = serializers.IntegerField()


class BurnRateSerializer(serializers.Serializer):
    tokens_per_minute = serializers.FloatField(help_text="all_tokens per minute, first entry to last")
    tokens_per_minute_for_indicator = serializers.FloatField(help_text="input + output tokens per minute")
    cost_per_hour = _money()


class BlockProjectionSerializer(serializers.Serializer):
    all_tokens = serializers.IntegerField()
    input_output_tokens = serializers.IntegerField()
    cost_usd = _money()
    requests = serializers.IntegerField()
    remaining_minutes = serializers.IntegerField()


class BlockSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="ccusage's id: the start time, `gap-` before a gap block's")
    start_time = BoundedDateTimeField(help_text="The first entry's time floored to the UTC hour")
    end_time = BoundedDateTimeField(help_text="start_time + 5 h; a gap block's: the entry after it")
    actual_end_time = BoundedDateTimeField(allow_null=True, help_text="The last entry's time")
    is_active = serializers.BooleanField()
    is_gap = serializers.BooleanField()
    entries = serializers.IntegerField(help_text="LLM requests, and messages with usage outside any request")
    requests = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_creation_tokens = serializers.IntegerField()
    all_tokens = serializers.IntegerField(help_text=ALL_TOKENS_HELP)
    cost_usd = _money("API-equivalent USD of the priced tokens")
    unpriced_tokens = serializers.IntegerField(help_text="Tokens of models without a price: not in cost_usd")
    models = serializers.ListField(child=serializers.CharField())
    burn_rate = BurnRateSerializer(allow_null=True, help_text="The active block's only, as ccusage")
    projection = BlockProjectionSerializer(allow_null=True, help_text="The active block's totals at its end")
    plan_usage = PlanUsageSerializer(allow_null=True, help_text="Null without a plan, and for gap blocks")


class BlocksQuerySerializer(serializers.Serializer):
    user_id = serializers.CharField(help_text="Whose blocks (required: a plan's blocks are one user's)")
    machine = serializers.CharField(required=False, allow_blank=True)
    tool = serializers.CharField(required=False)
    project = serializers.CharField(required=False, allow_blank=True)
    since = BoundedDateTimeField(
        required=False, help_text="Blocks that end after this (default: 3 days before `until` or now)"
    )
    until = BoundedDateTimeField(required=False, help_text="Blocks that start before this (default: none)")

    def validate(self, attrs):
        until = attrs.get("until")
        since = attrs.setdefault("since", (until or timezone.now()) - RECENT)
        if until is not None and since >= until:
            raise serializers.ValidationError({"until": ["Must be after `since`."]})
        if (until or timezone.now()) - since > WINDOW_MAX:
            raise serializers.ValidationError(
                {"since": [f"At most {WINDOW_MAX.days} days before `until` (or now): ask for the rest in turn."]}
            )
        return attrs


class BlocksSerializer(serializers.Serializer):
    user_id = serializers.CharField()
    machine = serializers.CharField(allow_null=True)
    tool = serializers.CharField(allow_null=True)
    project = serializers.CharField(allow_null=True)
    since = BoundedDateTimeField()
    until = BoundedDateTimeField(allow_null=True)
    now = BoundedDateTimeField()
    block_hours = serializers.IntegerField()
    plan = AppliedPlanSerializer(allow_null=True, help_text="The user's plan, else the tenant's, else null")
    results = BlockSerializer(many=True, help_text="Oldest first, gap blocks included")
    active_block = BlockSerializer(allow_null=True)
    unpriced_models = serializers.ListField(child=serializers.CharField(allow_blank=True))


class WeekProjectionSerializer(serializers.Serializer):
    all_tokens = serializers.IntegerField()
    input_output_tokens = serializers.IntegerField()
    cost_usd = _money()
    requests = serializers.IntegerField()


class WeekSerializer(serializers.Serializer):
    week = serializers.DateField(help_text="The UTC date the week starts on (ccusage's `week`)")
    week_start = BoundedDateTimeField()
    week_end = BoundedDateTimeField()
    key = serializers.CharField(allow_null=True, help_text="The user_id or machine (group_by); null without group_by")
    is_current = serializers.BooleanField()
    requests = serializers.IntegerField()
    messages = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_creation_tokens = serializers.IntegerField()
    all_tokens = serializers.IntegerField(help_text=ALL_TOKENS_HELP)
    cost_usd = _money("API-equivalent USD of the priced tokens")
    unpriced_tokens = serializers.IntegerField(help_text="Tokens of models without a price: not in cost_usd")
    projection = WeekProjectionSerializer(allow_null=True, help_text="The current week's, at its pace so far")
    plan_usage = PlanUsageSerializer(allow_null=True, help_text="Against the user's weekly limits")


class WeeklyTotalsSerializer(serializers.Serializer):
    requests = serializers.IntegerField()
    messages = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_creation_tokens = serializers.IntegerField()
    all_tokens = serializers.IntegerField(help_text=ALL_TOKENS_HELP)
    cost_usd = _money()
    unpriced_tokens = serializers.IntegerField()


class WeeklyQuerySerializer(serializers.Serializer):
    user_id = serializers.CharField(required=False)
    machine = serializers.CharField(required=False, allow_blank=True)
    tool = serializers.CharField(required=False)
    project = serializers.CharField(required=False, allow_blank=True)
    group_by = serializers.ChoiceField(choices=["user_id", "machine"], required=False)
    since = BoundedDateTimeField(required=False, help_text="Rounded down to its week's start (default: 7 weeks back)")
    until = BoundedDateTimeField(required=False, help_text="Rounded up to a week's start (default: this week's end)")
    start_of_week = serializers.ChoiceField(
        choices=Weekday.values, required=False, help_text="Default: the plan's, else sunday (as ccusage)"
    )
    start_hour = serializers.IntegerField(
        required=False, min_value=0, max_value=23, help_text="The UTC hour weeks start (default: the plan's, else 0)"
    )

    def validate(self, attrs):
        since, until = attrs.get("since"), attrs.get("until")
        if since is not None and until is not None and since >= until:
            raise serializers.ValidationError({"until": ["Must be after `since`."]})
        if since is not None and ((until or timezone.now()) - since).days > 7 * WEEKS_MAX:
            raise serializers.ValidationError({"since": [f"At most {WEEKS_MAX} weeks before `until` (or now)."]})
        return attrs


class WeeklySerializer(serializers.Serializer):
    group_by = serializers.CharField(allow_null=True)
    user_id = serializers.CharField(allow_null=True)
    machine = serializers.CharField(allow_null=True)
    tool = serializers.CharField(allow_null=True)
    project = serializers.CharField(allow_null=True)
    since = BoundedDateTimeField()
    until = BoundedDateTimeField()
    now = BoundedDateTimeField()
    start_of_week = serializers.CharField()
    start_hour = serializers.IntegerField()
    plan = AppliedPlanSerializer(allow_null=True)
    results = WeekSerializer(many=True, help_text="Oldest week first; weeks without usage are left out")
    totals = WeeklyTotalsSerializer()
    unpriced_models = serializers.ListField(child=serializers.CharField(allow_blank=True))


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
    reported_cost_usd = reported_cost_field()
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
