"""Streamed chat turns: read-only; a turn's page shows its question and answer as in the chat."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models.functions import Substr
from django.utils.html import format_html

from platform_kit.admin.display import EMPTY, change_link, number, truncated
from platform_kit.admin.filters import DateRangeFilter
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin, UuidSearchMixin
from sessions_app.admin.display import PREVIEW_CHARS, preview
from sessions_app.admin.filters import ConversationFilter, SessionFilter, TurnStatusFilter
from sessions_app.admin.transcript import chat_messages, finish_reason_badge, latency, turn_status_badge
from sessions_app.links import chat_url
from sessions_app.models import Turn

# The long columns of a turn's two messages: never read for the list.
MESSAGE_HEAVY_FIELDS = ("content", "thinking", "tool_calls", "metadata", "attachments", "search_vector")


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "started_at",
        "status_display",
        "question_preview",
        "session_link",
        "conversation_link",
        "model_display",
        "tokens",
        "latency_display",
        "finish_display",
    )
    list_display_links = ("started_at",)
    list_filter = (TurnStatusFilter, ("started_at", DateRangeFilter), "tenant", SessionFilter, ConversationFilter)
    search_fields = ("=external_id",)
    search_help_text = "An exact turn id or external_id."
    ordering = ("-started_at",)  # the turn_started index
    sortable_by = ("started_at",)
    list_select_related = ("session", "conversation", "user_message", "assistant_message")
    list_defer = (
        "session__metadata",
        *(f"user_message__{field}" for field in MESSAGE_HEAVY_FIELDS),
        *(f"assistant_message__{field}" for field in MESSAGE_HEAVY_FIELDS),
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "status_display",
                    "session_link",
                    "conversation_link",
                    "messages_links",
                    ("model_display", "tokens", "finish_display"),
                    "external_id",
                )
            },
        ),
        (
            "Timing",
            {
                "fields": (
                    ("started_at", "system_ready_at"),
                    ("last_activity_at", "completed_at"),
                    "latency_display",
                    "completion_digest",
                )
            },
        ),
    )
    readonly_fields = flatten_fieldsets(fieldsets)

    def list_annotations(self):
        return {"question_head": Substr("user_message__content", 1, PREVIEW_CHARS + 1)}

    def get_queryset(self, request):
        # The change page reads the turn and both its messages in one query.
        return (
            super()
            .get_queryset(request)
            .select_related(*self.list_select_related)
            .defer("session__metadata", "user_message__search_vector", "assistant_message__search_vector")
        )

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            pair = sorted((obj.user_message, obj.assistant_message), key=lambda m: m.seq)
            context["turn_messages"] = chat_messages(pair, turns={m.pk: obj for m in pair})
            context["turn_chat_url"] = chat_url(obj.conversation_id, at_seq=pair[0].seq)
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session, truncated(str(obj.session), 28))

    @admin.display(description="conversation")
    def conversation_link(self, obj):
        return format_html(
            '{} · <a href="{}">chat</a>',
            change_link(obj.conversation),
            chat_url(obj.conversation_id, at_seq=obj.user_message.seq),
        )

    @admin.display(description="messages")
    def messages_links(self, obj):
        return format_html(
            "question {} · answer {}",
            change_link(obj.user_message, f"#{obj.user_message.seq}"),
            change_link(obj.assistant_message, f"#{obj.assistant_message.seq}"),
        )

    @admin.display(description="status", ordering="status")
    def status_display(self, obj):
        return turn_status_badge(obj.status)

    @admin.display(description="model")
    def model_display(self, obj):
        return obj.assistant_message.model or EMPTY

    @admin.display(description="tokens")
    def tokens(self, obj):
        return number(obj.assistant_message.total_tokens)

    @admin.display(description="latency")
    def latency_display(self, obj):
        return latency(obj.assistant_message.elapsed_ms)

    @admin.display(description="finish")
    def finish_display(self, obj):
        return finish_reason_badge(obj.assistant_message.finish_reason)

    @admin.display(description="question")
    def question_preview(self, obj):
        return preview(obj.question_head, 48)  # the turn's page has the question in full
