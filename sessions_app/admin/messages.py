"""Messages: read-only, listed without counting the table, searched with the API's full-text index."""

from __future__ import annotations

import re

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Q, TextField
from django.db.models.functions import Cast, Substr
from django.utils.html import format_html

from platform_kit.admin.display import (
    EMPTY,
    change_link,
    count_hint,
    counter_display,
    parse_uuid,
    pre,
    pretty_json,
    truncated,
)
from platform_kit.admin.filters import DateRangeFilter
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin
from sessions_app.admin.display import PREVIEW_CHARS, preview, role_badge
from sessions_app.admin.filters import ModelFilter, SessionFilter, SessionToolFilter
from sessions_app.links import timeline_url
from sessions_app.models import Message
from sessions_app.search import keyword_filter

# Looks like an id a client sent (external_id, request_id): worth an exact match besides full-text.
IDENTIFIER = re.compile(r"(?=.*[0-9_.:/-])[A-Za-z0-9_.:/-]{4,255}")


def purged_note(message) -> str:
    """What the admin shows for a message whose content retention purged (docs/retention.md)."""
    return format_html("<em>[content purged on {}]</em>", f"{message.content_purged_at:%Y-%m-%d %H:%M} UTC")


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, admin.ModelAdmin):
    list_display = ("created_at", "session_link", "seq", "role_display", "model", "tokens", "content_preview")
    list_display_links = ("created_at",)
    list_filter = (
        "role",
        SessionToolFilter,
        ModelFilter,
        ("created_at", DateRangeFilter),
        "tenant",
        SessionFilter,
    )
    search_fields = ("content",)  # shows the search box; get_search_results does the real work
    search_help_text = (
        'Full-text search in the content: English words, Chinese text, "exact phrases", -excluded words. '
        "An exact external_id, request_id or message id also matches."
    )
    ordering = ("-created_at", "-seq")  # the message_created index; seq orders one batch (same created_at)

    def get_ordering(self, request):
        if SessionFilter.parameter_name in request.GET:
            # One session: newest first by seq (its own index). Walking created_at would first skip every
            # newer message of every other session, which for an old, large session is most of the table.
            return ("-seq",)
        return super().get_ordering(request)

    sortable_by = ("created_at",)
    list_select_related = ("session",)
    list_defer = (
        "content",
        "thinking",
        "tool_calls",
        "metadata",
        "search_vector",
        "session__metadata",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "session_link",
                    "conversation_link",
                    ("seq", "role_display"),
                    ("created_at", "received_at"),
                    ("external_id", "feishu_conversation_id"),
                )
            },
        ),
        ("Content", {"fields": ("content_display", "thinking_display", "tool_name", "tool_calls_display")}),
        (
            "LLM request",
            {
                "fields": (
                    "llm_request_link",
                    ("request_id", "auth_type"),
                    ("model", "finish_reason", "elapsed_ms"),
                    ("input_tokens_display", "output_tokens_display", "total_tokens_display"),
                    ("cache_read_tokens_display", "cache_creation_tokens_display"),
                )
            },
        ),
        ("Metadata", {"fields": ("metadata_display",)}),
    )
    readonly_fields = flatten_fieldsets(fieldsets)

    input_tokens_display = counter_display("input_tokens", "input tokens")
    output_tokens_display = counter_display("output_tokens", "output tokens")
    total_tokens_display = counter_display("total_tokens", "total tokens")
    cache_read_tokens_display = counter_display("cache_read_tokens", "cache read tokens")
    cache_creation_tokens_display = counter_display("cache_creation_tokens", "cache write tokens")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("search_vector")

    def list_annotations(self):
        return {
            "content_head": Substr("content", 1, PREVIEW_CHARS + 1),
            "tool_calls_head": Substr(Cast("tool_calls", TextField()), 1, PREVIEW_CHARS + 1),
        }

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        found = keyword_filter(queryset, term)
        condition = Q()
        if IDENTIFIER.fullmatch(term):
            condition |= Q(external_id=term) | Q(request_id=term)
        pk = parse_uuid(term)
        if pk is not None:
            condition |= Q(pk=pk)
        if condition:
            found = found | queryset.filter(condition)
        return found, False

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session, truncated(str(obj.session), 28))

    @admin.display(description="conversation")
    def conversation_link(self, obj):
        if obj.conversation_id is None:
            return EMPTY
        return format_html(
            '{} · <a href="{}">show in the timeline</a>',
            change_link(obj.conversation),
            timeline_url(obj.session_id, at_seq=obj.seq),
        )

    @admin.display(description="LLM request")
    def llm_request_link(self, obj):
        return change_link(obj.llm_request) if obj.llm_request_id else EMPTY

    @admin.display(description="role", ordering="role")
    def role_display(self, obj):
        return role_badge(obj.role)

    @admin.display(description="content")
    def content_preview(self, obj):
        if obj.content_purged_at:
            return purged_note(obj)
        text = preview(obj.content_head or obj.tool_calls_head, 28 if obj.tool_name else 40)
        if obj.tool_name:
            return format_html("<code>{}</code> {}", truncated(obj.tool_name, 12), "" if text == EMPTY else text)
        return text

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, obj):
        return count_hint(obj.total_tokens)

    @admin.display(description="content")
    def content_display(self, obj):
        return purged_note(obj) if obj.content_purged_at else pre(obj.content)

    @admin.display(description="thinking")
    def thinking_display(self, obj):
        if not obj.thinking:
            return EMPTY
        return format_html("<details><summary>show thinking</summary>{}</details>", pre(obj.thinking))

    @admin.display(description="tool calls")
    def tool_calls_display(self, obj):
        return pretty_json(obj.tool_calls)

    @admin.display(description="metadata")
    def metadata_display(self, obj):
        return pretty_json(obj.metadata)
