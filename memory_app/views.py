"""The Memory endpoints of ../shared/CONTRACT.md: records with provenance and history (their export and import
between instances, `records/export/` and `records/import/`, are portability_app's)."""

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_app.filters import RecordFilter
from memory_app.models import Record, RecordRevision
from memory_app.selectors.context import session_context
from memory_app.selectors.recall import recall_search
from memory_app.selectors.status import memory_status, with_recall_backlog
from memory_app.serializers import (
    ContextQuerySerializer,
    ContextSerializer,
    MemoryStatusQuerySerializer,
    MemoryStatusSerializer,
    RecallQuerySerializer,
    RecallResponseSerializer,
    RecallResultSerializer,
    RecordRevisionSerializer,
    RecordSerializer,
    RecordUpdateSerializer,
    RecordWriteSerializer,
)
from memory_app.services import RecordClosed, record_create, record_invalidate, record_update
from platform_kit.api.errors import Conflict
from platform_kit.api.pagination import CursorPage, cursor_page
from platform_kit.api.schema import error_responses
from platform_kit.api.views import TenantScopedMixin
from sessions_app.models import Session


@extend_schema_view(
    list=extend_schema(summary="List and search records (valid ones unless ?valid=false)"),
    retrieve=extend_schema(summary="One record with its provenance"),
    create=extend_schema(
        request=RecordWriteSerializer,
        responses={201: RecordSerializer, 200: RecordSerializer},
        summary="Store a record (a restatement of a valid record merges into it: 200)",
    ),
    partial_update=extend_schema(
        request=RecordUpdateSerializer,
        responses={200: RecordSerializer, **error_responses(409)},
        summary="Change a record (a new revision)",
    ),
    destroy=extend_schema(
        responses={204: None, **error_responses(409)},
        summary="Delete: the record stops being recalled at once and stays for audit",
    ),
)
class RecordViewSet(
    TenantScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = RecordSerializer
    filterset_class = RecordFilter
    pagination_class = CursorPage
    model = Record
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def tenant_queryset(self):
        return Record.objects.filter(tenant=self.tenant).prefetch_related("source_sessions", "source_messages")

    def _record(self, record_id) -> Response:
        return Response(RecordSerializer(self.tenant_queryset().get(pk=record_id)).data)

    def create(self, request, *args, **kwargs):
        body = RecordWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        written = record_create(tenant=self.tenant, **body.validated_data)
        response = self._record(written.record.pk)
        response.status_code = status.HTTP_201_CREATED if written.created else status.HTTP_200_OK
        return response

    def partial_update(self, request, *args, **kwargs):
        record = self.get_object()
        body = RecordUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            record_update(tenant=self.tenant, record_id=record.pk, **body.validated_data)
        except RecordClosed as closed:
            raise Conflict(str(closed)) from None
        return self._record(record.pk)

    def destroy(self, request, *args, **kwargs):
        record = self.get_object()
        try:
            record_invalidate(tenant=self.tenant, record_id=record.pk, reason="deleted")
        except RecordClosed as closed:
            raise Conflict(str(closed)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=RecordRevisionSerializer(many=True), summary="Every revision, newest first")
    @action(detail=True, methods=["get"])
    def history(self, request, pk=None):
        record = self.get_object()
        paginator = cursor_page("-revision")()
        page = paginator.paginate_queryset(RecordRevision.objects.filter(record=record), request, view=self)
        return paginator.get_paginated_response(RecordRevisionSerializer(page, many=True).data)

    def filter_queryset(self, queryset):
        return super().filter_queryset(queryset) if self.action == "list" else queryset


class RecallView(TenantScopedMixin, APIView):
    @extend_schema(
        request=RecallQuerySerializer,
        responses=RecallResponseSerializer,
        summary="Hybrid recall (BM25 keywords + vectors, one score for records and messages; message hits with "
        "the turns around them) over a user's records and messages",
        description="`complete` is false while some of the user's rows are not indexed yet (`pending` counts them "
        "and `detail` says so in a sentence): the results may miss them until they are.",
    )
    def post(self, request):
        body = RecallQuerySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        params = body.validated_data
        if "session" in params and not Session.objects.filter(pk=params["session"], tenant=self.tenant).exists():
            raise ValidationError({"session": ["Not a session of yours."]})
        result = recall_search(tenant=self.tenant, **params)
        answer = RecallResultSerializer(result).data
        return Response(
            with_recall_backlog(
                answer,
                tenant=self.tenant,
                user_id=params["user_id"],
                include_messages=params.get("include_messages", True),
            )
        )


class MemoryStatusView(TenantScopedMixin, APIView):
    @extend_schema(
        parameters=[MemoryStatusQuerySerializer],
        responses=MemoryStatusSerializer,
        summary="The memory backlog: rows recall cannot find fully yet, and the embedder",
        description="For the API key's tenant, or one user with `?user_id=`: messages and records still waiting "
        "for a vector of the configured embedder, long messages waiting for their keyword index, and the age of "
        "the oldest of them. `complete` is true when nothing waits.",
    )
    def get(self, request):
        query = MemoryStatusQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        status_ = memory_status(tenant=self.tenant, user_id=query.validated_data.get("user_id"))
        return Response(MemoryStatusSerializer(status_).data)


class SessionContextView(TenantScopedMixin, APIView):
    @extend_schema(
        parameters=[ContextQuerySerializer],
        responses=ContextSerializer,
        summary="The block to inject into a new or resumed session: its state and the user's relevant memories",
    )
    def get(self, request, pk):
        query = ContextQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            session = Session.objects.select_related("tenant").get(pk=pk, tenant=self.tenant, deleted_at__isnull=True)
        except Session.DoesNotExist:
            raise Http404 from None
        context = session_context(session=session, **query.validated_data)
        return Response(ContextSerializer(context).data)
