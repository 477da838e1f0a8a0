"""The gateway's providers in the admin: created, changed and deleted through the same services as the API (the
same checks, the same cache dropped), the API key write-only, and the actions Activate and Deactivate."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from gateway_app.models import Provider
from gateway_app.services.providers import (
    EDITABLE,
    provider_create,
    provider_delete,
    provider_update,
    provider_validate,
    providers_set_active,
)
from platform_kit.admin.display import EMPTY, truncated

FORM_FIELDS = ("tenant", "name", "kind", "base_url", "api_key", "active", "allowed_models")


class ProviderForm(forms.ModelForm):
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="The provider's key, sent upstream on every call. Stored encrypted and never shown again; on a "
        "provider that has one, leave it blank to keep it.",
    )
    allowed_models = forms.CharField(
        label="models",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One model name a line: the models its calls may ask for. Empty: any model.",
    )

    class Meta:
        model = Provider
        fields = ("tenant", "name", "kind", "base_url", "active", "allowed_models")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:
            self.initial["allowed_models"] = "\n".join(self.instance.allowed_models)
            self.fields["api_key"].widget.attrs["placeholder"] = f"{self.instance.api_key_hint or EMPTY} (kept)"

    def clean_allowed_models(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["allowed_models"].splitlines() if line.strip()]

    def clean(self):
        cleaned = super().clean()
        adding = self.instance._state.adding
        tenant = cleaned.get("tenant") if adding else self.instance.tenant
        if tenant is None:
            return cleaned  # the tenant field says why
        values = {field: cleaned[field] for field in EDITABLE if field in cleaned and field != "api_key"}
        if adding or cleaned.get("api_key"):
            values["api_key"] = cleaned.get("api_key", "")
        try:
            checked = provider_validate(tenant=tenant, values=values, provider=None if adding else self.instance)
        except ValidationError as error:
            for field, problems in error.message_dict.items():
                for problem in problems:
                    self.add_error(field if field in self.fields else None, problem)
        else:
            cleaned.update(checked)
        return cleaned


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ("name", "tenant", "kind", "base_url_display", "api_key_hint", "active", "models_display")
    list_filter = ("tenant", "kind", "active")
    search_fields = ("name", "base_url")
    search_help_text = "Part of the provider's name or base URL."
    list_select_related = ("tenant",)
    readonly_fields = ("id", "api_key_hint", "created_at", "updated_at")
    actions = ("deactivate", "activate")

    def get_fields(self, request, obj=None):
        if obj is None:
            return FORM_FIELDS
        return ("id", *FORM_FIELDS[:4], "api_key_hint", *FORM_FIELDS[4:], "created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is None else (*self.readonly_fields, "tenant")

    def save_model(self, request, obj, form, change):
        # Through the services: validated as the API validates, the key encrypted, every process's cache told.
        data = form.cleaned_data
        if change:
            changes = {field: data[field] for field in form.changed_data if field in EDITABLE and field != "api_key"}
            if data.get("api_key"):
                changes["api_key"] = data["api_key"]
            saved = provider_update(tenant=obj.tenant, provider_id=obj.pk, **changes)
        else:
            saved = provider_create(
                tenant=data["tenant"], **{field: data[field] for field in EDITABLE if field in data}
            )
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        provider_delete(tenant=obj.tenant, provider_id=obj.pk)

    def delete_queryset(self, request, queryset):
        for provider in queryset.select_related("tenant"):
            provider_delete(tenant=provider.tenant, provider_id=provider.pk)

    @admin.display(description="base URL", ordering="base_url")
    def base_url_display(self, provider):
        return truncated(provider.base_url, 60)

    @admin.display(description="models")
    def models_display(self, provider):
        return truncated(", ".join(provider.allowed_models), 60) if provider.allowed_models else "any"

    @admin.action(description="Deactivate the selected providers (their calls are refused)", permissions=["change"])
    def deactivate(self, request, queryset):
        changed = providers_set_active(providers=queryset, active=False)
        self.message_user(request, f"Deactivated {changed} provider(s): their calls are refused.", messages.SUCCESS)

    @admin.action(description="Activate the selected providers", permissions=["change"])
    def activate(self, request, queryset):
        changed = providers_set_active(providers=queryset, active=True)
        self.message_user(request, f"Activated {changed} provider(s).", messages.SUCCESS)
