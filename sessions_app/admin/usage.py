"""The usage roll-ups (hourly and daily, read-only; the dashboard's URL), and the model prices that cost them."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import URLField
from django.template.response import TemplateResponse
from django.urls import path

from platform_kit.admin.display import EMPTY, count_hint, counter_display, text_column, truncated
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from sessions_app.admin.dashboard import dashboard_view
from sessions_app.admin.display import SESSION_COUNTERS, CounterColumns
from sessions_app.models import ModelPrice, UsageDaily, UsageHourly
from sessions_app.price_lists import PriceListError
from sessions_app.selectors.prices import unpriced_models
from sessions_app.services.prices import price_import_lines, prices_import

# What a roll-up row counts under, besides its tenant and its time bucket.
ROLLUP_KEYS = ("tool", "user_id", "project", "machine", "model")


class UsageAdmin(CounterColumns, ReadOnlyAdminMixin, admin.ModelAdmin):
    """A roll-up table, read-only: counters per tenant, time bucket, tool, user, project, machine and model.

    A subclass names its time column (`bucket`); the list's columns, date hierarchy and ordering and the page's
    fields follow from it. The list answers "who used what, when, how much": the messages per role and the
    kinds of token are on the hover of the compact counts.
    """

    bucket = ""  # the time column: "hour" or "day"

    list_filter = ("tool", "model", "tenant")
    search_fields = ("=user_id", "=project", "=machine")
    search_help_text = "An exact user_id, project or machine."
    list_select_related = ("tenant",)
    list_per_page = 100
    sessions_display = counter_display("sessions", "sessions")
    # Long values cut short, the whole on hover: every column stays on a 1400-pixel screen.
    tool_column = text_column("tool", 12)
    user_id_column = text_column("user_id", 11, "user ID")
    project_column = text_column("project", 15, from_end=True)
    machine_column = text_column("machine", 10)
    model_column = text_column("model", 19)
    tenant_column = text_column("tenant", 10, ordering="tenant__name")

    @admin.display(description="requests", ordering="requests")
    def requests_summary(self, obj):
        return count_hint(obj.requests)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.list_display = (
            cls.bucket,
            *(f"{key}_column" for key in ROLLUP_KEYS),
            "tenant_column",
            "sessions_display",
            "requests_summary",
            "messages_summary",
            "tokens_summary",
        )
        cls.date_hierarchy = cls.bucket
        cls.ordering = (f"-{cls.bucket}",)
        cls.fields = cls.readonly_fields = (
            "tenant",
            cls.bucket,
            *ROLLUP_KEYS,
            "sessions_display",
            *(f"{field}_display" for field, _ in SESSION_COUNTERS),
        )


@admin.register(UsageHourly)
class UsageHourlyAdmin(UsageAdmin):
    """The roll-ups per UTC hour, which grouped statistics read; the usage dashboard is served from here."""

    bucket = "hour"

    def get_urls(self):
        dashboard = path(
            "dashboard/",
            self.admin_site.admin_view(lambda request: dashboard_view(request, self)),
            name="sessions_app_usage_dashboard",
        )
        return [dashboard, *super().get_urls()]


@admin.register(UsageDaily)
class UsageDailyAdmin(UsageAdmin):
    """The hourly roll-ups summed per UTC day: what the dashboard reads."""

    bucket = "day"


# The admin index links to the usage dashboard.
admin.site.index_template = "admin/sessions_app/index.html"


def usd_per_mtok(field: str, description: str):
    """A price column without the decimal field's trailing zeros: 0.400000 → 0.40, 0.062500 → 0.0625."""

    @admin.display(description=description, ordering=field)
    def display(self, obj):
        value = getattr(obj, field)
        if value is None:
            return EMPTY
        text = f"{value:f}".rstrip("0")
        whole, _, fraction = text.partition(".")
        return f"{whole}.{fraction.ljust(2, '0')}"

    return display


class PriceImportForm(forms.Form):
    file = forms.FileField(help_text="LiteLLM's model_prices_and_context_window.json or models.dev's api.json")
    effective_from = forms.DateField(
        required=False,
        help_text="The UTC day a changed price takes effect (YYYY-MM-DD); empty: today. Usage before keeps its price.",
    )
    scope = forms.ChoiceField(
        choices=[
            ("used", "the models this install has used or already prices"),
            ("all", "every model of the list"),
            ("known", "only models that already have a price"),
        ],
        initial="used",
    )
    providers = forms.CharField(
        required=False,
        help_text="Only these providers' listings, as the list names them, comma-separated (anthropic, bedrock…)",
    )

    MAX_BYTES = 32 * 1024 * 1024  # LiteLLM's list is about 1.6 MB


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """List prices per model: edited here, they change every cost shown at once (costs are never stored). A price
    with a date applies from that UTC day on; the usage before it keeps the earlier price."""

    list_display = (
        "__str__",
        "provider",
        "effective_from_display",
        "input_price",
        "output_price",
        "cache_read_price",
        "cache_write_price",
        "cache_write_1h_price",
        "checked_on",
        "notes_preview",
    )
    list_display_links = ("__str__",)
    list_filter = ("provider", "match")
    search_fields = ("model", "notes")
    search_help_text = "Part of the model name or of the notes."
    ordering = ("provider", "model", "effective_from")
    fieldsets = (
        (None, {"fields": (("model", "match"), "provider", "effective_from")}),
        (
            "USD per million tokens",
            {
                "fields": (
                    ("input_usd_per_mtok", "output_usd_per_mtok"),
                    ("cache_read_usd_per_mtok", "cache_write_usd_per_mtok", "cache_write_1h_usd_per_mtok"),
                )
            },
        ),
        (
            "Long-context tier: requests whose prompt is over 200K tokens (empty: the rates above)",
            {
                "fields": (
                    ("long_context_input_usd_per_mtok", "long_context_output_usd_per_mtok"),
                    (
                        "long_context_cache_read_usd_per_mtok",
                        "long_context_cache_write_usd_per_mtok",
                        "long_context_cache_write_1h_usd_per_mtok",
                    ),
                ),
                "classes": ("collapse",),
            },
        ),
        ("Where it comes from", {"fields": ("source", "checked_on", "notes", "updated_at")}),
    )
    readonly_fields = ("updated_at",)
    formfield_overrides = {URLField: {"assume_scheme": "https"}}
    change_list_template = "admin/sessions_app/modelprice/change_list.html"

    @admin.display(description="notes")
    def notes_preview(self, obj):
        return truncated(obj.notes, 24)

    @admin.display(description="from", ordering="effective_from")
    def effective_from_display(self, obj):
        return f"{obj.effective_from:%Y-%m-%d}" if obj.effective_from else "always"

    # The rates' unit is said once, above the list (the template), so that every column fits a 1400-pixel screen.
    input_price = usd_per_mtok("input_usd_per_mtok", "input")
    output_price = usd_per_mtok("output_usd_per_mtok", "output")
    cache_read_price = usd_per_mtok("cache_read_usd_per_mtok", "cache read")
    cache_write_price = usd_per_mtok("cache_write_usd_per_mtok", "5-min write")
    cache_write_1h_price = usd_per_mtok("cache_write_1h_usd_per_mtok", "1-hour write")

    def get_urls(self):
        return [
            path("unpriced/", self.admin_site.admin_view(self.unpriced_view), name="sessions_app_modelprice_unpriced"),
            path("import/", self.admin_site.admin_view(self.import_view), name="sessions_app_modelprice_import"),
            *super().get_urls(),
        ]

    def unpriced_view(self, request):
        """Every model of the usage without a price today, most tokens first, each with a link to price it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Unpriced models",
            "opts": self.opts,
            "models": unpriced_models(),
            "can_add": self.has_add_permission(request),
        }
        return TemplateResponse(request, "admin/sessions_app/modelprice/unpriced.html", context)

    def import_view(self, request):
        """Upload a price list: with "Preview" nothing is written; "Import" writes (sessions_app.services.prices)."""
        if not (self.has_add_permission(request) and self.has_change_permission(request)):
            raise PermissionDenied
        form = PriceImportForm(request.POST or None, request.FILES or None)
        lines = None
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            if upload.size > form.MAX_BYTES:
                form.add_error("file", f"Larger than {form.MAX_BYTES // (1024 * 1024)} MB: not a price list.")
            else:
                providers = [name.strip() for name in form.cleaned_data["providers"].split(",") if name.strip()]
                try:
                    report = prices_import(
                        data=upload.read(),
                        effective_from=form.cleaned_data["effective_from"],
                        providers=tuple(providers),
                        everything=form.cleaned_data["scope"] == "all",
                        only_known=form.cleaned_data["scope"] == "known",
                        dry_run="import" not in request.POST,
                    )
                    lines = price_import_lines(report, limit=None)
                except PriceListError as error:
                    form.add_error("file", f"{error}. Nothing was written.")
        context = {
            **self.admin_site.each_context(request),
            "title": "Import a price list",
            "opts": self.opts,
            "form": form,
            "lines": lines,
        }
        return TemplateResponse(request, "admin/sessions_app/modelprice/import.html", context)
