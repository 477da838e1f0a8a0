"""The usage roll-ups (hourly and daily, read-only; the dashboard's URL), and the model prices that cost them."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import URLField
from django.urls import path
from django.utils.text import Truncator

from platform_kit.admin.display import EMPTY, counter_display
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from sessions_app.admin.dashboard import dashboard_view
from sessions_app.admin.display import SESSION_COUNTERS, CounterColumns
from sessions_app.models import ModelPrice, UsageDaily, UsageHourly


@admin.register(UsageHourly)
class UsageHourlyAdmin(CounterColumns, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "hour",
        "tenant",
        "tool",
        "user_id",
        "project",
        "model",
        "sessions_display",
        "requests_display",
        "conversations_display",
        "messages_display",
        "message_user_display",
        "message_assistant_display",
        "message_toolresult_display",
        "message_error_display",
        "input_tokens_display",
        "output_tokens_display",
        "total_tokens_display",
    )
    list_filter = ("tool", "model", "tenant")
    search_fields = ("=user_id", "=project")
    search_help_text = "An exact user_id or project."
    date_hierarchy = "hour"
    ordering = ("-hour",)
    list_select_related = ("tenant",)
    list_per_page = 100

    fields = readonly_fields = (
        "tenant",
        "hour",
        "tool",
        "user_id",
        "project",
        "model",
        "sessions_display",
        *(f"{field}_display" for field, _ in SESSION_COUNTERS),
    )
    sessions_display = counter_display("sessions", "sessions")

    def get_urls(self):
        dashboard = path(
            "dashboard/",
            self.admin_site.admin_view(lambda request: dashboard_view(request, self)),
            name="sessions_app_usage_dashboard",
        )
        return [dashboard, *super().get_urls()]


@admin.register(UsageDaily)
class UsageDailyAdmin(CounterColumns, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The hourly roll-ups summed per UTC day: what the dashboard reads."""

    list_display = (
        "day",
        "tenant",
        "tool",
        "user_id",
        "project",
        "model",
        "sessions_display",
        "requests_display",
        "conversations_display",
        "messages_display",
        "input_tokens_display",
        "output_tokens_display",
        "total_tokens_display",
    )
    list_filter = ("tool", "model", "tenant")
    search_fields = ("=user_id", "=project")
    search_help_text = "An exact user_id or project."
    date_hierarchy = "day"
    ordering = ("-day",)
    list_select_related = ("tenant",)
    fields = readonly_fields = (
        "tenant",
        "day",
        "tool",
        "user_id",
        "project",
        "model",
        "sessions_display",
        *(f"{field}_display" for field, _ in SESSION_COUNTERS),
    )
    sessions_display = counter_display("sessions", "sessions")


# The admin index links to the usage dashboard.
admin.site.index_template = "admin/sessions_app/index.html"


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """List prices per model: edited here, they change every cost shown at once (costs are never stored)."""

    list_display = (
        "__str__",
        "provider",
        "input_usd_per_mtok",
        "output_usd_per_mtok",
        "cache_read_usd_per_mtok",
        "cache_write_usd_per_mtok",
        "checked_on",
        "notes_preview",
    )
    list_display_links = ("__str__",)
    list_filter = ("provider", "match")
    search_fields = ("model", "notes")
    search_help_text = "Part of the model name or of the notes."
    ordering = ("provider", "model")
    fieldsets = (
        (None, {"fields": (("model", "match"), "provider")}),
        (
            "USD per million tokens",
            {
                "fields": (
                    ("input_usd_per_mtok", "output_usd_per_mtok"),
                    ("cache_read_usd_per_mtok", "cache_write_usd_per_mtok"),
                )
            },
        ),
        ("Where it comes from", {"fields": ("source", "checked_on", "notes", "updated_at")}),
    )
    readonly_fields = ("updated_at",)
    formfield_overrides = {URLField: {"assume_scheme": "https"}}

    @admin.display(description="notes")
    def notes_preview(self, obj):
        return Truncator(obj.notes).chars(80) or EMPTY
