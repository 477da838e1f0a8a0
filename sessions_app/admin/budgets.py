"""Budgets in the admin: created, changed and deleted through `services.budgets` (the API's rules and bounds, and
the audit log), with where each stands, its crossings and its change history."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import models

from platform_kit.admin.display import counted
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from sessions_app.models import Budget, BudgetChange, BudgetCrossing, BudgetPeriod, BudgetScope, BudgetUnit, Tenant
from sessions_app.models.budgets import default_thresholds
from sessions_app.selectors.budgets import amount, budget_status
from sessions_app.services.budgets import (
    EDITABLE_FIELDS,
    BudgetInvalid,
    budget_create,
    budget_delete,
    budget_errors,
    budget_recount,
    budget_update,
)


class ListField(forms.CharField):
    """A list typed as its items with commas, spaces or new lines between them ("80, 100"); a JSON list is read
    too. Shown the same way, so the form saves as it is shown."""

    def __init__(self, *, item=str, item_error="", **kwargs):
        self.item, self.item_error = item, item_error
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list | tuple):
            return ", ".join(str(item) for item in value)
        return "" if value is None else value

    def to_python(self, value):
        text = super().to_python(value)
        if not text:
            return []
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError:
                raise ValidationError("Not a list: write the items with commas between them.") from None
            return items
        try:
            return [self.item(part) for part in re.split(r"[\s,;]+", text) if part]
        except ValueError:
            raise ValidationError(self.item_error) from None


def _https_by_default(field, **kwargs):
    """A bot URL typed without its scheme is https (Django 6's default, asked for now)."""
    if isinstance(field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return field.formfield(**kwargs)


class BudgetForm(forms.ModelForm):
    thresholds = ListField(
        item=int,
        item_error="Each threshold is a whole percentage, e.g. 80, 100.",
        initial=default_thresholds,
        widget=forms.TextInput(attrs={"size": 30}),
        help_text="Percentages of the limit that alert, with commas between them, e.g. 80, 100 (above 100 alerts "
        "on overspending). A threshold the period's usage is already over when the budget is saved alerts at once.",
    )
    emails = ListField(
        required=False,
        initial=list,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="Addresses alerted by email, with commas between them, e.g. ops@example.com, lead@example.com",
    )
    feishu_secret = forms.CharField(required=False, widget=forms.PasswordInput(render_value=True))
    dingtalk_secret = forms.CharField(required=False, widget=forms.PasswordInput(render_value=True))

    class Meta:
        model = Budget
        fields = ["tenant", *EDITABLE_FIELDS]
        formfield_callback = _https_by_default

    def clean(self):
        data = super().clean()
        tenant = data.get("tenant") or getattr(self.instance, "tenant", None)
        if tenant is None:
            return data
        values = {name: data.get(name) for name in EDITABLE_FIELDS}
        values["emails"] = values["emails"] or []
        for name in ("scope_value", "feishu_url", "feishu_secret", "dingtalk_url", "dingtalk_secret"):
            values[name] = values[name] or ""
        for field, errors in budget_errors(values, tenant=tenant).items():
            if field in self.fields:
                self.add_error(field, errors)
            else:
                self.add_error(None, f"{field}: {' '.join(errors)}")
        return data


class CrossingInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = BudgetCrossing
    fields = readonly_fields = ("threshold", "period_start", "crossed_at", "used", "alerts")
    extra = 0
    max_num = 0
    ordering = ("-crossed_at",)


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    form = BudgetForm
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}  # as BudgetForm's, for the admin's own form
    # Ten fields in seven columns, so that the list fits a 1400-pixel screen (tests/test_browser.py).
    list_display = ("name", "tenant", "covers", "limit_shown", "used", "hard_limit", "active")
    list_filter = ("tenant", "scope", "unit", "period", "hard_limit", "active")
    list_select_related = ("tenant", "api_key")
    search_fields = ("name", "scope_value")
    raw_id_fields = ("api_key",)
    readonly_fields = ("where_it_stands", "blocked_until", "created_at", "updated_at")
    inlines = [CrossingInline]
    actions = ["recount"]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()  # nothing to show of a budget not yet saved
        return (*self.readonly_fields, "tenant")

    def get_inlines(self, request, obj):
        return self.inlines if obj else []

    def get_changeform_initial_data(self, request):
        """The tenant chosen for the admin: the one named in the address (`?tenant=`, as the tenant's page links
        here), the one the budget list was filtered by, or the only one there is."""
        initial = super().get_changeform_initial_data(request)
        if "tenant" not in initial:
            filters = dict(parse_qsl(request.GET.get("_changelist_filters", "")))
            chosen = filters.get("tenant__id__exact") or filters.get("tenant")
            if chosen is None:
                only = list(Tenant.objects.values_list("pk", flat=True)[:2])
                chosen = only[0] if len(only) == 1 else None
            if chosen is not None:
                initial["tenant"] = chosen
        return initial

    @admin.display(description="covers", ordering="scope")
    def covers(self, budget):
        if budget.scope == BudgetScope.TENANT:
            return "the whole tenant"
        if budget.scope == BudgetScope.API_KEY:
            return f"API key {budget.api_key.prefix}…" if budget.api_key_id else "an API key"
        return f"{budget.get_scope_display().removeprefix('one ')} {budget.scope_value}"

    @admin.display(description="limit", ordering="limit")
    def limit_shown(self, budget):
        unit = "tokens" if budget.unit == BudgetUnit.TOKENS else "USD"
        period = f"{budget.window_hours} h rolling" if budget.period == BudgetPeriod.ROLLING else budget.period
        return f"{amount(budget, budget.limit):,} {unit} / {period}"

    @admin.display(description="used (this period)")
    def used(self, budget):
        status = budget_status(budget)
        return f"{amount(budget, status.used)} ({status.percent}%)"

    @admin.display(description="where it stands")
    def where_it_stands(self, budget):
        if budget.pk is None:
            return "-"
        status = budget_status(budget)
        projection = status.projected_exhaustion_at
        runs_out = (
            "used up" if status.exhausted else (f"runs out {projection:%Y-%m-%d %H:%M} UTC" if projection else "lasts")
        )
        return (
            f"{amount(budget, status.used)} of {amount(budget, budget.limit)} ({status.percent}%) in "
            f"{status.period_start:%Y-%m-%d %H:%M} – {status.period_end:%Y-%m-%d %H:%M} UTC; at this pace it {runs_out}"
        )

    def _actor(self, request) -> str:
        return f"admin {request.user.get_username()}"

    def save_model(self, request, obj, form, change):
        fields = {name: form.cleaned_data.get(name) for name in EDITABLE_FIELDS}
        fields["emails"] = fields["emails"] or []
        for name in ("scope_value", "feishu_url", "feishu_secret", "dingtalk_url", "dingtalk_secret"):
            fields[name] = fields[name] or ""
        try:
            if change:
                saved = budget_update(tenant=obj.tenant, budget_id=obj.pk, actor=self._actor(request), **fields)
            else:
                saved = budget_create(tenant=form.cleaned_data["tenant"], actor=self._actor(request), **fields)
        except BudgetInvalid as invalid:
            raise ValidationError(invalid.message_dict) from None
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request, obj):
        budget_delete(tenant=obj.tenant, budget_id=obj.pk, actor=self._actor(request))

    def delete_queryset(self, request, queryset):
        for budget in queryset:
            self.delete_model(request, budget)

    @admin.action(description="Count the current period again from the roll-ups (after a price change)")
    def recount(self, request, queryset):
        for budget in queryset:
            budget_recount(budget=budget)
        self.message_user(request, f"Counted {counted(queryset.count(), 'budget')} again.", messages.SUCCESS)


@admin.register(BudgetChange)
class BudgetChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("changed_at", "budget_name", "action", "actor", "tenant")
    list_filter = ("action", "tenant")
    list_select_related = ("tenant",)
    search_fields = ("budget_name", "actor", "=budget_id")
    fields = readonly_fields = ("changed_at", "tenant", "budget_id", "budget_name", "action", "actor", "changes")
