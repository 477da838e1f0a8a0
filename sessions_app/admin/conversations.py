"""Conversations: read-only, each with its counters, and the conversation read as a chat."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html, format_html_join

from platform_kit.admin.display import EMPTY, change_link, changelist_url, counted, number, parse_uuid, truncated
from platform_kit.admin.filters import DateRangeFilter
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin, UuidSearchMixin
from sessions_app.admin.display import CounterColumns
from sessions_app.admin.filters import SessionFilter
from sessions_app.admin.transcript import chat_messages, seq_page
from sessions_app.links import chat_url, timeline_url
from sessions_app.models import Conversation, Message, Turn


@admin.register(Conversation)
class ConversationAdmin(CounterColumns, ReadOnlyAdminMixin, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "display_name",
        "session_link",
        "started_at",
        "messages_summary",
        "tokens_summary",
        "client_ids",
        "chat_column",
    )
    list_filter = (("started_at", DateRangeFilter), "tenant", SessionFilter)
    search_fields = ("=conversation_id", "=feishu_conversation_id")
    search_help_text = "An exact conversation_id, feishu_conversation_id or conversation id."
    ordering = ("-started_at",)
    sortable_by = ("started_at",)
    list_select_related = ("session",)
    list_defer = ("session__metadata",)
    fields = readonly_fields = (
        "session_link",
        "ordinal",
        "conversation_id",
        "feishu_conversation_id",
        "started_at",
        "last_message_at",
        "chat_link",
        "timeline_link",
        "turns_link",
        "messages_display",
        "requests_display",
        "message_user_display",
        "message_assistant_display",
        "message_toolresult_display",
        "message_error_display",
        "input_tokens_display",
        "output_tokens_display",
        "cache_read_tokens_display",
        "cache_creation_tokens_display",
        "total_tokens_display",
    )

    @admin.display(description="conversation", ordering="ordinal")
    def display_name(self, obj):
        return f"#{obj.ordinal}"

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session, truncated(str(obj.session), 32))

    @admin.display(description="client's ids")
    def client_ids(self, obj):
        """The ids the client gave it (its own, Feishu's), cut short; each whole on hover."""
        ids = [truncated(value, 20) for value in (obj.conversation_id, obj.feishu_conversation_id) if value]
        return format_html_join(" · ", "{}", ((value,) for value in ids)) if ids else EMPTY

    @admin.display(description="timeline")
    def timeline_link(self, obj):
        first_seq = Message.objects.filter(conversation=obj).order_by("seq").values_list("seq", flat=True).first()
        if first_seq is None:
            return EMPTY
        return format_html(
            '<a href="{}">Read it in the session\'s timeline</a>', timeline_url(obj.session_id, at_seq=first_seq)
        )

    @admin.display(description="chat")
    def chat_column(self, obj):
        return format_html('<a href="{}">read</a>', chat_url(obj.pk))

    @admin.display(description="chat")
    def chat_link(self, obj):
        return format_html(
            '<a href="{}">Read this conversation as a chat</a> ({})', chat_url(obj.pk), counted(obj.messages, "message")
        )

    @admin.display(description="turns")
    def turns_link(self, obj):
        return format_html('<a href="{}">Streamed chat turns</a>', changelist_url(Turn, conversation=obj.pk))

    # -- the conversation as a chat ------------------------------------------------------------------------
    chat_page_size = 100

    def get_urls(self):
        chat = path(
            "<path:object_id>/chat/", self.admin_site.admin_view(self.chat_view), name="sessions_app_conversation_chat"
        )
        return [chat, *super().get_urls()]

    def chat_view(self, request, object_id):
        """The conversation's messages as a chat, one page of `chat_page_size` (by seq) at a time, each answer
        with its turn's status, model, tokens, latency, finish reason, reasoning and tool calls."""
        pk = parse_uuid(unquote(object_id))
        queryset = self.get_queryset(request).select_related("session").defer("session__metadata")
        conversation = queryset.filter(pk=pk).first() if pk else None
        if conversation is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_permission(request, conversation):
            raise PermissionDenied

        paged = seq_page(Message.objects.filter(conversation=conversation), request, self.chat_page_size)
        page = chat_messages(paged.pop("page"))
        has_next = paged.pop("has_next")
        session = conversation.session
        context = {
            **self.admin_site.each_context(request),
            "title": f"Conversation #{conversation.ordinal}: {session}",
            "subtitle": None,
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "conversation": conversation,
            "session": session,
            "chat": page,
            **paged,
            "message_total": counted(conversation.messages, "message"),
            "tokens": number(conversation.total_tokens),
            "last_url": f"?before_seq={session.last_seq + 1}" if has_next else None,
            "timeline_url": timeline_url(session.pk, at_seq=paged["first_seq"]) if page else timeline_url(session.pk),
            "turns_url": changelist_url(Turn, conversation=conversation.pk),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/sessions_app/conversation/chat.html", context)
