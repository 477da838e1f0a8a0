"""Raw telemetry (ingest_app.otlp): what an OpenTelemetry exporter sent that is no message — tool results and
decisions, API errors, the events a log import had stored first (with the message they pair with), metric
points. Facts as received: read-only, never counted. A session's page shows what its metrics reported (added to
the session admin from here: sessions_app does not know this app)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import ImproperlyConfigured
from django.utils.html import format_html

from ingest_app.models import TelemetryRecord
from ingest_app.selectors.telemetry import session_metered
from platform_kit.admin.display import EMPTY, change_link, changelist_url, number, pretty_json, truncated
from platform_kit.admin.filters import DateRangeFilter, IsNullFilter, ObjectIdFilter
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin
from sessions_app.models import Session

# Claude Code's events and metrics (docs/otel.md): the choices of the name filter, never read from the table.
KNOWN_NAMES = (
    "claude_code.api_request", "claude_code.user_prompt", "claude_code.api_error", "claude_code.tool_result",
    "claude_code.tool_decision", "claude_code.session.count", "claude_code.token.usage", "claude_code.cost.usage",
    "claude_code.lines_of_code.count", "claude_code.commit.count", "claude_code.pull_request.count",
    "claude_code.active_time.total", "claude_code.code_edit_tool.decision",
)  # fmt: skip


class NameFilter(admin.SimpleListFilter):
    title = "name"
    parameter_name = "name"

    def lookups(self, request, model_admin):
        return [(name, name.removeprefix("claude_code.")) for name in KNOWN_NAMES]

    def queryset(self, request, queryset):
        return queryset.filter(name=self.value()) if self.value() else queryset


class SessionFilter(ObjectIdFilter):
    """`?session=<id>`: the session page's link to its metric points."""

    title = parameter_name = "session"
    model = Session
    only_fields = ("id", "name", "tool")  # what a session's str() reads


class PairedFilter(IsNullFilter):
    title = "paired with a message"
    parameter_name = "paired"
    field = "message"
    unset_choice = ("no", "no")
    set_choice = ("yes", "yes: a log import stored it first")


@admin.register(TelemetryRecord)
class TelemetryRecordAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, admin.ModelAdmin):
    list_display = ("name", "kind", "time", "value", "summary", "session_link", "paired")
    list_filter = ("kind", NameFilter, ("time", DateRangeFilter), PairedFilter, "tenant", SessionFilter)
    search_fields = ("=name", "=key")
    search_help_text = "An exact event or metric name, or a record's key."
    ordering = ("-time",)
    sortable_by = ("time",)
    list_select_related = ("session",)
    list_defer = ("resource", "session__metadata")
    fields = (
        ("name", "kind"),
        ("time", "received_at"),
        "session_link",
        "message_link",
        ("value", "sent_value", "start_time"),
        "attributes_display",
        "resource_display",
        ("series", "key"),
        "tenant",
    )
    readonly_fields = flatten_fieldsets([(None, {"fields": fields})])

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session, truncated(str(obj.session), 24)) if obj.session_id else EMPTY

    @admin.display(description="paired with")
    def message_link(self, obj):
        return change_link(obj.message) if obj.message_id else EMPTY

    @admin.display(description="paired", boolean=True)
    def paired(self, obj):
        return obj.message_id is not None

    @admin.display(description="attributes")
    def summary(self, obj):
        attributes = obj.attributes or {}
        keys = ("type", "model", "tool_name", "decision", "success", "error", "status_code")
        return truncated(" · ".join(f"{k}={attributes[k]}" for k in keys if k in attributes), 36) or EMPTY

    @admin.display(description="attributes")
    def attributes_display(self, obj):
        return pretty_json(obj.attributes)

    @admin.display(description="resource")
    def resource_display(self, obj):
        return pretty_json(obj.resource)


@admin.display(description="metered by Claude Code")
def metered_display(obj):
    """What Claude Code's OpenTelemetry metrics reported for the session: shown, never counted (its api_request
    events, or its log, carry the same calls)."""
    metered = session_metered(session=obj) if obj.pk is not None else {}
    if not metered:
        return EMPTY
    tokens = ", ".join(f"{kind} {number(value)}" for kind, value in metered.get("tokens", {}).items())
    cost = metered.get("cost_usd")
    link = changelist_url(TelemetryRecord, session=obj.pk, kind="metric")
    return format_html(
        '{}{} <a href="{}">points</a>', tokens or "", f" · USD {cost:,.4f}" if cost is not None else "", link
    )


def _with_field_after(fieldsets, anchor: str, name: str) -> tuple:
    """The fieldsets with the field `name` on its own line after the line `anchor`."""
    placed = []
    for title, options in fieldsets:
        fields = []
        for line in options["fields"]:
            fields += [line, name] if line == anchor else [line]
        placed.append((title, {**options, "fields": tuple(fields)}))
    if name not in flatten_fieldsets(placed):
        raise ImproperlyConfigured(f"The session admin has no field {anchor!r} to show {name!r} after")
    return tuple(placed)


# sessions_app does not know this app: the metered usage joins its session page from here, under the cost.
_session_admin = admin.site.get_model_admin(Session)
_session_admin.metered_display = metered_display
_session_admin.fieldsets = _with_field_after(_session_admin.fieldsets, "cost_display", "metered_display")
