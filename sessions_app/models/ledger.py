"""The message ledger: sessions, conversations, messages, LLM requests, state versions and chat turns.

Counting follows ../shared/seeds/000 and is stated once in `sessions_app.accounting`: a Request is one LLM
API call (a message carrying `auth_type` or a `request_id`; messages sharing a `request_id` count once);
messages are counted by role; a Conversation is one round that a real user message starts. The counters on
Session and Conversation (and the roll-ups of `models.usage`) are maintained by
`services.messages.messages_append` in the same transaction as the messages themselves, so reading them
never scans the message table.
"""

import uuid

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import F, Func, Q
from django.utils import timezone

from platform_kit.db import finite
from sessions_app.models.tenancy import ApiKey, Tenant
from sessions_app.schema import MACHINE_MAX_LENGTH, MESSAGE_TEXT_LIMITS

# Every token a model read or wrote: input + output + cache read + cache write (ccusage's "Total Tokens"). The
# stored `total_tokens` is input + output as reported (accounting rule 2); cache reads are often 10-20x more.
ALL_TOKENS = F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_creation_tokens")
# A message that adds usage on its own, not as part of an LLM request (accounting rule 3: a message that is no request
# adds its own tokens; a chat turn's answer its tokens and the calls it reports).
UNREQUESTED_USAGE = Q(llm_request__isnull=True) & (
    Q(input_tokens__gt=0)
    | Q(output_tokens__gt=0)
    | Q(cache_read_tokens__gt=0)
    | Q(cache_creation_tokens__gt=0)
    | Q(api_calls__gt=0)
)


LONG_CONTEXT_HELP = "A long-context request's tokens again (its prompt over 200K tokens: priced at that tier)"


class Role(models.TextChoices):
    """The roles of `sessions_app.schema.ROLES`, as Django choices (a test keeps the two the same)."""

    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    TOOL_RESULT = "toolResult", "toolResult"
    ERROR = "error", "error"
    SYSTEM = "system", "system"


class UsageCounters(models.Model):
    """The counters of ../shared/CONTRACT.md "Statistics" (`schema.COUNTER_FIELDS`), shared by sessions,
    conversations and roll-ups."""

    requests = models.BigIntegerField(default=0)
    messages = models.BigIntegerField(default=0)
    message_user = models.BigIntegerField(default=0)
    message_assistant = models.BigIntegerField(default=0)
    message_toolresult = models.BigIntegerField(default=0)
    message_error = models.BigIntegerField(default=0)
    message_system = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    cache_creation_5m_tokens = models.BigIntegerField("5-minute cache writes", default=0)
    cache_creation_1h_tokens = models.BigIntegerField("1-hour cache writes", default=0)
    total_tokens = models.BigIntegerField(default=0)
    long_context_input_tokens = models.BigIntegerField(default=0, help_text=LONG_CONTEXT_HELP)
    long_context_output_tokens = models.BigIntegerField(default=0)
    long_context_cache_read_tokens = models.BigIntegerField(default=0)
    long_context_cache_creation_tokens = models.BigIntegerField(default=0)
    long_context_cache_creation_1h_tokens = models.BigIntegerField(default=0)
    reported_cost_nano_usd = models.BigIntegerField(
        "reported cost (nano-USD)", default=0, help_text="What the sources reported the calls cost, in 10^-9 USD"
    )
    reported_cost_requests = models.BigIntegerField(default=0, help_text="The requests that reported a cost")

    class Meta:
        abstract = True


class Session(UsageCounters):
    """One tool-level session: a chat window, or one run of an agent from start until exit or /clear."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="sessions")
    name = models.CharField(max_length=255, blank=True)
    tool = models.CharField(max_length=64, blank=True, help_text="claude-code, qwen-code, openclaw, a chat app…")
    agent_session_id = models.CharField(
        "agent session ID", max_length=255, blank=True, help_text="The tool's own session id"
    )
    user_id = models.CharField("user ID", max_length=255)
    app = models.CharField(max_length=255, blank=True)
    project = models.CharField(
        max_length=255, blank=True, help_text="The project or working directory an agent ran in, if any"
    )
    machine = models.CharField(
        max_length=MACHINE_MAX_LENGTH,
        blank=True,
        default="",
        help_text="The machine the agent ran on: an upload's label (ace_push), else the importing host's name",
    )
    metadata = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Deleted through the API; kept for audit")
    # The key that created the session through the API: its usage counts in that key's budgets.
    api_key = models.ForeignKey(
        ApiKey,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
        editable=False,
        verbose_name="API key",
    )

    # Maintained by the message service under the session's row lock.
    last_seq = models.BigIntegerField(default=0)
    conversations = models.BigIntegerField(default=0)
    current_conversation = models.ForeignKey(
        "Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    last_message_at = models.DateTimeField(null=True, blank=True)
    state_version = models.IntegerField(default=0)

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            models.Index(fields=["tenant", "-started_at"], name="session_tenant_started"),
            models.Index(fields=["tenant", "user_id", "-started_at"], name="session_tenant_user"),
            models.Index(fields=["tenant", "tool", "agent_session_id"], name="session_tenant_agent_id"),
            models.Index(fields=["-started_at"], name="session_started"),
            # The dashboard's top sessions: ORDER BY total_tokens DESC LIMIT n within a tenant.
            models.Index(fields=["tenant", "-total_tokens"], name="session_tenant_tokens"),
            # The dashboard's top sessions: ORDER BY ALL_TOKENS DESC LIMIT n within a tenant.
            models.Index(F("tenant"), ALL_TOKENS.desc(), name="session_tenant_all_tokens"),
        ]

    def __str__(self):
        return self.name or f"{self.tool or 'session'} {str(self.id)[:8]}"

    @property
    def is_active(self):
        return self.ended_at is None


class Conversation(UsageCounters):
    """One round: from a user's message until the AI's final response, tool calls included."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="conversation_set", db_index=False)
    ordinal = models.IntegerField(help_text="1 for the session's first conversation, 2 for the next…")
    conversation_id = models.CharField(
        "conversation ID", max_length=255, blank=True, help_text="The client's own conversation id"
    )
    feishu_conversation_id = models.CharField(
        "Feishu conversation ID", max_length=MESSAGE_TEXT_LIMITS["feishu_conversation_id"], blank=True
    )
    started_at = models.DateTimeField()
    last_message_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["session", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["session", "ordinal", "tenant"], name="conversation_session_ordinal")
        ]
        indexes = [
            models.Index(fields=["-started_at"], name="conversation_started"),
            models.Index(
                fields=["session", "conversation_id"],
                name="conversation_external_id",
                condition=~Q(conversation_id=""),
            ),
        ]

    def __str__(self):
        return f"#{self.ordinal}"

    @property
    def message_count(self):
        return self.messages


class LlmRequest(models.Model):
    """One call to an LLM API, with the most complete token usage any of its messages reported."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="llm_requests", db_index=False)
    conversation = models.ForeignKey(
        Conversation, null=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    request_id = models.CharField("request ID", max_length=MESSAGE_TEXT_LIMITS["request_id"], blank=True)
    auth_type = models.CharField(max_length=MESSAGE_TEXT_LIMITS["auth_type"], blank=True)
    model = models.CharField(max_length=MESSAGE_TEXT_LIMITS["model"], blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    cache_creation_5m_tokens = models.BigIntegerField("5-minute cache writes", default=0)
    cache_creation_1h_tokens = models.BigIntegerField("1-hour cache writes", default=0)
    total_tokens = models.BigIntegerField(default=0)
    long_context_input_tokens = models.BigIntegerField(default=0, help_text=LONG_CONTEXT_HELP)
    long_context_output_tokens = models.BigIntegerField(default=0)
    long_context_cache_read_tokens = models.BigIntegerField(default=0)
    long_context_cache_creation_tokens = models.BigIntegerField(default=0)
    long_context_cache_creation_1h_tokens = models.BigIntegerField(default=0)
    reported_cost_nano_usd = models.BigIntegerField(
        "reported cost (nano-USD)", default=0, help_text="What the sources reported the calls cost, in 10^-9 USD"
    )
    reported_cost_requests = models.BigIntegerField(default=0, help_text="The requests that reported a cost")
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "LLM request"
        constraints = [
            models.UniqueConstraint(
                fields=["session", "request_id", "tenant"],
                name="llmrequest_session_request_id",
                condition=~Q(request_id=""),
            )
        ]
        indexes = [
            models.Index(fields=["session", "created_at"], name="llmrequest_session_created"),
            models.Index(fields=["-created_at"], name="llmrequest_created"),
            models.Index(fields=["request_id"], name="llmrequest_request_id", condition=~Q(request_id="")),
        ]

    def __str__(self):
        return self.request_id or str(self.id)


class CjkSearchVector(Func):
    """`ace_tsvector(text)`: English full-text, with each CJK character a token of its own.

    PostgreSQL has no Chinese parser; splitting CJK runs into characters and searching them as phrases
    (`"查 看"` → '查' <-> '看') finds any Chinese substring, with the same GIN index as English words.
    The SQL function is created by migration 0001.
    """

    function = "ace_tsvector"
    output_field = SearchVectorField()


class MessageManager(models.Manager):
    def get_queryset(self):
        # The search vector is only ever used in WHERE clauses; reading it back costs ~2 KB a row.
        return super().get_queryset().defer("search_vector")


class Message(models.Model):
    """One atomic interaction (the memory documents' "Event"). Append-only."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="message_set", db_index=False)
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="message_set", db_index=False
    )
    llm_request = models.ForeignKey(
        LlmRequest,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="message_set",
        db_index=False,
        verbose_name="LLM request",
    )
    seq = models.BigIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    thinking = models.TextField(blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_name = models.CharField(max_length=MESSAGE_TEXT_LIMITS["tool_name"], blank=True)
    auth_type = models.CharField(max_length=MESSAGE_TEXT_LIMITS["auth_type"], blank=True)
    request_id = models.CharField("request ID", max_length=MESSAGE_TEXT_LIMITS["request_id"], blank=True)
    model = models.CharField(max_length=MESSAGE_TEXT_LIMITS["model"], blank=True)
    finish_reason = models.CharField(max_length=MESSAGE_TEXT_LIMITS["finish_reason"], blank=True)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cache_read_tokens = models.BigIntegerField(null=True, blank=True)
    cache_creation_tokens = models.BigIntegerField(null=True, blank=True)
    cache_creation_5m_tokens = models.BigIntegerField("5-minute cache writes", null=True, blank=True)
    cache_creation_1h_tokens = models.BigIntegerField("1-hour cache writes", null=True, blank=True)
    total_tokens = models.BigIntegerField(null=True, blank=True)
    long_context_input_tokens = models.BigIntegerField(null=True, blank=True, help_text=LONG_CONTEXT_HELP)
    long_context_output_tokens = models.BigIntegerField(null=True, blank=True)
    long_context_cache_read_tokens = models.BigIntegerField(null=True, blank=True)
    long_context_cache_creation_tokens = models.BigIntegerField(null=True, blank=True)
    long_context_cache_creation_1h_tokens = models.BigIntegerField(null=True, blank=True)
    reported_cost_nano_usd = models.BigIntegerField(
        "reported cost (nano-USD)", null=True, blank=True, help_text="What the source reported the call cost"
    )
    reported_cost_requests = models.BigIntegerField(null=True, blank=True)
    elapsed_ms = models.IntegerField("elapsed (ms)", null=True, blank=True)
    external_id = models.CharField("external ID", max_length=MESSAGE_TEXT_LIMITS["external_id"], null=True, blank=True)
    feishu_conversation_id = models.CharField(
        "Feishu conversation ID", max_length=MESSAGE_TEXT_LIMITS["feishu_conversation_id"], blank=True
    )
    metadata = models.JSONField(default=dict, blank=True)
    # Chat turns (../shared/seeds/003). On a user message `thinking` is the system prompt snapshot and
    # `tool_names` the tools offered; on an assistant message, its reasoning and the tools it called.
    attachments = models.JSONField(null=True, blank=True)
    thinking_mode = models.CharField(max_length=MESSAGE_TEXT_LIMITS["thinking_mode"], blank=True)
    skill_names = models.JSONField(null=True, blank=True)
    tool_names = models.JSONField(null=True, blank=True)
    max_tokens = models.IntegerField(null=True, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    api_calls = models.IntegerField(
        "API calls",
        null=True,
        blank=True,
        help_text="LLM API calls this message accounts for, when the client reports them",
    )
    created_at = models.DateTimeField(default=timezone.now)
    received_at = models.DateTimeField(default=timezone.now, editable=False)
    # Set when retention purged the message's content (sessions_app.services.content_purge): its text, thinking,
    # tool arguments, attachments and free-form metadata are gone; its ids, counts and times stay.
    content_purged_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Filled by the database (migration 0008): on insert for content up to search.INLINE_CHARS characters,
    # after the commit (sessions_app.tasks.index_messages) for longer content. Never written by Python.
    search_vector = SearchVectorField(null=True, editable=False)

    objects = MessageManager()
    db_computed_fields = ("search_vector",)  # left out of COPY (platform_kit.db.copy_insert)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq", "tenant"], name="message_session_seq"),
            models.CheckConstraint(condition=finite("temperature"), name="message_temperature_finite"),
            models.UniqueConstraint(
                fields=["session", "external_id", "tenant"],
                name="message_session_external_id",
                condition=Q(external_id__isnull=False),
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "seq"], name="message_conversation_seq"),
            models.Index(fields=["tenant", "-created_at"], name="message_tenant_created"),
            models.Index(fields=["-created_at"], name="message_created"),
            GinIndex(fields=["search_vector"], name="message_search"),
            # Long messages waiting for their search vector (a handful at any time).
            models.Index(fields=["received_at"], name="message_unindexed", condition=Q(search_vector__isnull=True)),
            # Auditors look a message up by the client's or the LLM provider's id.
            models.Index(fields=["external_id"], name="message_external_id", condition=Q(external_id__isnull=False)),
            models.Index(fields=["request_id"], name="message_request_id", condition=~Q(request_id="")),
            # The messages retention may still purge: a run reads these and nothing of the purged history, under
            # any policy (a cutoff moved either way, roles added or removed). Role before time: a role-limited
            # policy reads only its roles; an every-role one skips across the five roles.
            models.Index(
                fields=["tenant", "role", "created_at"],
                name="message_content_kept",
                condition=Q(content_purged_at__isnull=True),
            ),
            # The messages that are usage of their own, outside any LLM request (a chat turn's answer, tokens posted
            # without a request id): with the requests, the entries of a user's 5-hour blocks (selectors/blocks.py).
            # A handful per session, so a block reads them without walking the session's other messages.
            models.Index(
                fields=["session", "created_at"], name="message_unrequested_usage", condition=UNREQUESTED_USAGE
            ),
        ]

    def __str__(self):
        return f"{self.role} #{self.seq}"


class StateVersion(models.Model):
    """One version of a session's state. The current state is the highest version; none is ever changed."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="state_versions", db_index=False)
    version = models.IntegerField()
    data = models.JSONField(default=dict)
    change = models.CharField(max_length=16, help_text="put, patch or admin")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["session", "-version"]
        constraints = [models.UniqueConstraint(fields=["session", "version", "tenant"], name="state_session_version")]

    def __str__(self):
        return f"v{self.version}"


class TurnStatus(models.TextChoices):
    STREAMING = "streaming", "streaming"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed (finish_reason error)"
    ABANDONED = "abandoned", "abandoned (never completed)"


class Turn(models.Model):
    """One streamed chat turn: a user message and the assistant's answer, written field by field."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns", db_index=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    # One turn per message (the unique constraints below, with tenant_id for co-location: docs/scaling.md).
    user_message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="turn_as_user", db_index=False)
    assistant_message = models.ForeignKey(
        Message, on_delete=models.CASCADE, related_name="turn_as_assistant", db_index=False
    )
    status = models.CharField(max_length=16, choices=TurnStatus.choices, default=TurnStatus.STREAMING)
    external_id = models.CharField("external ID", max_length=MESSAGE_TEXT_LIMITS["external_id"], null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    system_ready_at = models.DateTimeField(null=True, blank=True)
    last_activity_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    completion_digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the completion body")

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "external_id", "tenant"],
                name="turn_session_external_id",
                condition=Q(external_id__isnull=False),
            ),
            models.UniqueConstraint(fields=["user_message", "tenant"], name="turn_user_message"),
            models.UniqueConstraint(fields=["assistant_message", "tenant"], name="turn_assistant_message"),
        ]
        indexes = [
            models.Index(fields=["session", "-started_at"], name="turn_session_started"),
            models.Index(fields=["last_activity_at"], name="turn_streaming", condition=Q(status=TurnStatus.STREAMING)),
            models.Index(fields=["-started_at"], name="turn_started"),
        ]

    def __str__(self):
        return f"turn {str(self.id)[:8]} ({self.status})"
