"""Plan windows through the API (docs/accounting.md, "Plan windows"): `/api/v1/plans/` (a tenant's usage plan and
users' own, changed through `services.plans`), `/api/v1/usage/blocks/` (a user's 5-hour blocks, as ccusage's `blocks`)
and `/api/v1/usage/weekly/` (usage per week, per user or machine), each with the percent of the plan."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_kit.api.fields import RejectUnknownFieldsMixin, StrictCharField, StrictIntegerField
from platform_kit.api.pagination import cursor_page
from platform_kit.api.views import TenantScopedMixin
from sessions_app.api.serializers import (
    BlocksQuerySerializer,
    BlocksSerializer,
    WeeklyQuerySerializer,
    WeeklySerializer,
)
from sessions_app.models import PlanPreset, TokenCounting, UsagePlan, Weekday
from sessions_app.models.plans import (
    COST_LIMIT_MAX,
    COST_LIMIT_MIN,
    LIMIT_FIELDS,
    MESSAGE_LIMIT_MAX,
    NOTES_MAX_LENGTH,
    PRESETS_SOURCE,
    TOKEN_LIMIT_MAX,
)
from sessions_app.selectors.blocks import usage_blocks
from sessions_app.selectors.weekly import usage_weekly
from sessions_app.services.plans import PlanInvalid, plan_create, plan_delete, plan_update, preset_figures


def _choices(enum) -> dict:
    return {"invalid_choice": f"Use one of: {', '.join(enum.values)}."}


@extend_schema_field({"type": "number", "minimum": float(COST_LIMIT_MIN), "maximum": float(COST_LIMIT_MAX)})
class UsdLimitField(serializers.Field):
    """A JSON number of USD, read as an exact Decimal (the service checks the bounds), written as a number."""

    default_error_messages = {"invalid": "Must be a number (a JSON number, not a string), or null for no limit."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return Decimal(str(data))

    def to_representation(self, value):
        return float(value)


def _whole(maximum: int, help_text: str):
    return StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=maximum, help_text=help_text)


class PlanSerializer(RejectUnknownFieldsMixin, serializers.ModelSerializer):
    user_id = StrictCharField(
        max_length=255, required=False, allow_blank=True, help_text="Empty (default): the tenant's plan, for every user"
    )
    preset = serializers.ChoiceField(
        PlanPreset.values,
        required=False,
        error_messages=_choices(PlanPreset),
        help_text="pro, max5, max20 or custom: the limits you leave out take its figures (community figures: "
        "GET /api/v1/plans/presets/)",
    )
    token_limit = _whole(TOKEN_LIMIT_MAX, "Tokens per 5-hour block (null: no limit)")
    token_counting = serializers.ChoiceField(
        TokenCounting.values, required=False, error_messages=_choices(TokenCounting)
    )
    cost_limit = UsdLimitField(required=False, allow_null=True, help_text="API-equivalent USD per 5-hour block")
    message_limit = _whole(MESSAGE_LIMIT_MAX, "Requests (API responses) per 5-hour block")
    weekly_token_limit = _whole(TOKEN_LIMIT_MAX, "Tokens per week")
    weekly_cost_limit = UsdLimitField(required=False, allow_null=True, help_text="API-equivalent USD per week")
    weekly_message_limit = _whole(MESSAGE_LIMIT_MAX, "Requests per week")
    week_starts_on = serializers.ChoiceField(Weekday.values, required=False, error_messages=_choices(Weekday))
    week_start_hour = StrictIntegerField(required=False, min_value=0, max_value=23, help_text="UTC")
    notes = StrictCharField(required=False, allow_blank=True, max_length=NOTES_MAX_LENGTH)

    class Meta:
        model = UsagePlan
        fields = [
            "id",
            "user_id",
            "preset",
            "token_limit",
            "token_counting",
            "cost_limit",
            "message_limit",
            "weekly_token_limit",
            "weekly_cost_limit",
            "weekly_message_limit",
            "week_starts_on",
            "week_start_hour",
            "notes",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]


class PresetSerializer(serializers.Serializer):
    preset = serializers.CharField()
    label = serializers.CharField()
    token_limit = serializers.IntegerField(allow_null=True)
    cost_limit = serializers.FloatField(allow_null=True)
    message_limit = serializers.IntegerField(allow_null=True)
    weekly_token_limit = serializers.IntegerField(allow_null=True)
    weekly_cost_limit = serializers.FloatField(allow_null=True)
    weekly_message_limit = serializers.IntegerField(allow_null=True)


class PresetsSerializer(serializers.Serializer):
    source = serializers.URLField()
    token_counting = serializers.CharField()
    results = PresetSerializer(many=True)


def _invalid(error: PlanInvalid):
    return serializers.ValidationError(error.message_dict)


@extend_schema_view(
    list=extend_schema(
        summary="Your usage plans: the tenant's (user_id empty) and users' own",
        parameters=[OpenApiParameter("user_id", str, description="Only this user's plan ('' for the tenant's)")],
    ),
    create=extend_schema(summary="Create a plan from a preset, with any figure changed"),
    retrieve=extend_schema(summary="A usage plan"),
    partial_update=extend_schema(summary="Change a plan (a new preset brings its figures for the limits not sent)"),
    destroy=extend_schema(summary="Delete a plan (a user's: the tenant's applies to them again)"),
)
class PlanViewSet(TenantScopedMixin, viewsets.ModelViewSet):
    serializer_class = PlanSerializer
    pagination_class = cursor_page("user_id")
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    model = UsagePlan

    def tenant_queryset(self):
        plans = UsagePlan.objects.filter(tenant=self.tenant)
        if self.action == "list" and "user_id" in self.request.query_params:
            plans = plans.filter(user_id=self.request.query_params["user_id"])
        return plans

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            plan = plan_create(tenant=self.tenant, **serializer.validated_data)
        except PlanInvalid as invalid:
            raise _invalid(invalid) from None
        return Response(PlanSerializer(plan).data, status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        plan = self.get_object()
        serializer = self.get_serializer(plan, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        try:
            plan = plan_update(tenant=self.tenant, plan_id=plan.pk, **serializer.validated_data)
        except PlanInvalid as invalid:
            raise _invalid(invalid) from None
        return Response(PlanSerializer(plan).data)

    def update(self, request, *args, **kwargs):
        if not kwargs.get("partial"):
            return Response({"detail": "Use PATCH to change a plan.", "errors": {}}, status.HTTP_405_METHOD_NOT_ALLOWED)
        return self.partial_update(request, *args, **kwargs)

    def destroy(self, request, *args, **kwargs):
        plan_delete(tenant=self.tenant, plan_id=self.get_object().pk)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        responses=PresetsSerializer, summary="The presets' figures, per 5-hour block, and where they come from"
    )
    @action(detail=False, methods=["get"], pagination_class=None)
    def presets(self, request):
        results = []
        for preset, label in PlanPreset.choices:
            figures = preset_figures(preset)
            for name in LIMIT_FIELDS:
                if isinstance(figures[name], Decimal):
                    figures[name] = float(figures[name])
            results.append({"preset": preset, "label": label, **figures})
        body = {"source": PRESETS_SOURCE, "token_counting": TokenCounting.INPUT_OUTPUT, "results": results}
        return Response(PresetsSerializer(body).data)


class BlocksView(TenantScopedMixin, APIView):
    @extend_schema(
        parameters=[BlocksQuerySerializer],
        responses=BlocksSerializer,
        summary="A user's 5-hour blocks (as ccusage's `blocks`): tokens, cost, burn rate, projection, % of the plan",
    )
    def get(self, request):
        query = BlocksQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(BlocksSerializer(usage_blocks(tenant=self.tenant, **query.validated_data)).data)


class WeeklyView(TenantScopedMixin, APIView):
    @extend_schema(
        parameters=[WeeklyQuerySerializer],
        responses=WeeklySerializer,
        summary="Usage per week (per user or machine): tokens, cost, the current week's projection, % of the plan",
    )
    def get(self, request):
        query = WeeklyQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(WeeklySerializer(usage_weekly(tenant=self.tenant, **query.validated_data)).data)
