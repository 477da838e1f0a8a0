"""The admin of agent-log imports: the directories the collector scans, and how far each file was read.

Import sources are edited here (add a directory, enable or disable it, "scan now"); the imported files
are facts the importer records, so their admin is read-only. Scanning goes through
`services.imports.import_source_scan`, the same call the beat collector makes.
"""

from __future__ import annotations

from pathlib import Path

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from ingest_app.models import ImportedFile, ImportSource
from ingest_app.pipeline import import_source_scan
from platform_kit.admin.display import (
    EMPTY,
    change_url,
    changelist_url,
    count_hint,
    counted,
    file_size,
    hint,
    number,
    pretty_json,
    tail,
    truncated,
)
from platform_kit.admin.mixins import ReadOnlyAdminMixin


class ImportSourceForm(forms.ModelForm):
    class Meta:
        model = ImportSource
        fields = ("tenant", "path", "tool", "user_id", "enabled")

    def clean_path(self):
        path = Path(self.cleaned_data["path"]).expanduser()
        if not path.is_absolute():
            raise forms.ValidationError("Give an absolute path on the server, e.g. /home/dev/.claude/projects.")
        if not path.exists():
            raise forms.ValidationError(f"{path} does not exist on the server (as seen by Open ACE's processes).")
        return str(path)


@admin.register(ImportSource)
class ImportSourceAdmin(admin.ModelAdmin):
    form = ImportSourceForm
    list_display = ("directory", "enabled", "last_scan_at", "last_result", "files_link", "tool_code", "tenant")
    list_filter = ("enabled", "tool", "tenant")
    list_editable = ("enabled",)
    search_fields = ("path", "user_id")
    list_select_related = ("tenant",)
    readonly_fields = ("last_scan_at", "last_result", "files_link", "last_summary_display", "created_at")
    fieldsets = (
        (None, {"fields": ("tenant", "path", "tool", "user_id", "enabled")}),
        ("Last scan", {"fields": ("last_scan_at", "last_result", "files_link", "last_summary_display")}),
    )
    actions = ["scan_now", "enable", "disable"]

    @admin.display(description="tool", ordering="tool")
    def tool_code(self, obj):
        return hint(obj.tool, obj.get_tool_display())

    @admin.display(description="directory", ordering="path")
    def directory(self, obj):
        return tail(obj.path, 40)

    @admin.display(description="last result")
    def last_result(self, obj):
        return truncated((obj.last_summary or {}).get("summary"), 36)

    @admin.display(description="details")
    def last_summary_display(self, obj):
        return pretty_json(obj.last_summary)

    @admin.display(description="files")
    def files_link(self, obj):
        if obj.pk is None:
            return EMPTY
        return format_html('<a href="{}">imported files</a>', changelist_url(ImportedFile, source__id__exact=obj.pk))

    @admin.action(description="Scan now (import what is new)", permissions=["change"])
    def scan_now(self, request, queryset):
        for source in queryset.select_related("tenant"):
            summary = import_source_scan(source=source)
            if summary is None:
                self.message_user(request, f"{source.path}: a scan is already running.", messages.WARNING)
            else:
                level = messages.WARNING if summary.files_refused or summary.issues_total else messages.SUCCESS
                self.message_user(request, f"{source.path}: {summary.line()}", level)

    @admin.action(description="Enable the collector for the selected sources", permissions=["change"])
    def enable(self, request, queryset):
        self.message_user(request, f"Enabled {counted(queryset.update(enabled=True), 'source')}.", messages.SUCCESS)

    @admin.action(description="Disable the collector for the selected sources", permissions=["change"])
    def disable(self, request, queryset):
        self.message_user(request, f"Disabled {counted(queryset.update(enabled=False), 'source')}.", messages.SUCCESS)


@admin.register(ImportedFile)
class ImportedFileAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "file_name",
        "tool",
        "session_link",
        "last_imported_at",
        "progress",
        "messages_display",
        "issues_display",
    )
    list_filter = ("tool", "source", "tenant")
    search_fields = ("path", "agent_session_id")
    list_select_related = ("session", "source", "tenant")
    show_full_result_count = False
    fields = (
        "path",
        "tenant",
        "source",
        "tool",
        "session_link",
        "agent_session_id",
        "progress",
        "size",
        "offset",
        "mtime",
        "device",
        "inode",
        "head_hash",
        "pending",
        "lines_read",
        "messages_imported",
        "issues",
        "last_error",
        "first_imported_at",
        "last_imported_at",
        "carry_display",
    )
    readonly_fields = fields

    @admin.display(description="file", ordering="path")
    def file_name(self, obj):
        """The path's end (the session's file and its folder tell files apart), the whole path on hover."""
        return tail(obj.path, 36)

    @admin.display(description="session")
    def session_link(self, obj):
        if obj.session is None:
            return EMPTY
        return format_html('<a href="{}">{}</a>', change_url(obj.session), truncated(str(obj.session), 24))

    @admin.display(description="read", ordering="offset")
    def progress(self, obj):
        if not obj.size:
            return EMPTY
        return hint(
            f"{100 * obj.offset / obj.size:.0f}% of {file_size(obj.size)}",
            f"{number(obj.offset)} of {number(obj.size)} bytes",
        )

    @admin.display(description="messages", ordering="messages_imported")
    def messages_display(self, obj):
        return count_hint(obj.messages_imported)

    @admin.display(description="issues", ordering="issues")
    def issues_display(self, obj):
        """How many problems the importer met in the file, the latest one on hover."""
        return hint(number(obj.issues), obj.last_error) if obj.issues or obj.last_error else "0"

    @admin.display(description="carry (the parser's state at the offset)")
    def carry_display(self, obj):
        return pretty_json(obj.carry)
