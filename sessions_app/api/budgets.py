"""`/api/v1/budgets/`: a tenant's budgets with where each stands (used, remaining, the projection), created and
changed through `services.budgets` (which checks the bounds and keeps the audit log). docs/budgets.md."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from django.db import transaction
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.response import Response

from platform_kit.api.fields import RejectUnknownFieldsMixin, StrictCharField, StrictIntegerField
from platform_kit.api.pagination import cursor_page
from platform_kit.api.views import TenantScopedMixin
from sessions_app.models import ApiKey, Budget, BudgetCrossing, BudgetPeriod, BudgetScope, BudgetUnit
from sessions_app.models.budgets import (
    EMAILS_MAX_COUNT,
    THRESHOLD_MAX,
    THRESHOLD_MIN,
    THRESHOLDS_MAX_COUNT,
    TOKEN_LIMIT_MAX,
    USD_LIMIT_MAX,
    USD_LIMIT_MIN,
    WINDOW_HOURS_MAX,
    WINDOW_HOURS_MIN,
)
from sessions_app.selectors.budgets import amount, budgets_status
from sessions_app.services.budgets import budget_create, budget_delete, budget_update


@extend_schema_field({"type": "integer", "minimum": WINDOW_HOURS_MIN, "maximum": WINDOW_HOURS_MAX})
class WindowHoursField(StrictIntegerField):
    pass


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "integer", "minimum": THRESHOLD_MIN, "maximum": THRESHOLD_MAX},
        "minItems": 1,
        "maxItems": THRESHOLDS_MAX_COUNT,
        "uniqueItems": True,
    }
)
class ThresholdsField(serializers.ListField):
    pass


def _choices(enum) -> dict:
    return {"invalid_choice": f"Use one of: {', '.join(enum.values)}."}


# The schema states each bound the service checks (in its own words: docs/budgets.md), so clients and the
# schema fuzzer know them; a token limit is a whole number of at most 10**15, a USD one 0.01 to 10**9.
@extend_schema_field({"type": "number", "minimum": float(USD_LIMIT_MIN), "maximum": TOKEN_LIMIT_MAX})
class AmountField(serializers.Field):
    """A JSON number (tokens or USD), read as an exact Decimal; the budget's unit bounds it."""

    default_error_messages = {"invalid": "Must be a number (a JSON number, not a string)."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return Decimal(str(data))

    def to_representation(self, value):
        return value


class CrossingSerializer(serializers.ModelSerializer):
    class Meta:
        model = BudgetCrossing
        fields = ["id", "threshold", "period_start", "crossed_at", "alerts"]


class BudgetSerializer(RejectUnknownFieldsMixin, serializers.ModelSerializer):
    name = StrictCharField(max_length=100)
    scope = serializers.ChoiceField(BudgetScope.values, required=False, error_messages=_choices(BudgetScope))
    scope_value = StrictCharField(max_length=255, required=False, allow_blank=True)
    api_key = serializers.UUIDField(
        source="api_key_id", required=False, allow_null=True, help_text="Scope api_key: the id of one of your keys"
    )
    unit = serializers.ChoiceField(BudgetUnit.values, required=False, error_messages=_choices(BudgetUnit))
    limit = AmountField(
        help_text=f"tokens: a whole number from 1 to {TOKEN_LIMIT_MAX}; usd: {USD_LIMIT_MIN} to {USD_LIMIT_MAX}"
    )
    period = serializers.ChoiceField(BudgetPeriod.values, required=False, error_messages=_choices(BudgetPeriod))
    window_hours = WindowHoursField(
        required=False, allow_null=True, help_text=f"Period rolling only: {WINDOW_HOURS_MIN} to {WINDOW_HOURS_MAX}"
    )
    timezone = StrictCharField(max_length=64, required=False, help_text="IANA name (default UTC)")
    thresholds = ThresholdsField(
        child=StrictIntegerField(),
        required=False,
        help_text=f"1 to {THRESHOLDS_MAX_COUNT} percentages of the limit, each {THRESHOLD_MIN}–{THRESHOLD_MAX} "
        "(default [80, 100]). A threshold the current period is already over when the budget is saved is crossed "
        "at once and alerted (`crossings` in the answer).",
    )
    emails = serializers.ListField(child=StrictCharField(max_length=254), required=False, max_length=EMAILS_MAX_COUNT)
    feishu_url = StrictCharField(max_length=500, required=False, allow_blank=True)
    feishu_secret = StrictCharField(max_length=200, required=False, allow_blank=True, write_only=True)
    dingtalk_url = StrictCharField(max_length=500, required=False, allow_blank=True)
    dingtalk_secret = StrictCharField(max_length=200, required=False, allow_blank=True, write_only=True)
    hard_limit = serializers.BooleanField(required=False)
    active = serializers.BooleanField(required=False)
    feishu_signed = serializers.SerializerMethodField()
    dingtalk_signed = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()
    crossings = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = [
            "id",
            "name",
            "scope",
            "scope_value",
            "api_key",
            "unit",
            "limit",
            "period",
            "window_hours",
            "timezone",
            "thresholds",
            "emails",
            "feishu_url",
            "feishu_secret",
            "feishu_signed",
            "dingtalk_url",
            "dingtalk_secret",
            "dingtalk_signed",
            "hard_limit",
            "active",
            "blocked_until",
            "status",
            "crossings",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "blocked_until", "created_at", "updated_at"]

    def get_feishu_signed(self, budget) -> bool:
        return bool(budget.feishu_secret)

    def get_dingtalk_signed(self, budget) -> bool:
        return bool(budget.dingtalk_secret)

    def get_status(self, budget) -> dict:
        """used, remaining, percent, period_start, period_end, rate_per_hour, projected_used,
        projected_exhaustion_at, exhausted"""
        statuses = self.context.get("statuses") or budgets_status([budget])
        body = statuses[budget.pk].as_dict()
        for name in ("period_start", "period_end", "projected_exhaustion_at"):
            body[name] = serializers.DateTimeField().to_representation(body[name]) if body[name] else None
        return body

    def get_crossings(self, budget) -> list[dict]:
        """The thresholds crossed in the current period."""
        crossings = self.context.get("crossings")
        if crossings is None:
            crossings = _current_crossings([budget], self.context.get("statuses") or budgets_status([budget]))
        return CrossingSerializer(crossings.get(budget.pk, []), many=True).data

    def to_representation(self, budget):
        body = super().to_representation(budget)
        body["limit"] = _number(amount(budget, budget.limit))
        status_body = body.pop("status")
        # The figures users read first sit at the top level too (the contract names them there).
        body.update(status_body)
        body["status"] = status_body
        return body


def _number(value):
    return value if isinstance(value, int) else float(value)


def _current_crossings(budgets, statuses) -> dict:
    found = defaultdict(list)
    if budgets:
        rows = BudgetCrossing.objects.filter(budget__in=budgets).order_by("threshold")
        for crossing in rows:
            if crossing.period_start >= statuses[crossing.budget_id].period_start:
                found[crossing.budget_id].append(crossing)
    return found


@extend_schema_view(
    list=extend_schema(summary="Your budgets, with what each has used and the projection"),
    create=extend_schema(summary="Create a budget"),
    retrieve=extend_schema(summary="A budget: used, remaining, percent, the period, the projected exhaustion"),
    partial_update=extend_schema(summary="Change a budget (kept in its audit log)"),
    destroy=extend_schema(summary="Delete a budget (its audit log stays)"),
)
class BudgetViewSet(TenantScopedMixin, viewsets.ModelViewSet):
    serializer_class = BudgetSerializer
    pagination_class = cursor_page("name")
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    model = Budget

    def tenant_queryset(self):
        return Budget.objects.filter(tenant=self.tenant)

    def _context_for(self, budgets) -> dict:
        statuses = budgets_status(list(budgets))
        return {
            **self.get_serializer_context(),
            "statuses": statuses,
            "crossings": _current_crossings(budgets, statuses),
        }

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.tenant_queryset())
        body = BudgetSerializer(page, many=True, context=self._context_for(page)).data
        return self.get_paginated_response(body)

    @property
    def _actor(self) -> str:
        api_key = self.request.auth
        return f"api key {api_key.prefix}… ({api_key.name or 'unnamed'})" if api_key else str(self.request.user)

    def _fields(self, serializer) -> dict:
        fields = dict(serializer.validated_data)
        if "api_key_id" in fields:
            key_id = fields.pop("api_key_id")
            api_key = ApiKey.objects.filter(tenant=self.tenant, pk=key_id).first() if key_id else None
            if key_id and api_key is None:
                raise serializers.ValidationError({"api_key": ["Name one of your API keys (its id)."]})
            fields["api_key"] = api_key
        return fields

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # The answer is made in the create's transaction: a budget that could not be shown is not kept either.
        with transaction.atomic():
            budget = budget_create(tenant=self.tenant, actor=self._actor, **self._fields(serializer))
            body = BudgetSerializer(budget, context=self._context_for([budget])).data
        return Response(body, status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        budget = self.get_object()
        serializer = self.get_serializer(budget, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                budget = budget_update(
                    tenant=self.tenant, budget_id=budget.pk, actor=self._actor, **self._fields(serializer)
                )
                body = BudgetSerializer(budget, context=self._context_for([budget])).data
        except Budget.DoesNotExist:
            raise Http404 from None
        return Response(body)

    def update(self, request, *args, **kwargs):
        if not kwargs.get("partial"):
            return Response(
                {"detail": "Use PATCH to change a budget.", "errors": {}}, status.HTTP_405_METHOD_NOT_ALLOWED
            )
        return self.partial_update(request, *args, **kwargs)

    def destroy(self, request, *args, **kwargs):
        budget = self.get_object()
        try:
            budget_delete(tenant=self.tenant, budget_id=budget.pk, actor=self._actor)
        except Budget.DoesNotExist:
            raise Http404 from None
        return Response(status=status.HTTP_204_NO_CONTENT)
