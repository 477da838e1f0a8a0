"""The retention endpoints (docs/retention.md): the tenant's message-content policy, what a run would do now,
the runs and the audit trail, and record TTLs. Thin: parse, call a service or selector, answer."""

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_app.models import TTL_DAYS_MAX, TTL_DAYS_MIN, TYPE_ERROR, RecordTtl, RecordType
from platform_kit.api.fields import RejectUnknownFieldsMixin, StrictCharField, StrictIntegerField
from platform_kit.api.pagination import CursorPage, cursor_page
from platform_kit.api.schema import error_responses
from platform_kit.api.serializers import ModelSerializer
from platform_kit.api.views import TenantScopedMixin
from retention_app.models import CONTENT_DAYS_MAX, CONTENT_DAYS_MIN, RetentionEvent, RetentionPolicy, RetentionRun
from retention_app.selectors import content_cutoff, retention_policy_get, retention_preview
from retention_app.services import record_ttl_create, record_ttl_delete, record_ttl_update, retention_policy_set
from sessions_app.schema import ROLES

ROLE_ERROR = f'"{{input}}" is not a role. Use one of: {", ".join(ROLES)}.'


class RetentionPolicySerializer(ModelSerializer):
    content_cutoff = serializers.SerializerMethodField(help_text="Messages created before this lose their content")

    class Meta:
        model = RetentionPolicy
        fields = ["message_content_days", "roles", "content_cutoff", "created_at", "updated_at"]
        read_only_fields = fields

    def get_content_cutoff(self, policy) -> str | None:
        cutoff = content_cutoff(policy=policy)
        return None if cutoff is None else serializers.DateTimeField().to_representation(cutoff)


class RetentionPolicyWriteSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    message_content_days = StrictIntegerField(
        allow_null=True,
        min_value=CONTENT_DAYS_MIN,
        max_value=CONTENT_DAYS_MAX,
        help_text=f"{CONTENT_DAYS_MIN}–{CONTENT_DAYS_MAX}, or null to keep message content forever",
    )
    roles = serializers.ListField(
        child=serializers.ChoiceField(choices=ROLES, error_messages={"invalid_choice": ROLE_ERROR}),
        max_length=len(ROLES),
        help_text="The roles whose content is purged; empty: every role",
    )


class PurgeRangeSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    oldest = serializers.DateTimeField(allow_null=True)
    newest = serializers.DateTimeField(allow_null=True)


class RetentionPreviewSerializer(serializers.Serializer):
    content_cutoff = serializers.DateTimeField(allow_null=True)
    messages = PurgeRangeSerializer(help_text="Messages whose content would be purged")
    records_expired = serializers.IntegerField(help_text="Expired records kept (already not recalled)")
    records_to_purge = serializers.IntegerField(help_text="Expired records a purge TTL would delete")


class RetentionRunSerializer(ModelSerializer):
    class Meta:
        model = RetentionRun
        fields = [
            "id",
            "dry_run",
            "trigger",
            "started_at",
            "finished_at",
            "content_cutoff",
            "messages_purged",
            "oldest_message_at",
            "newest_message_at",
            "records_expired",
            "records_purged",
            "error",
        ]
        read_only_fields = fields


class RetentionEventSerializer(ModelSerializer):
    class Meta:
        model = RetentionEvent
        fields = ["id", "action", "actor", "subject_id", "before", "after", "created_at"]
        read_only_fields = fields


class RecordTtlSerializer(ModelSerializer):
    class Meta:
        model = RecordTtl
        fields = ["id", "record_type", "strategy", "ttl_days", "on_expiry", "created_at", "updated_at"]
        read_only_fields = fields


class RecordTtlWriteSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    record_type = serializers.ChoiceField(
        choices=["", *RecordType.values],
        required=False,
        allow_blank=True,
        error_messages={"invalid_choice": TYPE_ERROR},
    )
    strategy = StrictCharField(max_length=255, required=False, allow_blank=True, help_text="A strategy's name")
    ttl_days = StrictIntegerField(min_value=TTL_DAYS_MIN, max_value=TTL_DAYS_MAX)
    on_expiry = serializers.ChoiceField(
        choices=RecordTtl.OnExpiry.values,
        required=False,
        error_messages={"invalid_choice": '"{input}" is not a choice. Use one of: keep, purge.'},
    )


def _preview_body(preview) -> dict:
    return {
        "content_cutoff": preview.content_cutoff,
        "messages": {
            "count": preview.messages.messages,
            "oldest": preview.messages.oldest,
            "newest": preview.messages.newest,
        },
        "records_expired": preview.records_expired,
        "records_to_purge": preview.records_to_purge,
    }


class RetentionPolicyView(TenantScopedMixin, APIView):
    model = RetentionPolicy

    @extend_schema(responses=RetentionPolicySerializer, summary="The tenant's retention of message content")
    def get(self, request):
        return Response(RetentionPolicySerializer(retention_policy_get(tenant=self.tenant)).data)

    def _write(self, request, *, partial: bool):
        body = RetentionPolicyWriteSerializer(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        policy = retention_policy_set(tenant=self.tenant, actor="api", **body.validated_data)
        return Response(RetentionPolicySerializer(policy).data)

    @extend_schema(
        request=RetentionPolicyWriteSerializer,
        responses={200: RetentionPolicySerializer, **error_responses(400)},
        summary="Set the policy (both fields); the daily run applies it",
    )
    def put(self, request):
        return self._write(request, partial=False)

    @extend_schema(
        request=RetentionPolicyWriteSerializer,
        responses={200: RetentionPolicySerializer, **error_responses(400)},
        summary="Change some of the policy",
    )
    def patch(self, request):
        return self._write(request, partial=True)


class RetentionPreviewView(TenantScopedMixin, APIView):
    model = RetentionPolicy

    @extend_schema(
        responses=RetentionPreviewSerializer, summary="What a retention run would purge or delete now (changes nothing)"
    )
    def get(self, request):
        with transaction.atomic():  # one snapshot: the counts agree with each other
            preview = retention_preview(tenant=self.tenant)
        return Response(RetentionPreviewSerializer(_preview_body(preview)).data)


@extend_schema_view(list=extend_schema(summary="Retention runs, newest first"))
class RetentionRunViewSet(TenantScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = RetentionRunSerializer
    pagination_class = cursor_page("-started_at")
    model = RetentionRun

    def tenant_queryset(self):
        return RetentionRun.objects.filter(tenant=self.tenant)


@extend_schema_view(list=extend_schema(summary="The retention audit trail, newest first"))
class RetentionEventViewSet(TenantScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = RetentionEventSerializer
    pagination_class = CursorPage
    model = RetentionEvent

    def tenant_queryset(self):
        return RetentionEvent.objects.filter(tenant=self.tenant)


@extend_schema_view(
    list=extend_schema(summary="Record TTLs"),
    retrieve=extend_schema(summary="One record TTL"),
    create=extend_schema(
        request=RecordTtlWriteSerializer,
        responses={201: RecordTtlSerializer, **error_responses(400)},
        summary="A TTL for the records of one type or one strategy",
    ),
    partial_update=extend_schema(
        request=RecordTtlWriteSerializer, responses={200: RecordTtlSerializer, **error_responses(400)}
    ),
    destroy=extend_schema(responses={204: None}, summary="Delete a TTL: its records no longer expire"),
)
class RecordTtlViewSet(
    TenantScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = RecordTtlSerializer
    pagination_class = CursorPage
    model = RecordTtl
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def tenant_queryset(self):
        return RecordTtl.objects.filter(tenant=self.tenant)

    def create(self, request, *args, **kwargs):
        body = RecordTtlWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ttl = record_ttl_create(tenant=self.tenant, actor="api", **body.validated_data)
        return Response(RecordTtlSerializer(ttl).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        ttl = self.get_object()
        body = RecordTtlWriteSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        ttl = record_ttl_update(tenant=self.tenant, ttl_id=ttl.pk, actor="api", **body.validated_data)
        return Response(RecordTtlSerializer(ttl).data)

    def destroy(self, request, *args, **kwargs):
        record_ttl_delete(tenant=self.tenant, ttl_id=self.get_object().pk, actor="api")
        return Response(status=status.HTTP_204_NO_CONTENT)
