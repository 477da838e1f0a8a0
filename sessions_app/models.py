"""Tenants, API keys, sessions, conversations, messages, LLM requests, state and usage roll-ups.

Counting follows ../shared/seeds/000: a Request is one LLM API call (a message carrying `auth_type` or a
`request_id`; messages sharing a `request_id` count once); messages are counted by role; a Conversation
is one round that a real user message starts. The counters on Session, Conversation and UsageHourly are
maintained by `services.messages.messages_append` in the same transaction as the messages themselves,
so reading them never scans the message table.
"""

import uuid

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Func, Q
from django.utils import timezone


class Role(models.TextChoices):
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    TOOL_RESULT = "toolResult", "toolResult"
    ERROR = "error", "error"
    SYSTEM = "system", "system"


# Contract counter name per role.
ROLE_COUNTER = {
    Role.USER: "message_user",
    Role.ASSISTANT: "message_assistant",
    Role.TOOL_RESULT: "message_toolresult",
    Role.ERROR: "message_error",
    Role.SYSTEM: "message_system",
}
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")


class Tenant(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class ApiKey(models.Model):
    """An API key; only its SHA-256 digest is stored. The first characters (`prefix`) find the row."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self):
        return f"{self.prefix}… ({self.tenant})"

    @property
    def is_active(self):
        return self.revoked_at is None


class UsageCounters(models.Model):
    """The counters of ../shared/CONTRACT.md "Statistics", shared by sessions, conversations and roll-ups."""

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
    total_tokens = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


COUNTER_FIELDS = (
    "requests",
    "messages",
    "message_user",
    "message_assistant",
    "message_toolresult",
    "message_error",
    "message_system",
    *TOKEN_FIELDS,
)


class Session(UsageCounters):
    """One tool-level session: a chat window, or one run of an agent from start until exit or /clear."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="sessions")
    name = models.CharField(max_length=255, blank=True)
    tool = models.CharField(max_length=64, blank=True, help_text="claude-code, qwen-code, openclaw, a chat app…")
    agent_session_id = models.CharField(max_length=255, blank=True, help_text="The tool's own session id")
    user_id = models.CharField(max_length=255)
    app = models.CharField(max_length=255, blank=True)
    project = models.CharField(
        max_length=255, blank=True, help_text="The project or working directory an agent ran in, if any"
    )
    metadata = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Deleted through the API; kept for audit")

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
        ]

    def __str__(self):
        return self.name or f"{self.tool or 'session'} {str(self.id)[:8]}"

    @property
    def is_active(self):
        return self.ended_at is None


class Conversation(UsageCounters):
    """One round: from a user's message until the AI's final response, tool calls included."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="conversation_set", db_index=False)
    ordinal = models.IntegerField(help_text="1 for the session's first conversation, 2 for the next…")
    conversation_id = models.CharField(max_length=255, blank=True, help_text="The client's own conversation id")
    feishu_conversation_id = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField()
    last_message_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["session", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["session", "ordinal"], name="conversation_session_ordinal")]
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

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="llm_requests", db_index=False)
    conversation = models.ForeignKey(
        Conversation, null=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    request_id = models.CharField(max_length=255, blank=True)
    auth_type = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=255, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    total_tokens = models.BigIntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "LLM request"
        constraints = [
            models.UniqueConstraint(
                fields=["session", "request_id"], name="llmrequest_session_request_id", condition=~Q(request_id="")
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

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="message_set", db_index=False)
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="message_set", db_index=False
    )
    llm_request = models.ForeignKey(
        LlmRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="message_set", db_index=False
    )
    seq = models.BigIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    thinking = models.TextField(blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_name = models.CharField(max_length=255, blank=True)
    auth_type = models.CharField(max_length=64, blank=True)
    request_id = models.CharField(max_length=255, blank=True)
    model = models.CharField(max_length=255, blank=True)
    finish_reason = models.CharField(max_length=32, blank=True)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cache_read_tokens = models.BigIntegerField(null=True, blank=True)
    cache_creation_tokens = models.BigIntegerField(null=True, blank=True)
    total_tokens = models.BigIntegerField(null=True, blank=True)
    elapsed_ms = models.IntegerField(null=True, blank=True)
    external_id = models.CharField(max_length=255, null=True, blank=True)
    feishu_conversation_id = models.CharField(max_length=255, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Chat turns (../shared/seeds/003). On a user message `thinking` is the system prompt snapshot and
    # `tool_names` the tools offered; on an assistant message, its reasoning and the tools it called.
    attachments = models.JSONField(null=True, blank=True)
    thinking_mode = models.CharField(max_length=32, blank=True)
    skill_names = models.JSONField(null=True, blank=True)
    tool_names = models.JSONField(null=True, blank=True)
    max_tokens = models.IntegerField(null=True, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    api_calls = models.IntegerField(
        null=True, blank=True, help_text="LLM API calls this message accounts for, when the client reports them"
    )
    created_at = models.DateTimeField(default=timezone.now)
    received_at = models.DateTimeField(default=timezone.now, editable=False)
    # Filled by the database (migration 0008): on insert for content up to search.INLINE_CHARS characters,
    # after the commit (sessions_app.tasks.index_messages) for longer content. Never written by Python.
    search_vector = SearchVectorField(null=True, editable=False)

    objects = MessageManager()
    db_computed_fields = ("search_vector",)  # left out of COPY (services.messages._copy_insert)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_session_seq"),
            models.UniqueConstraint(
                fields=["session", "external_id"],
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
        ]

    def __str__(self):
        return f"{self.role} #{self.seq}"


class StateVersion(models.Model):
    """One version of a session's state. The current state is the highest version; none is ever changed."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="state_versions", db_index=False)
    version = models.IntegerField()
    data = models.JSONField(default=dict)
    change = models.CharField(max_length=16, help_text="put, patch or admin")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["session", "-version"]
        constraints = [models.UniqueConstraint(fields=["session", "version"], name="state_session_version")]

    def __str__(self):
        return f"v{self.version}"


class UsageRollup(UsageCounters):
    """The dimensions and counters every usage roll-up shares; each adds its time bucket."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    tool = models.CharField(max_length=64, blank=True)
    user_id = models.CharField(max_length=255, blank=True)
    project = models.CharField(max_length=255, blank=True)
    model = models.CharField(max_length=255, blank=True)
    conversations = models.BigIntegerField(default=0)
    sessions = models.BigIntegerField(default=0)

    class Meta:
        abstract = True

    def _dimensions(self) -> str:
        return f"{self.tool or '-'} {self.user_id or '-'} {self.model or '-'}"


class UsageHourly(UsageRollup):
    """Counters per tenant, UTC hour, tool, user, project and model: what grouped statistics and the
    dashboard read. A message counts in the hour it was created; a conversation in the hour of the
    message that started it; a session once, in the hour (and under the model) of its first message."""

    hour = models.DateTimeField()

    class Meta:
        verbose_name = "hourly usage"
        verbose_name_plural = "hourly usage"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "hour", "tool", "user_id", "project", "model"], name="usage_hourly_key"
            )
        ]

    def __str__(self):
        return f"{self.hour:%Y-%m-%d %H}:00 {self._dimensions()}"


class UsageDaily(UsageRollup):
    """The hourly roll-ups summed per UTC day, maintained with them: what the dashboard and whole-day
    statistics read (a quarter of the rows or fewer, so a 90-day window sums quickly)."""

    day = models.DateField()

    class Meta:
        verbose_name = "daily usage"
        verbose_name_plural = "daily usage"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "day", "tool", "user_id", "project", "model"], name="usage_daily_key"
            )
        ]

    def __str__(self):
        return f"{self.day:%Y-%m-%d} {self._dimensions()}"


class SessionModelUsage(models.Model):
    """A session's requests and tokens per model, kept beside the hourly roll-ups: what a session's cost
    is computed from (a price applies per model), without reading its requests."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="model_usage", db_index=False)
    model = models.CharField(max_length=255, blank=True)
    requests = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    total_tokens = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "session usage by model"
        verbose_name_plural = "session usage by model"
        constraints = [models.UniqueConstraint(fields=["session", "model"], name="session_model_usage_key")]
        # The models a tenant used, to price them: an index-only scan, not a read of the table.
        indexes = [models.Index(fields=["tenant", "model"], name="session_model_usage_tenant")]

    def __str__(self):
        return f"{self.model or '-'}: {self.total_tokens:,} tokens"


class PriceMatch(models.TextChoices):
    EXACT = "exact", "exact name"
    PREFIX = "prefix", "names starting with it"


class ModelPrice(models.Model):
    """List price of a model in USD per million tokens of each kind. Costs are computed from token sums
    when they are read, so correcting a price here changes every cost shown, past usage included."""

    id = models.BigAutoField(primary_key=True)
    model = models.CharField(
        max_length=255,
        help_text="A model name as the tools report it (lower case), or the beginning of such names (see match).",
    )
    match = models.CharField(
        max_length=8,
        choices=PriceMatch.choices,
        default=PriceMatch.EXACT,
        help_text="An exact name wins over prefixes; among prefixes the longest wins.",
    )
    provider = models.CharField(max_length=64, blank=True, help_text="anthropic, openai, google, alibaba…")
    input_usd_per_mtok = models.DecimalField(
        "input", max_digits=12, decimal_places=6, help_text="USD per million input tokens (not read from a cache)"
    )
    output_usd_per_mtok = models.DecimalField("output", max_digits=12, decimal_places=6)
    cache_read_usd_per_mtok = models.DecimalField("cache read", max_digits=12, decimal_places=6)
    cache_write_usd_per_mtok = models.DecimalField("cache write", max_digits=12, decimal_places=6)
    source = models.URLField(max_length=500, blank=True, help_text="Where the price was published")
    checked_on = models.DateField(null=True, blank=True, help_text="When the price was last compared with the source")
    notes = models.TextField(blank=True, help_text="Tiers not modelled, uncertainty, aliases")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "model"]
        verbose_name = "model price"
        constraints = [
            models.UniqueConstraint(fields=["model", "match"], name="model_price_key"),
            models.CheckConstraint(
                condition=Q(input_usd_per_mtok__gte=0)
                & Q(output_usd_per_mtok__gte=0)
                & Q(cache_read_usd_per_mtok__gte=0)
                & Q(cache_write_usd_per_mtok__gte=0),
                name="model_price_not_negative",
            ),
        ]

    def __str__(self):
        return self.model + ("*" if self.match == PriceMatch.PREFIX else "")

    def save(self, *args, **kwargs):
        self.model = self.model.strip().lower()
        super().save(*args, **kwargs)


class TurnStatus(models.TextChoices):
    STREAMING = "streaming", "streaming"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed (finish_reason error)"
    ABANDONED = "abandoned", "abandoned (never completed)"


class Turn(models.Model):
    """One streamed chat turn: a user message and the assistant's answer, written field by field."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns", db_index=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    user_message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="turn_as_user")
    assistant_message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="turn_as_assistant")
    status = models.CharField(max_length=16, choices=TurnStatus.choices, default=TurnStatus.STREAMING)
    external_id = models.CharField(max_length=255, null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    system_ready_at = models.DateTimeField(null=True, blank=True)
    last_activity_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    completion_digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the completion body")

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "external_id"],
                name="turn_session_external_id",
                condition=Q(external_id__isnull=False),
            )
        ]
        indexes = [
            models.Index(fields=["session", "-started_at"], name="turn_session_started"),
            models.Index(fields=["last_activity_at"], name="turn_streaming", condition=Q(status=TurnStatus.STREAMING)),
            models.Index(fields=["-started_at"], name="turn_started"),
        ]

    def __str__(self):
        return f"turn {str(self.id)[:8]} ({self.status})"


class ImportTool(models.TextChoices):
    AUTO = "auto", "auto (detect per file)"
    CLAUDE_CODE = "claude-code", "Claude Code"
    QWEN_CODE = "qwen-code", "Qwen Code"
    OPENCLAW = "openclaw", "OpenClaw"


class ImportSource(models.Model):
    """A directory of agent logs that the collector (`sessions_app.tasks.collect_imports`) scans."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="import_sources")
    path = models.CharField(
        max_length=1024, help_text="A directory (or one file) on the server, e.g. ~/.claude/projects"
    )
    tool = models.CharField(max_length=16, choices=ImportTool.choices, default=ImportTool.AUTO)
    user_id = models.CharField(
        max_length=255, blank=True, help_text="Attribute the sessions to this user (default: the log's or the OS user)"
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_scan_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_summary = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        ordering = ["tenant", "path"]
        constraints = [models.UniqueConstraint(fields=["tenant", "path"], name="importsource_tenant_path")]

    def __str__(self):
        return self.path


class ImportedFile(models.Model):
    """How far one log file has been imported: the byte offset and the parser's carry after the last batch."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    source = models.ForeignKey(
        ImportSource, null=True, blank=True, on_delete=models.SET_NULL, related_name="files", db_index=False
    )
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    path = models.TextField()
    tool = models.CharField(max_length=16, blank=True)
    agent_session_id = models.CharField(max_length=255, blank=True)
    size = models.BigIntegerField(default=0, help_text="Bytes, when last imported")
    mtime = models.DateTimeField(null=True, blank=True)
    device = models.BigIntegerField(null=True, blank=True)
    inode = models.BigIntegerField(null=True, blank=True)
    head_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the first bytes: a different head means a replaced file"
    )
    offset = models.BigIntegerField(default=0, help_text="Bytes consumed: the next import starts here")
    carry = models.JSONField(default=dict, blank=True, help_text="The parser's state at `offset`")
    pending = models.IntegerField(default=0, help_text="Streamed responses held in the carry")
    lines_read = models.BigIntegerField(default=0)
    messages_imported = models.BigIntegerField(default=0)
    issues = models.IntegerField(default=0, help_text="Lines skipped or read with a caveat, all imports")
    last_error = models.TextField(blank=True)
    first_imported_at = models.DateTimeField(null=True, blank=True)
    last_imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["tenant", "path"], name="importedfile_tenant_path")]
        indexes = [models.Index(fields=["source", "path"], name="importedfile_source")]

    def __str__(self):
        return self.path
