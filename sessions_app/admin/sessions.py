"""Sessions: the list with their counters, a session's page and its message timeline.

A session's page shows its first conversations, its cost by model and its latest state versions; only its name,
app, project and metadata are edited, through the same locked update as the API. Ending goes through the service.
"""

from __future__ import annotations

import json
from decimal import Decimal

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from platform_kit.admin.display import (
    EMPTY,
    badge,
    changelist_url,
    counted,
    counter_display,
    number,
    text_column,
    truncated,
)
from platform_kit.admin.filters import DateRangeFilter
from platform_kit.admin.mixins import BigTableAdminMixin, LimitedInlineFormSet, ReadOnlyAdminMixin, UuidSearchMixin
from sessions_app.admin.display import STATUS_TONES, CounterColumns
from sessions_app.admin.filters import ActiveFilter, DeletedFilter, MachineFilter, ToolFilter
from sessions_app.admin.transcript import chat_messages, group_by_conversation, seq_page
from sessions_app.links import timeline_url
from sessions_app.models import Conversation, Message, Session, SessionModelUsage, StateVersion, Tenant
from sessions_app.pricing import PriceBook
from sessions_app.services.sessions import session_end, session_update


class ConversationInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Conversation
    fk_name = "session"
    formset = LimitedInlineFormSet
    verbose_name_plural = f"conversations (the first {LimitedInlineFormSet.limit})"
    ordering = ("ordinal",)
    fields = readonly_fields = (
        "ordinal",
        "conversation_id",
        "feishu_conversation_id",
        "messages_display",
        "last_message_at",
        "total_tokens_display",
    )
    show_change_link = True
    can_delete = False
    extra = 0

    messages_display = counter_display("messages", "messages")
    total_tokens_display = counter_display("total_tokens", "tokens")


SESSION_EDITABLE = ("name", "app", "project", "machine", "metadata")


@admin.register(Session)
class SessionAdmin(CounterColumns, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    # Who worked with which tool, when, how much, and is it still going: the counters per role, the
    # conversations and the requests are on the messages' hover, the kinds of token on the tokens'.
    list_display = (
        "display_name",
        "status",
        "tool",
        "user_column",
        "started_at",
        "messages_summary",
        "tokens_summary",
        "app_column",
        "machine_column",
        "tenant_column",
    )
    list_display_links = ("display_name",)
    list_filter = ("tenant", ToolFilter, MachineFilter, ActiveFilter, ("started_at", DateRangeFilter), DeletedFilter)
    search_fields = ("name", "=user_id", "=agent_session_id")
    search_help_text = "Part of the name, or an exact user_id, agent_session_id or session id."
    list_select_related = ("tenant",)
    list_defer = ("metadata",)
    ordering = ("-started_at",)
    actions = ["end_sessions"]
    inlines = [ConversationInline]
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "tenant",
                    "name",
                    ("tool", "app", "project", "machine"),
                    ("user_id", "agent_session_id"),
                    "metadata",
                    "timeline_link",
                )
            },
        ),
        (
            "Lifetime",
            {"fields": (("started_at", "ended_at", "deleted_at"), ("last_message_at", "last_seq"), "status")},
        ),
        (
            "Counters",
            {
                "description": "Kept exact by the message service as messages arrive; never recounted here.",
                "fields": (
                    ("requests_display", "conversations_display", "messages_display"),
                    (
                        "message_user_display",
                        "message_assistant_display",
                        "message_toolresult_display",
                        "message_error_display",
                        "message_system_display",
                    ),
                    ("input_tokens_display", "output_tokens_display", "total_tokens_display"),
                    ("cache_read_tokens_display", "cache_creation_tokens_display"),
                    "cost_display",
                    "current_conversation",
                    "conversations_link",
                ),
            },
        ),
        ("State", {"fields": ("state_version", "state_history")}),
    )
    timeline_page_size = 200
    # Long values cut short, the whole on hover: every column stays on a 1400-pixel screen.
    user_column = text_column("user_id", 14, "user ID")
    app_column = text_column("app", 8)
    machine_column = text_column("machine", 10)
    tenant_column = text_column("tenant", 10, ordering="tenant__name")

    def get_readonly_fields(self, request, obj=None):
        editable = () if obj is not None and obj.deleted_at else SESSION_EDITABLE
        if obj is not None and obj.messages:
            # Its usage is counted under its project and machine (services.sessions.FIXED_ONCE_USED).
            editable = tuple(field for field in editable if field not in ("project", "machine"))
        fields = flatten_fieldsets(self.fieldsets)
        return [field for field in fields if field not in editable]

    @admin.display(description="cost")
    def cost_display(self, obj):
        """The session's usage by model, each day's priced at the prices in force that day."""
        if obj.pk is None:
            return EMPTY
        rows = SessionModelUsage.objects.filter(session=obj).order_by("model", "day")
        if not rows:
            return EMPTY
        book = PriceBook.load()
        by_model: dict[str, list] = {}
        for row in rows:
            price = book.price_for(row.model, row.day)
            entry = by_model.setdefault(row.model, [0, 0, Decimal(0), True])
            entry[0] += row.requests
            entry[1] += row.total_tokens
            if price is None:
                entry[3] = False
            else:
                entry[2] += price.cost(row.__dict__)
        total = sum((entry[2] for entry in by_model.values()), Decimal(0))
        lines = [
            (
                model or "(no model)",
                number(requests),
                number(tokens),
                f"{cost:,.4f}" if priced else "no price",
            )
            for model, (requests, tokens, cost, priced) in sorted(by_model.items(), key=lambda item: -item[1][1])
        ]
        table = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", lines)
        return format_html(
            "<strong>USD {}</strong> at the prices of the days it was used"
            "<table><thead><tr><th>model</th><th>requests</th><th>tokens</th><th>USD</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            f"{total:,.4f}",
            table,
        )

    def has_add_permission(self, request):
        return False  # sessions are opened by their clients, through the API

    def has_delete_permission(self, request, obj=None):
        return False  # deleting would drop the messages; the API's DELETE hides a session and keeps them

    @admin.display(description="name", ordering="name")
    def display_name(self, obj):
        return truncated(obj.name, 28) if obj.name else format_html("<em>{}</em>", str(obj))

    @admin.display(description="status", ordering="ended_at")
    def status(self, obj):
        if obj.deleted_at:
            return badge("deleted", STATUS_TONES["deleted"])
        return badge("active", STATUS_TONES["active"]) if obj.is_active else badge("ended", STATUS_TONES["ended"])

    @admin.display(description="messages")
    def timeline_link(self, obj):
        if obj.pk is None:
            return EMPTY
        return format_html(
            '<a href="{}">Read the message timeline</a> ({}) · <a href="{}">message list</a>',
            timeline_url(obj.pk),
            counted(obj.messages, "message"),
            changelist_url(Message, session=obj.pk),
        )

    @admin.display(description="all conversations")
    def conversations_link(self, obj):
        return format_html(
            '<a href="{}">{}</a>',
            changelist_url(Conversation, session=obj.pk),
            counted(obj.conversations, "conversation"),
        )

    @admin.display(description="history (latest 20 versions)")
    def state_history(self, obj):
        versions = list(StateVersion.objects.filter(session=obj).order_by("-version")[:20])
        if not versions:
            return EMPTY
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">v{}</a></td><td>{}</td><td>{}</td><td><pre class="ace-pre">{}</pre></td></tr>',
            (
                (
                    reverse("admin:sessions_app_stateversion_change", args=[v.pk]),
                    v.version,
                    v.change,
                    v.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                    Truncator(json.dumps(v.data, indent=2, ensure_ascii=False)).chars(2000),
                )
                for v in versions
            ),
        )
        return format_html(
            "<table><thead><tr><th>version</th><th>change</th><th>at</th><th>data</th></tr></thead>"
            '<tbody>{}</tbody></table><p><a href="{}">All versions</a></p>',
            rows,
            changelist_url(StateVersion, session=obj.pk),
        )

    def save_model(self, request, obj, form, change):
        # Through the service: it locks the row, so the counters written concurrently by the message service
        # are never overwritten by the values this form was loaded with.
        changed = {field: form.cleaned_data[field] for field in form.changed_data if field in SESSION_EDITABLE}
        if changed:
            session_update(tenant=obj.tenant, session_id=obj.pk, **changed)

    @admin.action(description="End selected sessions", permissions=["change"])
    def end_sessions(self, request, queryset):
        open_sessions = list(
            queryset.filter(ended_at__isnull=True, deleted_at__isnull=True).values_list("pk", "tenant_id")
        )
        tenants = Tenant.objects.in_bulk({tenant_id for _, tenant_id in open_sessions})
        ended = 0
        for session_id, tenant_id in open_sessions:
            try:
                session_end(tenant=tenants[tenant_id], session_id=session_id)
            except Session.DoesNotExist:  # deleted through the API meanwhile
                continue
            ended += 1
        self.message_user(request, f"Ended {counted(ended, 'session')}.", messages.SUCCESS)

    # -- the message timeline ------------------------------------------------------------------------------
    def get_urls(self):
        timeline = path(
            "<path:object_id>/timeline/",
            self.admin_site.admin_view(self.timeline_view),
            name="sessions_app_session_timeline",
        )
        return [timeline, *super().get_urls()]

    def timeline_view(self, request, object_id):
        """The session's messages as a transcript, in seq order, one page of `timeline_page_size` at a time."""
        session = self.get_object(request, unquote(object_id))
        if session is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_permission(request, session):
            raise PermissionDenied

        paged = seq_page(Message.objects.filter(session=session), request, self.timeline_page_size)
        page = chat_messages(paged.pop("page"))
        has_next = paged.pop("has_next")
        context = {
            **self.admin_site.each_context(request),
            "title": f"Timeline: {session}",
            "subtitle": None,
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "session": session,
            "groups": group_by_conversation(page),
            **paged,
            "message_total": counted(session.messages, "message"),
            "last_url": f"?before_seq={session.last_seq + 1}" if has_next else None,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/sessions_app/session/timeline.html", context)
