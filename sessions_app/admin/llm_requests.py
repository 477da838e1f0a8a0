"""LLM requests: read-only, with the most complete usage their messages reported, and its cost at its day's price."""

from __future__ import annotations

from datetime import UTC

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from platform_kit.admin.display import EMPTY, change_link, counter_display, text_column, truncated
from platform_kit.admin.filters import DateRangeFilter
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin, UuidSearchMixin
from sessions_app.admin.display import role_badge, tokens_hint
from sessions_app.admin.filters import ModelFilter, SessionFilter
from sessions_app.models import LlmRequest, Message
from sessions_app.models.ledger import ALL_TOKENS
from sessions_app.pricing import PriceBook


@admin.register(LlmRequest)
class LlmRequestAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    list_display = ("display_name", "created_at", "model_column", "tokens_summary", "session_link", "auth_type")
    list_filter = (ModelFilter, ("created_at", DateRangeFilter), "tenant", SessionFilter)
    search_fields = ("=request_id",)
    search_help_text = "An exact request_id or LLM request id."
    ordering = ("-created_at",)
    sortable_by = ("created_at",)
    list_select_related = ("session",)
    list_defer = ("session__metadata",)
    fields = (
        "request_id",
        "session_link",
        "conversation_link",
        ("auth_type", "model"),
        "created_at",
        ("input_tokens_display", "output_tokens_display", "total_tokens_display"),
        ("cache_read_tokens_display", "cache_creation_tokens_display"),
        ("cache_creation_5m_tokens_display", "cache_creation_1h_tokens_display"),
        "cost_display",
        "messages_list",
    )
    readonly_fields = flatten_fieldsets([(None, {"fields": fields})])

    @admin.display(description="cost")
    def cost_display(self, obj):
        price = PriceBook.load().price_for(obj.model, obj.created_at.astimezone(UTC).date())
        if price is None:
            return format_html("no price for <code>{}</code>", obj.model or "(no model)")
        return format_html("USD {} (price {})", f"{price.cost(obj.__dict__):,.6f}", price.pattern)

    input_tokens_display = counter_display("input_tokens", "input tokens")
    output_tokens_display = counter_display("output_tokens", "output tokens")
    total_tokens_display = counter_display("total_tokens", "total tokens")
    cache_read_tokens_display = counter_display("cache_read_tokens", "cache read tokens")
    cache_creation_tokens_display = counter_display("cache_creation_tokens", "cache write tokens")
    cache_creation_5m_tokens_display = counter_display("cache_creation_5m_tokens", "of which 5-minute writes")
    cache_creation_1h_tokens_display = counter_display("cache_creation_1h_tokens", "of which 1-hour writes")

    @admin.display(description="request")
    def display_name(self, obj):
        return truncated(obj.request_id, 32) if obj.request_id else format_html("<em>{}</em>", "no request_id")

    model_column = text_column("model", 28)

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session, truncated(str(obj.session), 24))

    @admin.display(description="tokens", ordering=ALL_TOKENS.asc())
    def tokens_summary(self, obj):
        return tokens_hint(obj)

    @admin.display(description="conversation")
    def conversation_link(self, obj):
        return change_link(obj.conversation) if obj.conversation_id else EMPTY

    @admin.display(description="messages")
    def messages_list(self, obj):
        rows = (
            Message.objects.filter(session_id=obj.session_id, llm_request=obj)
            .order_by("seq")
            .only("id", "seq", "role", "session_id")[:50]
        )
        return (
            format_html_join(
                " ",
                '<a href="{}">#{}</a> {}',
                ((reverse("admin:sessions_app_message_change", args=[m.pk]), m.seq, role_badge(m.role)) for m in rows),
            )
            or EMPTY
        )
