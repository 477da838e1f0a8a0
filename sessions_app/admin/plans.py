"""Usage plans in the admin: created and changed through `services.plans`, with the API's rules and bounds — a preset
fills the limits left unchanged with its figures. The dashboard shows each active user's current block and week
against them (admin/dashboard.py)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from platform_kit.admin.display import EMPTY
from sessions_app.models import UsagePlan
from sessions_app.models.plans import PRESETS_SOURCE
from sessions_app.services.plans import (
    EDITABLE_FIELDS,
    PlanInvalid,
    plan_create,
    plan_errors,
    plan_update,
    plan_values,
)


class PlanForm(forms.ModelForm):
    class Meta:
        model = UsagePlan
        fields = ["tenant", *EDITABLE_FIELDS]
        help_texts = {
            "preset": "Choosing one fills the limits you leave unchanged with its figures (Claude-Code-Usage-Monitor's "
            f'community figures: <a href="{PRESETS_SOURCE}" rel="noopener">source</a>); every figure stays editable.',
        }

    def given(self) -> dict:
        """What the form changed, as the service takes it: on a new plan, the limits left empty are not given (the
        preset's figures fill them), as in the API."""
        values = {name: self.cleaned_data.get(name) for name in EDITABLE_FIELDS if name in self.changed_data}
        for name in ("user_id", "notes"):
            if name in values:
                values[name] = values[name] or ""
        return values

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        values = plan_values(plan=self.instance if self.instance.pk else None, fields=self.given())
        for field, errors in plan_errors(values).items():
            self.add_error(field if field in self.fields else None, errors)
        tenant = data.get("tenant") or getattr(self.instance, "tenant", None)
        others = UsagePlan.objects.filter(tenant=tenant, user_id=values["user_id"]).exclude(pk=self.instance.pk)
        if tenant is not None and others.exists():
            whose = f"user {values['user_id']!r}" if values["user_id"] else "this tenant"
            self.add_error("user_id", f"A plan for {whose} exists already: change that one.")
        return data


@admin.register(UsagePlan)
class UsagePlanAdmin(admin.ModelAdmin):
    form = PlanForm
    list_display = ("tenant", "whose", "preset", "block_limits", "weekly_limits", "week_resets", "updated_at")
    list_filter = ("tenant", "preset")
    list_select_related = ("tenant",)
    search_fields = ("=user_id",)
    search_help_text = "An exact user_id."
    readonly_fields = ("created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        return ("tenant", *self.readonly_fields) if obj else self.readonly_fields

    @admin.display(description="for", ordering="user_id")
    def whose(self, plan):
        return plan.user_id or "every user (the tenant's plan)"

    @staticmethod
    def _limits(tokens, cost, messages) -> str:
        parts = [
            f"{tokens:,} tokens" if tokens is not None else None,
            f"${cost:,.2f}" if cost is not None else None,
            f"{messages:,} messages" if messages is not None else None,
        ]
        return " · ".join(part for part in parts if part) or EMPTY

    @admin.display(description="per 5-hour block")
    def block_limits(self, plan):
        return self._limits(plan.token_limit, plan.cost_limit, plan.message_limit)

    @admin.display(description="per week")
    def weekly_limits(self, plan):
        return self._limits(plan.weekly_token_limit, plan.weekly_cost_limit, plan.weekly_message_limit)

    @admin.display(description="week resets")
    def week_resets(self, plan):
        return f"{plan.get_week_starts_on_display()} {plan.week_start_hour:02d}:00 UTC"

    def save_model(self, request, obj, form, change):
        given = form.given()
        try:
            if change:
                saved = plan_update(tenant=obj.tenant, plan_id=obj.pk, **given)
            else:
                saved = plan_create(tenant=form.cleaned_data["tenant"], **given)
        except PlanInvalid as invalid:
            raise ValidationError(invalid.message_dict) from None
        obj.pk = saved.pk
        obj.refresh_from_db()
