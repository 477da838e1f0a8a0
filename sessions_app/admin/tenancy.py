"""Tenants and API keys: keys are created and revoked through the API-key service, never deleted."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, Q
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import ngettext

from platform_kit.admin.display import EMPTY, badge, counted, number
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from sessions_app.admin.display import STATUS_TONES
from sessions_app.admin.filters import ApiKeyStatusFilter
from sessions_app.models import ApiKey, Tenant
from sessions_app.services.apikeys import KEY_PREFIX, apikey_create, apikey_update, apikeys_revoke

RATE_LIMITS = ("requests_per_minute", "tokens_per_minute")


def key_display(api_key: ApiKey) -> str:
    return f"{KEY_PREFIX}{api_key.prefix}_…"


def key_status(api_key: ApiKey):
    if api_key.revoked_at:
        return badge("revoked", STATUS_TONES["revoked"])
    return badge("active", STATUS_TONES["active"])


class ApiKeyInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ApiKey
    fields = readonly_fields = ("key", "name", "created_at", "last_used_at", "revoked_at", "status")
    show_change_link = True
    can_delete = False
    extra = 0

    @admin.display(description="key")
    def key(self, obj):
        return key_display(obj)

    @admin.display(description="status")
    def status(self, obj):
        return key_status(obj)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at", "active_keys", "all_keys")
    search_fields = ("name",)
    fields = ("name", "created_at", "add_key_link", "budgets_link")
    readonly_fields = ("created_at", "add_key_link", "budgets_link")
    inlines = [ApiKeyInline]
    # Its action "Export all data of the selected tenants" is portability's (portability_app/admin/exports.py).

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                key_count=Count("api_keys"),
                active_key_count=Count("api_keys", filter=Q(api_keys__revoked_at__isnull=True)),
            )
        )

    def has_delete_permission(self, request, obj=None):
        return False  # a tenant's sessions and keys are kept for audit

    @admin.display(description="active keys", ordering="active_key_count")
    def active_keys(self, obj):
        return number(obj.active_key_count)

    @admin.display(description="all keys", ordering="key_count")
    def all_keys(self, obj):
        return number(obj.key_count)

    @admin.display(description="API keys")
    def add_key_link(self, obj):
        if obj.pk is None:
            return EMPTY
        url = reverse("admin:sessions_app_apikey_add") + "?" + urlencode({"tenant": obj.pk})
        return format_html('<a href="{}">Create an API key for this tenant</a>', url)

    @admin.display(description="budgets")
    def budgets_link(self, obj):
        if obj.pk is None:
            return EMPTY
        count = obj.budgets.count()
        listed = reverse("admin:sessions_app_budget_changelist") + "?" + urlencode({"tenant__id__exact": obj.pk})
        add = reverse("admin:sessions_app_budget_add") + "?" + urlencode({"tenant": obj.pk})
        return format_html(
            '<a href="{}">{}</a> · <a href="{}">Add a budget for this tenant</a>',
            listed,
            ngettext("%(count)d budget", "%(count)d budgets", count) % {"count": count},
            add,
        )


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("key", "name", "tenant", "status", "rate_limits", "created_at", "last_used_at", "revoked_at")
    list_display_links = ("key", "name")
    list_filter = (ApiKeyStatusFilter, "tenant")
    search_fields = ("name", "=prefix", "tenant__name")
    search_help_text = "Part of the name or the tenant's name, or the key's prefix (the hex after ace_)."
    list_select_related = ("tenant",)
    actions = ["revoke_keys"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("tenant", "name", *RATE_LIMITS)
        return ("key", "tenant", "name", *RATE_LIMITS, "status", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("key", "tenant", "status", "created_at", "last_used_at", "revoked_at")

    def has_delete_permission(self, request, obj=None):
        return False  # revoke instead: the key's row says who had access and when

    @admin.display(description="key")
    def key(self, obj):
        return key_display(obj)

    @admin.display(description="status", ordering="revoked_at")
    def status(self, obj):
        return key_status(obj)

    @admin.display(description="gateway limits")
    def rate_limits(self, obj):
        limits = [
            f"{number(value)} {unit}/min"
            for value, unit in ((obj.requests_per_minute, "calls"), (obj.tokens_per_minute, "tokens"))
            if value is not None
        ]
        return " · ".join(limits) if limits else EMPTY

    def save_model(self, request, obj, form, change):
        if change:
            fields = [f for f in form.changed_data if f in ("name", *RATE_LIMITS)]
            if fields:
                apikey_update(api_key=obj, fields=fields)
            return
        created = apikey_create(
            tenant_name=form.cleaned_data["tenant"].name,
            name=form.cleaned_data.get("name", ""),
            **{field: form.cleaned_data.get(field) for field in RATE_LIMITS},
        )
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(created.api_key, field.attname))
        obj._state.adding = False
        obj._state.db = created.api_key._state.db
        obj._plain_key = created.plain_key  # shown once by response_add, never stored

    def response_add(self, request, obj, post_url_continue=None):
        plain_key = getattr(obj, "_plain_key", None)
        if plain_key is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "API key created",
            "subtitle": None,
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "api_key": obj,
            "plain_key": plain_key,
        }
        request.current_app = self.admin_site.name
        response = TemplateResponse(request, "admin/sessions_app/apikey/created.html", context)
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_keys(self, request, queryset):
        selected = queryset.count()
        revoked = apikeys_revoke(keys=queryset)
        message = f"Revoked {counted(revoked, 'key')}."
        if revoked < selected:
            message += f" {selected - revoked} were already revoked."
        self.message_user(request, message, messages.SUCCESS)
