"""The REST API (../shared/CONTRACT.md). Views parse and authorise; services and selectors do the work."""

from __future__ import annotations

import math
import re
import uuid

from django.db import transaction
from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_kit.api.errors import Conflict, PreconditionFailed
from platform_kit.api.fields import stored_json_error
from platform_kit.api.pagination import CursorPage, cursor_page
from platform_kit.api.parsers import StrictJSONParser
from platform_kit.api.schema import error_responses
from platform_kit.api.serializers import represented, validated
from platform_kit.api.views import TenantScopedMixin
from sessions_app.api.filters import ConversationFilter, MessageFilter, SessionFilter, SessionMessageFilter
from sessions_app.api.serializers import (
    CheckpointSerializer,
    ConversationSerializer,
    GroupedStatsQuerySerializer,
    GroupedStatsSerializer,
    MessageBatchSerializer,
    MessageInSerializer,
    MessageSerializer,
    SessionSerializer,
    SessionStatsSerializer,
    SessionUpdateSerializer,
    StateSerializer,
    StateVersionSerializer,
    SystemReadySerializer,
    TurnCompleteSerializer,
    TurnProgressSerializer,
    TurnSerializer,
    TurnStartSerializer,
)
from sessions_app.models import Conversation, Message, Session, StateVersion, Turn, TurnStatus
from sessions_app.selectors.usage import session_stats, usage_grouped
from sessions_app.services.budgets import BudgetUsedUp
from sessions_app.services.messages import messages_append
from sessions_app.services.sessions import session_create, session_delete, session_end, session_update
from sessions_app.services.state import StaleVersion, state_merge, state_read, state_replace
from sessions_app.services.turns import (
    TurnClosed,
    turn_checkpoint,
    turn_complete,
    turn_start,
    turn_system_ready,
)

# POST …/messages/ takes one message or a list, and answers in kind.
MESSAGE_OR_BATCH_IN = PolymorphicProxySerializer(
    component_name="MessageInOrBatch",
    serializers=[MessageInSerializer, MessageInSerializer(many=True)],
    resource_type_field_name=None,
    many=False,
)
MESSAGE_OR_BATCH = PolymorphicProxySerializer(
    component_name="MessageOrBatch",
    serializers=[MessageSerializer, MessageSerializer(many=True)],
    resource_type_field_name=None,
    many=False,
)

IF_MATCH = re.compile(r'^\s*(?:W/)?"?(\d+)"?\s*$')


class MergePatchParser(StrictJSONParser):
    media_type = "application/merge-patch+json"


@extend_schema_view(
    list=extend_schema(summary="List and search sessions"),
    create=extend_schema(summary="Create a session"),
    retrieve=extend_schema(summary="A session with its counters"),
    partial_update=extend_schema(summary="Change a session's name, metadata…"),
    destroy=extend_schema(summary="Delete a session (hidden from the API, kept for audit)"),
    update=extend_schema(exclude=True),  # PUT answers 405 "Use PATCH"
)
class SessionViewSet(TenantScopedMixin, viewsets.ModelViewSet):
    serializer_class = SessionSerializer
    filterset_class = SessionFilter
    pagination_class = cursor_page("-started_at")
    http_method_names = ["get", "post", "patch", "delete", "put", "head", "options"]
    model = Session

    def tenant_queryset(self):
        return Session.objects.filter(tenant=self.tenant, deleted_at__isnull=True)

    def get_serializer_class(self):
        if self.action == "partial_update":
            return SessionUpdateSerializer
        return super().get_serializer_class()

    def update(self, request, *args, **kwargs):
        if not kwargs.get("partial"):
            return Response(
                {"detail": "Use PATCH to change a session.", "errors": {}}, status=status.HTTP_405_METHOD_NOT_ALLOWED
            )
        return super().update(request, *args, **kwargs)

    def perform_create(self, serializer):
        serializer.instance = session_create(tenant=self.tenant, api_key=self.request.auth, **serializer.validated_data)

    def perform_update(self, serializer):
        serializer.instance = session_update(
            tenant=self.tenant, session_id=serializer.instance.pk, **serializer.validated_data
        )

    def perform_destroy(self, instance):
        session_delete(tenant=self.tenant, session_id=instance.pk)

    @extend_schema(request=None, responses=SessionSerializer, summary="End a session")
    @action(detail=True, methods=["post"])
    def end(self, request, pk=None):
        session = self.get_object()
        session = session_end(tenant=self.tenant, session_id=session.pk)
        return Response(SessionSerializer(session).data)

    @extend_schema(responses=SessionStatsSerializer, summary="The session's counters and cost")
    @action(detail=True, methods=["get"])
    def stats(self, request, pk=None):
        return Response(SessionStatsSerializer(session_stats(session=self.get_object(), with_cost=True)).data)

    # -- messages --------------------------------------------------------------------------------------
    @extend_schema(
        methods=["GET"],
        summary="The session's messages in seq order",
        responses=MessageSerializer(many=True),
        parameters=[
            OpenApiParameter("role", str, description="user, assistant, toolResult, error, system (comma-separated)"),
            OpenApiParameter("q", str, description="Keyword search (English and Chinese)"),
            OpenApiParameter("conversation", OpenApiTypes.UUID),
            OpenApiParameter("after_seq", int),
            OpenApiParameter("since", OpenApiTypes.DATETIME),
            OpenApiParameter("until", OpenApiTypes.DATETIME),
        ],
    )
    @extend_schema(
        methods=["POST"],
        summary="Append one message or a batch of up to 1000",
        request=MESSAGE_OR_BATCH_IN,
        responses={201: MESSAGE_OR_BATCH, 200: MESSAGE_OR_BATCH},
    )
    @action(detail=True, methods=["get", "post"])
    def messages(self, request, pk=None):
        if request.method == "POST":
            return self._append_messages(request.data)
        session = self.get_object()
        filterset = SessionMessageFilter(
            request.query_params, queryset=Message.objects.filter(tenant=self.tenant, session=session)
        )
        if not filterset.is_valid():
            raise serializers.ValidationError(filterset.errors)
        messages = filterset.qs
        paginator = cursor_page("seq")()
        page = paginator.paginate_queryset(messages, request, view=self)
        return paginator.get_paginated_response(MessageSerializer(page, many=True).data)

    def filter_queryset(self, queryset):
        # The session filters apply to the list only; detail actions filter their own rows.
        return super().filter_queryset(queryset) if self.action == "list" else queryset

    def _session_pk(self) -> uuid.UUID:
        """The session id of the URL, for a write whose service finds the tenant's session itself (and raises
        Session.DoesNotExist: a 404): reading it first as well would read the same row twice."""
        try:
            return uuid.UUID(self.kwargs["pk"])
        except ValueError:
            raise Http404 from None

    def _append_messages(self, data):
        single = isinstance(data, dict)
        if not single and not isinstance(data, list):
            raise serializers.ValidationError({"non_field_errors": ["Send one message object or a list of them."]})
        batch = MessageBatchSerializer(data=[data] if single else data)
        if not batch.is_valid():
            errors = batch.errors
            raise serializers.ValidationError(errors[0] if single and isinstance(errors, list) else errors)
        api_key = self.request.auth
        try:
            # The service's own transaction, begun here: an unknown session, or a write a used-up hard-limit budget
            # refuses, rolls back only this (a savepoint when the caller has a transaction open), never the
            # caller's whole transaction.
            with transaction.atomic():
                result = messages_append(
                    tenant=self.tenant,
                    session_id=self._session_pk(),
                    items=batch.validated_data,
                    api_key_id=api_key.pk if api_key else None,
                )
        except Session.DoesNotExist:
            raise Http404 from None
        except BudgetUsedUp as refused:
            return budget_refusal(refused.budget)
        body = [represented(MessageSerializer, message) for message in result.messages]
        code = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        return Response(body[0] if single else body, status=code)

    # -- chat turns ------------------------------------------------------------------------------------
    @extend_schema(
        methods=["POST"],
        request=TurnStartSerializer,
        responses={201: TurnSerializer, 200: TurnSerializer},
        summary="Start a chat turn: the user message and an assistant placeholder, at once",
    )
    @extend_schema(
        methods=["GET"],
        responses=TurnSerializer(many=True),
        summary="The session's chat turns, newest first",
        parameters=[OpenApiParameter("status", str, description="streaming, completed, failed or abandoned")],
    )
    @action(detail=True, methods=["get", "post"])
    def turns(self, request, pk=None):
        if request.method == "POST":
            return self._start_turn(request, pk)
        session = self.get_object()
        turns = Turn.objects.filter(session=session).select_related("user_message", "assistant_message")
        status_filter = request.query_params.get("status")
        if status_filter is not None:
            if status_filter not in TurnStatus.values:
                raise serializers.ValidationError({"status": [f"Use one of: {', '.join(TurnStatus.values)}."]})
            turns = turns.filter(status=status_filter)
        paginator = cursor_page("-started_at")()
        page = paginator.paginate_queryset(turns, request, view=self)
        return paginator.get_paginated_response(TurnSerializer(page, many=True).data)

    def _start_turn(self, request, pk):
        """The service finds (and locks) the tenant's session itself: no lookup of its own here."""
        body = validated(TurnStartSerializer, request.data)
        api_key = request.auth
        try:
            started = turn_start(
                tenant=self.tenant,
                session_id=_uuid_or_404(pk),
                api_key_id=api_key.pk if api_key else None,
                **body,
            )
        except Session.DoesNotExist:
            raise Http404 from None
        except BudgetUsedUp as refused:
            return budget_refusal(refused.budget)
        code = status.HTTP_201_CREATED if started.created else status.HTTP_200_OK
        return Response(represented(TurnSerializer, started.turn), status=code)

    # -- conversations ---------------------------------------------------------------------------------
    @extend_schema(responses=ConversationSerializer(many=True), summary="The session's conversations")
    @action(detail=True, methods=["get"])
    def conversations(self, request, pk=None):
        session = self.get_object()
        paginator = cursor_page("ordinal")()
        page = paginator.paginate_queryset(Conversation.objects.filter(session=session), request, view=self)
        return paginator.get_paginated_response(ConversationSerializer(page, many=True).data)

    # -- state -----------------------------------------------------------------------------------------
    @extend_schema(methods=["GET"], responses=StateSerializer, summary="The session's current state")
    @extend_schema(
        methods=["PUT"],
        request={"application/json": {"type": "object"}},
        responses={200: StateSerializer, **error_responses(412)},
        summary="Replace the state",
        parameters=[
            OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, description='"n": the version you read')
        ],
    )
    @extend_schema(
        methods=["PATCH"],
        request={"application/merge-patch+json": {"type": "object"}, "application/json": {"type": "object"}},
        responses={200: StateSerializer, **error_responses(412)},
        summary="Change the state with a JSON merge patch (RFC 7396)",
        parameters=[
            OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, description='"n": the version you read')
        ],
    )
    @action(detail=True, methods=["get", "put", "patch"], parser_classes=[StrictJSONParser, MergePatchParser])
    def state(self, request, pk=None):
        session_id = self._session_pk()
        try:
            if request.method == "GET":
                snapshot = state_read(tenant=self.tenant, session_id=session_id)
            else:
                snapshot = self._state_write(request, session_id)
        except Session.DoesNotExist:
            raise Http404 from None
        body = {"version": snapshot.version, "data": snapshot.data, "updated_at": snapshot.updated_at}
        response = Response(StateSerializer(body).data)
        response["ETag"] = f'"{snapshot.version}"'
        return response

    def _state_write(self, request, session_id):
        data = request.data
        if not isinstance(data, dict):
            raise serializers.ValidationError({"data": ["The state is a JSON object."]})
        error = stored_json_error(data)
        if error:
            raise serializers.ValidationError({"data": [error]})
        if_match = self._if_match(request)
        try:
            if request.method == "PUT":
                return state_replace(tenant=self.tenant, session_id=session_id, data=data, if_match=if_match)
            return state_merge(tenant=self.tenant, session_id=session_id, patch=data, if_match=if_match)
        except StaleVersion as stale:
            raise PreconditionFailed(
                f'The state is at version {stale.current}; you sent If-Match "{stale.expected}". '
                "Read it again and retry."
            ) from None

    def _if_match(self, request) -> int | None:
        header = request.headers.get("If-Match")
        if header is None or header.strip() == "*":
            return None
        match = IF_MATCH.match(header)
        if not match:
            raise serializers.ValidationError(
                {
                    "If-Match": [
                        "Send the version you read, as the ETag gives it: "
                        f'"{self.get_object().state_version}" for the state as it is now.'
                    ]
                }
            )
        return int(match.group(1))

    @extend_schema(responses=StateVersionSerializer(many=True), summary="Every version of the state, newest first")
    @action(detail=True, methods=["get"], url_path="state/history")
    def state_history(self, request, pk=None):
        session = self.get_object()
        paginator = cursor_page("-version")()
        page = paginator.paginate_queryset(StateVersion.objects.filter(session=session), request, view=self)
        return paginator.get_paginated_response(StateVersionSerializer(page, many=True).data)


@extend_schema_view(
    list=extend_schema(summary="Search messages across sessions (audit)"),
    retrieve=extend_schema(summary="One message"),
)
class MessageViewSet(TenantScopedMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = MessageSerializer
    filterset_class = MessageFilter
    # Messages of one batch share created_at: seq keeps them in their order.
    pagination_class = cursor_page("-created_at", "-seq")
    model = Message

    def tenant_queryset(self):
        return Message.objects.filter(tenant=self.tenant, session__deleted_at__isnull=True)

    @property
    def paginator(self):
        if not hasattr(self, "_paginator"):
            # Within one session seq is the order of arrival, and its index reads a page of even a session
            # that is old and huge at once (walking created_at would first skip every newer message).
            one_session = "session" in self.request.query_params
            self._paginator = cursor_page("-seq")() if one_session else self.pagination_class()
        return self._paginator


@extend_schema_view(
    list=extend_schema(summary="Conversations (filter by session)"),
    retrieve=extend_schema(summary="One conversation with its counters"),
)
class ConversationViewSet(TenantScopedMixin, mixins.RetrieveModelMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = ConversationSerializer
    filterset_class = ConversationFilter
    pagination_class = CursorPage
    model = Conversation

    def tenant_queryset(self):
        return Conversation.objects.filter(tenant=self.tenant, session__deleted_at__isnull=True)


class StatsView(TenantScopedMixin, APIView):
    @extend_schema(
        parameters=[GroupedStatsQuerySerializer],
        responses=GroupedStatsSerializer,
        summary="Usage counters and cost grouped by day, tool, user_id, project, machine, model or session",
    )
    def get(self, request):
        query = GroupedStatsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        body = usage_grouped(tenant=self.tenant, **query.validated_data)
        return Response(GroupedStatsSerializer(body).data)


def budget_refusal(budget) -> Response:
    """429 while a hard-limit budget covering the write is used up (docs/budgets.md, Hard limits)."""
    resets_at = budget.blocked_until
    retry_after = max(1, math.ceil((resets_at - timezone.now()).total_seconds()))
    body = {
        "detail": f"Budget '{budget.name}' is used up; writes it covers are refused until {resets_at.isoformat()}.",
        "errors": {},
        "budget": {"id": str(budget.pk), "name": budget.name, "resets_at": resets_at.isoformat()},
    }
    return Response(body, status=status.HTTP_429_TOO_MANY_REQUESTS, headers={"Retry-After": str(retry_after)})


def _uuid_or_404(value) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404 from None


@extend_schema_view(retrieve=extend_schema(summary="A chat turn with its two messages"))
class TurnViewSet(TenantScopedMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The streaming persistence flow: system-ready, checkpoints (PATCH), complete."""

    serializer_class = TurnSerializer
    model = Turn
    http_method_names = ["get", "post", "patch", "head", "options"]

    def tenant_queryset(self):
        return Turn.objects.filter(tenant=self.tenant, session__deleted_at__isnull=True).select_related(
            "user_message", "assistant_message"
        )

    def _turn_id(self) -> uuid.UUID:
        return _uuid_or_404(self.kwargs["pk"])

    def _run(self, serializer_class, call):
        """Validate, then `call(turn_id, data)`: the service finds the tenant's turn itself (no extra lookup)."""
        body = validated(serializer_class, self.request.data)
        try:
            return call(self._turn_id(), dict(body))
        except Turn.DoesNotExist:
            raise Http404 from None
        except TurnClosed as closed:
            raise Conflict(str(closed)) from None

    @extend_schema(
        request=CheckpointSerializer,
        responses={200: TurnProgressSerializer, **error_responses(409)},
        summary="Checkpoint a stream in progress",
    )
    def partial_update(self, request, pk=None):
        # A small answer: checkpoints come many times a second, and the client has the text it just sent.
        turn = self._run(
            CheckpointSerializer, lambda turn_id, data: turn_checkpoint(tenant=self.tenant, turn_id=turn_id, **data)
        )
        return Response(represented(TurnProgressSerializer, turn))

    @extend_schema(
        request=SystemReadySerializer,
        responses={200: TurnProgressSerializer, **error_responses(409)},
        summary="Keep the full system prompt on the user message (before the first chunk)",
    )
    @action(detail=True, methods=["post"], url_path="system-ready")
    def system_ready(self, request, pk=None):
        turn = self._run(
            SystemReadySerializer, lambda turn_id, data: turn_system_ready(tenant=self.tenant, turn_id=turn_id, **data)
        )
        return Response(represented(TurnProgressSerializer, turn))

    @extend_schema(
        request=TurnCompleteSerializer,
        responses={200: TurnSerializer, **error_responses(409)},
        summary="Complete the turn: both messages and the conversation's aggregates, in one transaction",
    )
    @action(detail=True, methods=["post"])
    def complete(self, request, pk=None):
        def complete(turn_id, data):
            if "tool_calls" in data:
                data["tool_calls"] = [dict(call) for call in data["tool_calls"]]
            return turn_complete(tenant=self.tenant, turn_id=turn_id, data=data)[0]

        turn = self._run(TurnCompleteSerializer, complete)
        return Response(represented(TurnSerializer, turn))
