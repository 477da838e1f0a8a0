"""The Strategies endpoints of ../shared/CONTRACT.md."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from platform_kit.api.errors import Conflict
from platform_kit.api.pagination import cursor_page
from platform_kit.api.schema import error_responses
from platform_kit.api.views import TenantScopedMixin
from sessions_app.models import Session
from strategies_app.filters import StrategyRunFilter
from strategies_app.models import Strategy, StrategyRun, StrategyVersion, Trigger
from strategies_app.serializers import (
    RunAcceptedSerializer,
    RunRequestSerializer,
    StrategyRunSerializer,
    StrategySerializer,
    StrategyVersionSerializer,
    StrategyWriteSerializer,
)
from strategies_app.services.runs import StrategyDisabled, run_request
from strategies_app.services.strategies import strategy_create, strategy_update


@extend_schema_view(
    list=extend_schema(summary="The tenant's strategies (the three built-in ones exist from the start)"),
    retrieve=extend_schema(summary="One strategy at its current version"),
    create=extend_schema(request=StrategyWriteSerializer, responses={201: StrategySerializer}, summary="A strategy"),
    partial_update=extend_schema(
        request=StrategyWriteSerializer, summary="Change a strategy (a change to its settings makes a new version)"
    ),
)
class StrategyViewSet(
    TenantScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = StrategySerializer
    pagination_class = cursor_page("name")  # a page like every list (names are unique within a tenant)
    model = Strategy
    http_method_names = ["get", "post", "patch", "head", "options"]

    def tenant_queryset(self):
        return Strategy.objects.filter(tenant=self.tenant).order_by("name")

    def create(self, request, *args, **kwargs):
        body = StrategyWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        strategy = strategy_create(tenant=self.tenant, **body.validated_data)
        return Response(StrategySerializer(strategy).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        strategy = self.get_object()
        body = StrategyWriteSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        strategy = strategy_update(tenant=self.tenant, strategy_id=strategy.pk, **body.validated_data)
        return Response(StrategySerializer(strategy).data)

    @extend_schema(responses=StrategyVersionSerializer(many=True), summary="Every version, newest first")
    @action(detail=True, methods=["get"], pagination_class=cursor_page("-version"))
    def versions(self, request, pk=None):
        strategy = self.get_object()
        paginator = self.paginator
        page = paginator.paginate_queryset(StrategyVersion.objects.filter(strategy=strategy), request, view=self)
        return paginator.get_paginated_response(StrategyVersionSerializer(page, many=True).data)

    @extend_schema(
        request=RunRequestSerializer,
        responses={202: RunAcceptedSerializer, **error_responses(409)},
        summary="Run now over a session's unread messages, or over all of a user's sessions",
    )
    @action(detail=True, methods=["post"])
    def run(self, request, pk=None):
        strategy = self.get_object()
        body = RunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        session = None
        if body.validated_data.get("session"):
            session = Session.objects.filter(
                pk=body.validated_data["session"], tenant=self.tenant, deleted_at__isnull=True
            ).first()
            if session is None:
                raise ValidationError({"session": ["Not a session of yours."]})
        try:
            run = run_request(
                strategy=strategy,
                trigger=Trigger.MANUAL,
                session=session,
                user_id=body.validated_data.get("user_id", ""),
                detail="API",
            )
        except StrategyDisabled as disabled:
            raise Conflict(str(disabled)) from None
        return Response({"run": str(run.pk)}, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(
    list=extend_schema(summary="Strategy runs, newest first"),
    retrieve=extend_schema(summary="One run: version, trigger, message range, decisions, counts, tokens, status"),
)
class StrategyRunViewSet(TenantScopedMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = StrategyRunSerializer
    filterset_class = StrategyRunFilter
    pagination_class = cursor_page("-queued_at")
    model = StrategyRun

    def tenant_queryset(self):
        return StrategyRun.objects.filter(tenant=self.tenant).select_related("strategy", "strategy_version")
