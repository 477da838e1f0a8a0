"""Records: long-term memories distilled from messages, with provenance and every revision kept."""

import uuid

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from platform_kit.db import finite
from sessions_app.models import CjkSearchVector, Message, Session, Tenant


class RecordType(models.TextChoices):
    PROFILE = "profile", "user profile"
    TASK = "task", "task information"
    FACT = "fact", "facts and experience"
    CUSTOM = "custom", "custom"


# What the API, the record TTLs and the memory import answer for a value that is not a RecordType.
TYPE_ERROR = f'"{{input}}" is not a record type. Use one of: {", ".join(RecordType.values)}.'


class BitStringField(models.Field):
    """PostgreSQL `bit varying`: here, the sign bits of a vector (pgvector's binary_quantize)."""

    description = "bit string"

    def db_type(self, connection):
        return "bit varying"


class VectorField(models.Field):
    """pgvector's `vector` column (migrations name pgvector's field, which this is), with pgvector and numpy
    imported when a vector is first read or written rather than when the models load: a process that never
    touches one (a log import, most `manage.py` commands) starts without them. Values are pgvector's: numpy
    arrays read, lists or arrays written."""

    description = "Vector"
    empty_strings_allowed = False

    def __init__(self, *args, dimensions: int | None = None, **kwargs):
        self.dimensions = dimensions
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        return name, "pgvector.django.vector.VectorField", args, kwargs

    def db_type(self, connection):
        return "vector" if self.dimensions is None else f"vector({self.dimensions})"

    def from_db_value(self, value, expression, connection):
        return _pgvector().Vector._from_db(value)

    def to_python(self, value):
        if isinstance(value, list):
            return _pgvector().np.array(value, dtype=_pgvector().np.float32)
        return _pgvector().Vector._from_db(value)

    def get_prep_value(self, value):
        return _pgvector().Vector._to_db(value)

    def value_to_string(self, obj):
        return self.get_prep_value(self.value_from_object(obj))

    def validate(self, value, model_instance):
        super().validate(value.tolist() if hasattr(value, "tolist") else value, model_instance)

    def run_validators(self, value):
        super().run_validators(value.tolist() if hasattr(value, "tolist") else value)

    def formfield(self, **kwargs):
        return super().formfield(form_class=_pgvector().VectorFormField, **kwargs)


def _pgvector():
    """pgvector's Django module (its `Vector`, its form field, and the numpy it imports)."""
    from pgvector.django import vector

    return vector


def sign_bits(vector_field: str) -> models.GeneratedField:
    """One bit per dimension of the vector, kept by PostgreSQL beside it. Recall shortlists a big user's rows
    by Hamming distance on these (48 bytes a row at 384 dimensions, read from a covering index) and re-ranks
    the shortlist by exact cosine distance: a fraction of reading every row's full vector from the heap."""
    return models.GeneratedField(
        expression=models.Func(F(vector_field), function="binary_quantize", output_field=BitStringField()),
        output_field=BitStringField(),
        db_persist=True,
    )


class UserSearchVector(models.Func):
    """A record's search vector plus one lexeme naming its tenant and user (`user_lexeme`).

    A GIN index over it finds one user's rows containing any of a query's words from posting lists alone: the
    user's lexeme is ANDed with the words inside the index. A GIN index of the words alone reads a common
    word's rows of every user, and a btree of the user reads all of a heavy user's rows, one heap page each.
    """

    output_field = SearchVectorField()

    def __init__(self):
        super().__init__(F("search_vector"), F("tenant_id"), F("user_id"))

    def as_sql(self, compiler, connection, **extra_context):
        (vector, vector_params), (tenant, tenant_params), (user, user_params) = (
            compiler.compile(expression) for expression in self.get_source_expressions()
        )
        sql = f"({vector} || array_to_tsvector(ARRAY[({tenant})::text || '/' || ({user})]))"
        return sql, [*vector_params, *tenant_params, *user_params]


def user_lexeme(tenant_id, user_id: str) -> str:
    """The lexeme UserSearchVector adds to a row of this tenant and user (PostgreSQL's text of a uuid is Python's)."""
    return f"{tenant_id}/{user_id}"


class RecordManager(models.Manager):
    def get_queryset(self):
        return super().get_queryset().defer("search_vector", "embedding_bits")  # only used inside SQL


class Record(models.Model):
    """One long-term memory of one user (optionally within an agent/namespace scope).

    `valid` is False once the record is deleted (through the API) or invalidated (a contradicting
    memory replaced it): it is never recalled again, but stays, with its revisions, for audit.
    """

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    user_id = models.CharField("user ID", max_length=255)
    namespace = models.CharField(max_length=255, blank=True, help_text="An agent or app scope; blank: the user's")
    type = models.CharField(max_length=16, choices=RecordType.choices)
    content = models.TextField()
    fields = models.JSONField(default=dict, blank=True)
    confidence = models.FloatField(default=1.0)
    valid = models.BooleanField(default=True)
    valid_from = models.DateTimeField(null=True, blank=True, help_text="When the fact starts to hold, if known")
    valid_until = models.DateTimeField(null=True, blank=True, help_text="When it stops holding, if known")
    strategy = models.CharField(max_length=255, blank=True, help_text="The strategy that produced it, if any")
    strategy_version = models.IntegerField(null=True, blank=True)
    source_sessions = models.ManyToManyField(Session, through="RecordSourceSession", blank=True, related_name="records")
    source_messages = models.ManyToManyField(Message, through="RecordSourceMessage", blank=True, related_name="records")
    revision = models.IntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    invalidated_at = models.DateTimeField(null=True, blank=True)
    invalidated_reason = models.CharField(max_length=255, blank=True)
    # Kept by the database (migration 0007): `updated_at` plus the days of the record's TTL (memory_app.RecordTtl:
    # its strategy's, else its type's), on every insert and update and when a TTL changes; NULL without one.
    # From then on the record is never recalled, and a TTL that purges deletes it in the daily retention run.
    expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    search_vector = models.GeneratedField(
        expression=CjkSearchVector(F("content")), output_field=SearchVectorField(), db_persist=True
    )
    # The vector of `content` in the space of `embedding_key` (an embedder and its dimensions). Each key has
    # its own partial HNSW index (memory_app.embeddings.ensure_vector_index); recall only compares vectors
    # of the configured key, so two models never mix.
    embedding = VectorField(null=True, blank=True)
    embedding_key = models.CharField(max_length=160, blank=True)
    embedding_bits = sign_bits("embedding")

    objects = RecordManager()

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.CheckConstraint(condition=finite("confidence"), name="record_confidence_finite")]
        indexes = [
            models.Index(fields=["tenant", "user_id", "type"], name="record_user_type", condition=Q(valid=True)),
            models.Index(fields=["tenant", "-updated_at"], name="record_tenant_updated"),
            models.Index(fields=["tenant", "strategy"], name="record_strategy", condition=~Q(strategy="")),
            # Recall's keyword matches: one user's rows containing any query word (UserSearchVector).
            GinIndex(UserSearchVector(), name="record_user_search", condition=Q(valid=True)),
            models.Index(
                fields=["tenant", "user_id", "embedding_key"],
                include=["id", "embedding_bits", "expires_at"],  # the shortlist is an index-only scan
                condition=Q(valid=True),
                name="record_user_bits",
            ),
            # The daily retention run finds expired records here.
            models.Index(fields=["tenant", "expires_at"], name="record_expires", condition=Q(expires_at__isnull=False)),
            # The memory status counts a tenant's records still without a vector of the current key: two short
            # ranges of this index (keys below and above it), whatever the number of embedded records.
            models.Index(
                fields=["tenant", "embedding_key"],
                include=["updated_at"],
                condition=Q(valid=True),
                name="record_tenant_embedding_key",
            ),
        ]

    def __str__(self):
        return f"{self.type}: {self.content[:60]}"


def unexpired() -> Q:
    """Records whose TTL has not run out (or that have none): the only ones recall and context show."""
    return Q(expires_at__isnull=True) | Q(expires_at__gt=Now())


# The same condition inside the raw SQL of the vector search.
UNEXPIRED_SQL = "(expires_at IS NULL OR expires_at > now())"

# Days a record TTL may be: at least one day, at most a hundred years.
TTL_DAYS_MIN = 1
TTL_DAYS_MAX = 36_500


class RecordTtl(models.Model):
    """How long a tenant's records of one type, or of one strategy, live after their last change.

    A record's TTL is its strategy's if that has one, else its type's. When it runs out the record is no longer
    recalled (at once: recall compares `expires_at` with the clock), and with `on_expiry` "purge" the daily
    retention run deletes it, leaving an entry in the retention audit trail."""

    class OnExpiry(models.TextChoices):
        KEEP = "keep", "keep (not recalled; kept for audit)"
        PURGE = "purge", "purge (deleted by the daily run)"

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    record_type = models.CharField(
        max_length=16, choices=RecordType.choices, blank=True, help_text="The records of this type (or a strategy)"
    )
    strategy = models.CharField(max_length=255, blank=True, help_text="The records this strategy (by name) produced")
    ttl_days = models.IntegerField(
        "TTL (days)", help_text=f"Days after a record's last change ({TTL_DAYS_MIN}–{TTL_DAYS_MAX})"
    )
    on_expiry = models.CharField(max_length=8, choices=OnExpiry.choices, default=OnExpiry.KEEP)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "record TTL"
        verbose_name_plural = "record TTLs"
        ordering = ["tenant", "record_type", "strategy"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "record_type", "strategy"], name="recordttl_unique_target"),
            models.CheckConstraint(
                condition=(Q(record_type="") & ~Q(strategy="")) | (~Q(record_type="") & Q(strategy="")),
                name="recordttl_type_or_strategy",
            ),
            models.CheckConstraint(
                condition=Q(ttl_days__gte=TTL_DAYS_MIN, ttl_days__lte=TTL_DAYS_MAX), name="recordttl_days_bounds"
            ),
        ]

    def __str__(self):
        target = f"strategy {self.strategy}" if self.strategy else f"{self.record_type} records"
        return f"{target}: {self.ttl_days} days, then {self.on_expiry}"


class MessageEmbedding(models.Model):
    """The vector of one message, so recall can search raw conversation too. Filter columns are copied from
    the message and its session, so a filtered vector search never joins."""

    message = models.OneToOneField(Message, primary_key=True, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+", db_index=False)
    user_id = models.CharField("user ID", max_length=255)
    created_at = models.DateTimeField()
    embedding = VectorField()
    embedding_key = models.CharField(max_length=160)
    embedding_bits = sign_bits("embedding")

    class Meta:
        indexes = [
            models.Index(
                fields=["tenant", "user_id", "embedding_key"],
                include=["message_id", "embedding_bits"],  # the shortlist is an index-only scan
                name="message_embedding_bits",
            )
        ]

    def __str__(self):
        return f"embedding of {self.message_id}"


class RecordSourceSession(models.Model):
    """A session a record was drawn from (Record.source_sessions), with the tenant of both for co-location."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    record = models.ForeignKey(Record, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")

    class Meta:
        db_table = "memory_app_record_source_sessions"
        constraints = [
            models.UniqueConstraint(fields=["record", "session", "tenant"], name="record_source_session_unique")
        ]

    def __str__(self):
        return f"{self.record_id} from session {self.session_id}"


class RecordSourceMessage(models.Model):
    """A message a record cites (Record.source_messages), with the tenant of both for co-location."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    record = models.ForeignKey(Record, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")

    class Meta:
        db_table = "memory_app_record_source_messages"
        constraints = [
            models.UniqueConstraint(fields=["record", "message", "tenant"], name="record_source_message_unique")
        ]

    def __str__(self):
        return f"{self.record_id} cites {self.message_id}"


class SessionEmbeddingProgress(models.Model):
    """How far a session's messages are known to have their vectors: every embeddable message with `seq` up to
    `embedded_through_seq` has one in `space` (an embedder key and the embedded roles). Kept by the memory
    status (memory_app.selectors.status), so counting what still waits reads each session's tail, not its
    history; lowered when a message's content changes (an import completing it, a turn completing)."""

    session = models.OneToOneField(Session, primary_key=True, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    space = models.CharField(max_length=400)
    embedded_through_seq = models.BigIntegerField()
    updated_at = models.DateTimeField()

    def __str__(self):
        return f"{self.session_id} embedded through #{self.embedded_through_seq}"


class RecordRevision(models.Model):
    """A record as it was after one change. Revision 1 is the record as created."""

    class Change(models.TextChoices):
        CREATE = "create", "created"
        UPDATE = "update", "updated"
        MERGE = "merge", "merged a restatement"
        INVALIDATE = "invalidate", "invalidated"
        DELETE = "delete", "deleted"

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    record = models.ForeignKey(Record, on_delete=models.CASCADE, related_name="revisions", db_index=False)
    revision = models.IntegerField()
    change = models.CharField(max_length=16, choices=Change.choices)
    actor = models.CharField(max_length=255, help_text="api, admin, or strategy:<name>")
    reason = models.CharField(max_length=255, blank=True)
    type = models.CharField(max_length=16, choices=RecordType.choices)
    content = models.TextField()
    fields = models.JSONField(default=dict)
    confidence = models.FloatField()
    valid = models.BooleanField()
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)
    source_session_ids = models.JSONField(default=list)
    source_message_ids = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["record", "-revision"]
        constraints = [
            models.UniqueConstraint(fields=["record", "revision", "tenant"], name="record_revision_unique"),
            models.CheckConstraint(condition=finite("confidence"), name="record_revision_confidence_finite"),
        ]

    def __str__(self):
        return f"r{self.revision} {self.change}"
