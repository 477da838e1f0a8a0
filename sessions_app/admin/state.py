"""State versions: read-only, every version's data."""

from __future__ import annotations

from django.contrib import admin
from django.utils.text import Truncator

from platform_kit.admin.display import change_link, pretty_json
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin
from sessions_app.admin.filters import SessionFilter
from sessions_app.models import StateVersion


@admin.register(StateVersion)
class StateVersionAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, admin.ModelAdmin):
    list_display = ("display_name", "session_link", "change", "created_at")
    list_filter = ("change", SessionFilter)
    ordering = ("-id",)  # newest first, by the primary key index
    sortable_by = ()
    list_select_related = ("session",)
    list_defer = ("data", "session__metadata")
    fields = readonly_fields = ("session_link", "version", "change", "created_at", "data_display")

    @admin.display(description="version")
    def display_name(self, obj):
        return f"v{obj.version}"

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session, Truncator(str(obj.session)).chars(40))

    @admin.display(description="data")
    def data_display(self, obj):
        return pretty_json(obj.data) if obj.data else "{}"
