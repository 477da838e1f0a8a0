from django.utils import timezone
from rest_framework import serializers

from memory_app.models import TYPE_ERROR, Record, RecordRevision, RecordType
from memory_app.selectors.export import REVISION_FIELDS
from platform_kit.api.fields import (
    BoundedDateTimeField,
    JSONObjectField,
    RejectUnknownFieldsMixin,
    StrictCharField,
    StrictIntegerField,
    StrictNumberField,
)
from platform_kit.api.serializers import ModelSerializer


class RecordSerializer(ModelSerializer):
    source_session_ids = serializers.SerializerMethodField()
    source_message_ids = serializers.SerializerMethodField()
    expired = serializers.SerializerMethodField()

    class Meta:
        model = Record
        fields = [
            "id",
            "user_id",
            "namespace",
            "type",
            "content",
            "fields",
            "confidence",
            "strategy",
            "strategy_version",
            "source_session_ids",
            "source_message_ids",
            "valid",
            "valid_from",
            "valid_until",
            "revision",
            "created_at",
            "updated_at",
            "invalidated_at",
            "invalidated_reason",
            "expires_at",
            "expired",
        ]
        read_only_fields = fields

    def get_expired(self, record) -> bool:
        """Its TTL ran out (docs/retention.md): it is no longer recalled."""
        return record.expires_at is not None and record.expires_at <= timezone.now()

    # Read from prefetched provenance (views prefetch it): no query per record.
    def get_source_session_ids(self, record) -> list[str]:
        return sorted(str(s.pk) for s in record.source_sessions.all())

    def get_source_message_ids(self, record) -> list[str]:
        return sorted(str(m.pk) for m in record.source_messages.all())


class RecordWriteSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    user_id = StrictCharField(max_length=255)
    namespace = StrictCharField(max_length=255, required=False, allow_blank=True, default="")
    type = serializers.ChoiceField(
        choices=RecordType.choices,
        error_messages={
            "invalid_choice": f'"{{input}}" is not a record type. Use one of: {", ".join(RecordType.values)}.'
        },
    )
    content = StrictCharField(max_length=20_000, trim_whitespace=True)
    fields = JSONObjectField(required=False)
    confidence = StrictNumberField(required=False, min_value=0, max_value=1, default=1.0)
    valid_from = BoundedDateTimeField(required=False, allow_null=True)
    valid_until = BoundedDateTimeField(required=False, allow_null=True)
    strategy = StrictCharField(max_length=255, required=False, allow_blank=True, default="")
    strategy_version = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=2**31 - 1)
    source_session_ids = serializers.ListField(child=serializers.UUIDField(), required=False, max_length=1000)
    source_message_ids = serializers.ListField(child=serializers.UUIDField(), required=False, max_length=1000)

    def validate(self, attrs):
        if attrs.get("valid_from") and attrs.get("valid_until") and attrs["valid_from"] >= attrs["valid_until"]:
            raise serializers.ValidationError({"valid_until": ["Must be after valid_from."]})
        return attrs


class RecordUpdateSerializer(RecordWriteSerializer):
    """PATCH: the content and its qualifiers change; the user, scope and producing strategy do not."""

    user_id = None
    namespace = None
    strategy = None
    strategy_version = None
    type = serializers.ChoiceField(
        choices=RecordType.choices, required=False, error_messages={"invalid_choice": TYPE_ERROR}
    )
    content = StrictCharField(max_length=20_000, required=False)
    confidence = StrictNumberField(required=False, min_value=0, max_value=1)


class RecordRevisionSerializer(ModelSerializer):
    class Meta:
        model = RecordRevision
        fields = list(REVISION_FIELDS)  # as the memory export writes a revision
        read_only_fields = fields


class RecallQuerySerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    query = StrictCharField(max_length=4000, help_text="What to remember: a question, or the latest message")
    user_id = StrictCharField(max_length=255)
    top_k = StrictIntegerField(required=False, min_value=1, max_value=100, default=10)
    types = serializers.ListField(
        child=serializers.ChoiceField(choices=RecordType.choices, error_messages={"invalid_choice": TYPE_ERROR}),
        required=False,
    )
    session = serializers.UUIDField(required=False, help_text="Only what comes from this session")
    since = BoundedDateTimeField(required=False)
    until = BoundedDateTimeField(required=False)
    include_messages = serializers.BooleanField(required=False, default=True)


class RecallContextSerializer(serializers.Serializer):
    position = serializers.ChoiceField(choices=["before", "after"])
    id = serializers.UUIDField()
    role = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    external_id = serializers.CharField(allow_blank=True)
    created_at = BoundedDateTimeField()


class RecallHitSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["record", "message"])
    id = serializers.UUIDField()
    text = serializers.CharField()
    score = serializers.FloatField()
    matched_by = serializers.ListField(child=serializers.CharField(), help_text="vector, keyword")
    session = serializers.UUIDField(allow_null=True)
    source_message_ids = serializers.ListField(child=serializers.UUIDField())
    source_external_ids = serializers.ListField(child=serializers.CharField())
    created_at = BoundedDateTimeField()
    context = RecallContextSerializer(
        many=True,
        required=False,
        help_text="A message's neighbours in its session (the turn before and the turn after), so the hit reads "
        "in context; empty for records",
    )


class RecallResultSerializer(serializers.Serializer):
    results = RecallHitSerializer(many=True)
    degraded = serializers.BooleanField(help_text="True: the embedder was unavailable; keyword results only")
    embedder = serializers.CharField()
    detail = serializers.CharField(required=False, allow_blank=True)


class RecallPendingSerializer(serializers.Serializer):
    message_vectors = serializers.IntegerField(help_text="The user's messages recall cannot find by meaning yet")
    record_vectors = serializers.IntegerField(help_text="The user's records recall cannot find by meaning yet")
    search_index = serializers.IntegerField(help_text="The user's long messages not yet searchable by keyword")


class RecallResponseSerializer(RecallResultSerializer):
    pending = RecallPendingSerializer(help_text="What of this user's data is not fully indexed yet")
    complete = serializers.BooleanField(
        help_text="True: every row this recall searched (records; messages unless include_messages=false) is indexed"
    )


class MemoryStatusQuerySerializer(serializers.Serializer):
    user_id = StrictCharField(max_length=255, required=False, help_text="Only this user's rows")


class EmbedderStatusSerializer(serializers.Serializer):
    provider = serializers.CharField(help_text="ACE_EMBEDDER: local, e5, hash or openai")
    key = serializers.CharField(allow_null=True, help_text="The vector space: provider, model, dimensions")
    label = serializers.CharField(allow_null=True)
    dimensions = serializers.IntegerField(allow_null=True)
    loaded = serializers.BooleanField(
        allow_null=True, help_text="Whether this web process has the model in memory (null: not known cheaply)"
    )
    messages_embedded = serializers.BooleanField(help_text="ACE_EMBED_MESSAGES: messages get vectors too")
    embedded_roles = serializers.ListField(child=serializers.CharField(), help_text="ACE_EMBED_MESSAGE_ROLES")
    error = serializers.CharField(allow_blank=True, help_text="Why the embedder cannot be used, if it cannot")


class MemoryStatusSerializer(serializers.Serializer):
    embedder = EmbedderStatusSerializer()
    pending_message_vectors = serializers.IntegerField(
        help_text="Messages of the embedded roles, with text, in live sessions, without a vector of the embedder"
    )
    pending_record_vectors = serializers.IntegerField(help_text="Valid records without a vector of the embedder")
    pending_search_index = serializers.IntegerField(
        help_text="Long messages whose keyword search vector the indexing queue has not built yet"
    )
    oldest_pending_seconds = serializers.FloatField(
        help_text="Age of the oldest pending row (a message's receipt, a record's last change); 0: nothing pending"
    )
    oldest_pending_at = BoundedDateTimeField(allow_null=True)
    complete = serializers.BooleanField(help_text="True: nothing is pending")
    detail = serializers.CharField(allow_blank=True, help_text="The same, in one sentence for a person")
    user_id = serializers.CharField(allow_null=True, help_text="The user counted, or null: the whole tenant")
    measured_at = BoundedDateTimeField()


class ContextQuerySerializer(serializers.Serializer):
    query = serializers.CharField(required=False, max_length=4000)
    top_k = serializers.IntegerField(required=False, min_value=1, max_value=50, default=8)


class ContextSerializer(serializers.Serializer):
    state = serializers.DictField()
    state_version = serializers.IntegerField()
    query = serializers.CharField(allow_blank=True)
    records = RecallHitSerializer(many=True)
    prompt = serializers.CharField()
    degraded = serializers.BooleanField()
