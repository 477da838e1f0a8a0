"""The Django admin for sessions_app: the auditors' daily tool.

Messages, requests and conversations are facts recorded by the API, so their admins are read-only. The
big tables (messages above all) never count or sort their rows in full: `EstimatedCountPaginator` instead
of `COUNT(*)`, ordering by an indexed column, list filters whose choices come from small tables, and
changelist querysets that load only the columns the list shows. Writes go through the services, so the
admin follows the same rules as the API (ending a session, revoking or creating an API key).
"""

from __future__ import annotations

import json
import re

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, TextField, URLField
from django.db.models.functions import Cast, Substr
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.cache import add_never_cache_headers
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.text import Truncator

from platform_kit.admin.display import (
    EMPTY,
    badge,
    change_link,
    changelist_url,
    counter_display,
    number,
    parse_uuid,
    pre,
    pretty_json,
)
from platform_kit.admin.filters import DateRangeFilter, IsNullFilter, ObjectIdFilter, SmallTableValueFilter
from platform_kit.admin.mixins import BigTableAdminMixin, LimitedInlineFormSet, ReadOnlyAdminMixin, UuidSearchMixin
from sessions_app.admin_dashboard import dashboard_view
from sessions_app.links import chat_url, timeline_url
from sessions_app.models import (
    ApiKey,
    Conversation,
    LlmRequest,
    Message,
    ModelPrice,
    Role,
    Session,
    SessionModelUsage,
    StateVersion,
    Tenant,
    Turn,
    TurnStatus,
    UsageDaily,
    UsageHourly,
)
from sessions_app.pricing import PriceBook
from sessions_app.search import keyword_filter
from sessions_app.services.apikeys import KEY_PREFIX, apikey_create, apikeys_revoke
from sessions_app.services.sessions import session_end, session_update

# --------------------------------------------------------------------------------------------------------
# Display helpers
# --------------------------------------------------------------------------------------------------------

ROLE_COLOURS = {
    Role.USER: "#2563eb",
    Role.ASSISTANT: "#15803d",
    Role.TOOL_RESULT: "#7c3aed",
    Role.ERROR: "#dc2626",
    Role.SYSTEM: "#4b5563",
}
STATUS_COLOURS = {"active": "#15803d", "ended": "#4b5563", "deleted": "#dc2626", "revoked": "#dc2626"}


def role_badge(role: str):
    return badge(role, ROLE_COLOURS.get(role, "#4b5563"))


def token_summary(obj) -> str:
    parts = [
        (label, getattr(obj, field))
        for label, field in (
            ("in", "input_tokens"),
            ("out", "output_tokens"),
            ("cache read", "cache_read_tokens"),
            ("cache write", "cache_creation_tokens"),
            ("total", "total_tokens"),
        )
    ]
    return " · ".join(f"{label} {number(value)}" for label, value in parts if value) or EMPTY


def seq_param(request, name) -> int | None:
    value = request.GET.get(name)
    if value in (None, ""):
        return None
    try:
        return max(int(value), 0)
    except ValueError:
        return None


def seq_page(rows, request, size: int) -> dict:
    """One page of `rows` (messages of one session or conversation) by seq: `?after_seq=` or `?before_seq=`.

    Keyset paging on an indexed (…, seq): never an OFFSET, never a count of the messages.
    """
    before_seq = seq_param(request, "before_seq")
    after_seq = seq_param(request, "after_seq") or 0
    if before_seq is not None:
        page = list(rows.filter(seq__lt=before_seq).order_by("-seq")[:size])[::-1]
    else:
        page = list(rows.filter(seq__gt=after_seq).order_by("seq")[:size])
    first_seq = page[0].seq if page else None
    last_seq = page[-1].seq if page else None
    has_previous = first_seq is not None and rows.filter(seq__lt=first_seq).exists()
    has_next = last_seq is not None and rows.filter(seq__gt=last_seq).exists()
    return {
        "page": page,
        "page_size": size,
        "first_seq": first_seq,
        "last_seq": last_seq,
        "previous_url": f"?before_seq={first_seq}" if has_previous else None,
        "next_url": f"?after_seq={last_seq}" if has_next else None,
        "first_url": "?" if has_previous or (not page and request.GET) else None,
        "has_next": has_next,
    }


# --------------------------------------------------------------------------------------------------------
# Chat rendering: messages as a readable transcript (../shared/seeds/003 for the turn fields)
# --------------------------------------------------------------------------------------------------------

TURN_STATUS_COLOURS = {
    TurnStatus.STREAMING: "#d97706",
    TurnStatus.COMPLETED: "#15803d",
    TurnStatus.FAILED: "#dc2626",
    TurnStatus.ABANDONED: "#6b7280",
}
TURN_STATUS_LABELS = {
    TurnStatus.STREAMING: "streaming…",
    TurnStatus.COMPLETED: "completed",
    TurnStatus.FAILED: "failed",
    TurnStatus.ABANDONED: "abandoned",
}
# A turn's messages: its question, and its answer (an error once the turn failed or was abandoned).
TURN_ROLES = (Role.USER, Role.ASSISTANT, Role.ERROR)
TURN_FIELDS = ("id", "status", "user_message_id", "assistant_message_id", "started_at", "completed_at")


def turn_status_badge(status: str):
    return badge(TURN_STATUS_LABELS.get(status, status), TURN_STATUS_COLOURS.get(status, "#4b5563"))


def finish_reason_badge(reason: str):
    if not reason:
        return EMPTY
    return badge(reason, ROLE_COLOURS[Role.ERROR] if reason == "error" else "#4b5563")


def latency(ms) -> str:
    return EMPTY if ms is None else f"{number(ms)} ms"


def turns_by_message(messages) -> dict:
    """The turns of a page of messages, in one query, by the id of their question and of their answer."""
    ids = [m.pk for m in messages if m.role in TURN_ROLES]
    if not ids:
        return {}
    turns = Turn.objects.filter(Q(user_message_id__in=ids) | Q(assistant_message_id__in=ids)).only(*TURN_FIELDS)
    found = {}
    for turn in turns:
        found[turn.user_message_id] = found[turn.assistant_message_id] = turn
    return found


def from_json_text(value):
    """Tool arguments and results arrive as objects or as JSON strings: a string that parses is its value."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def pretty_text(value) -> str:
    value = from_json_text(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def tool_call_blocks(tool_calls) -> list[dict]:
    """[{id, name, arguments, result}] (seed 003's ToolCallDto) as display blocks; OpenAI's nested `function`
    and Anthropic's `input` are read too. Anything else is left to the raw JSON."""
    if not isinstance(tool_calls, list):
        return []
    blocks = []
    for call in tool_calls:
        if not isinstance(call, dict):
            return []
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        if "arguments" in call:
            arguments = call["arguments"]
        else:
            arguments = function.get("arguments", call.get("input"))
        has_result = "result" in call or "output" in call
        blocks.append(
            {
                "id": call.get("id") or "",
                "name": call.get("name") or function.get("name") or "",
                "arguments": pretty_text(arguments),
                "result": pretty_text(call.get("result", call.get("output"))) if has_result else "",
                "has_result": has_result,
            }
        )
    return blocks


def names(value) -> list[str]:
    """Skill and tool names: a JSON list, or (as some clients send them) one comma-separated string."""
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    if isinstance(value, list):
        return [str(name) if not isinstance(name, dict) else str(name.get("name", name)) for name in value]
    return []


def code_list(values):
    return format_html_join(" ", "<code>{}</code>", ((value,) for value in values)) if values else EMPTY


def chat_message(message: Message, turn: Turn | None = None) -> Message:
    """Decorate a message for chat_message.html. On a user message `thinking` is the system prompt snapshot
    and `tool_names` the tools offered; on an answer they are its reasoning and the tools it called."""
    m = message
    m.is_question = m.role == Role.USER
    m.thinking_label = "system prompt snapshot" if m.is_question else "thinking"
    m.turn = turn
    m.turn_state = turn.status if turn is not None else ""
    if turn is not None:
        m.turn_url = reverse("admin:sessions_app_turn_change", args=[turn.pk])
        m.turn_badge = turn_status_badge(turn.status)
        m.turn_side = "question" if turn.user_message_id == m.pk else "answer"
    facts = []
    if m.is_question:
        if m.thinking_mode:
            facts.append(("thinking mode", m.thinking_mode))
        if m.skill_names:
            facts.append(("skills", code_list(names(m.skill_names))))
        if m.tool_names:
            facts.append(("tools offered", code_list(names(m.tool_names))))
        if m.attachments not in (None, [], {}):
            plain = isinstance(m.attachments, list) and all(isinstance(a, str | int) for a in m.attachments)
            facts.append(("attachments", code_list(m.attachments) if plain else pretty_json(m.attachments)))
    else:
        if m.model:
            facts.append(("model", m.model))
        if m.max_tokens is not None:
            facts.append(("max_tokens", number(m.max_tokens)))
        if m.temperature is not None:
            facts.append(("temperature", f"{m.temperature:g}"))
        if m.total_tokens or m.input_tokens or m.output_tokens:
            facts.append(("tokens", token_summary(m)))
        if m.elapsed_ms is not None:
            facts.append(("latency", latency(m.elapsed_ms)))
        if m.finish_reason:
            facts.append(("finish", finish_reason_badge(m.finish_reason)))
        if m.api_calls is not None:
            facts.append(("API calls", number(m.api_calls)))
        if m.tool_names:
            facts.append(("tools called", code_list(names(m.tool_names))))
        if isinstance(m.metadata, dict) and m.metadata.get("error"):
            facts.append(("error", str(m.metadata["error"])))
    m.facts = facts
    m.tool_call_blocks = tool_call_blocks(m.tool_calls)
    m.tool_calls_json = json.dumps(m.tool_calls, indent=2, ensure_ascii=False) if m.tool_calls is not None else ""
    m.metadata_json = json.dumps(m.metadata, indent=2, ensure_ascii=False) if m.metadata else ""
    m.tokens = token_summary(m) if m.total_tokens or m.input_tokens else ""
    return m


def chat_messages(messages, turns: dict | None = None) -> list[Message]:
    """A page of messages for the chat templates; their turns are read in one query unless given."""
    turns = turns_by_message(messages) if turns is None else turns
    return [chat_message(m, turns.get(m.pk)) for m in messages]


def group_by_conversation(messages) -> list[dict]:
    conversations = Conversation.objects.in_bulk({m.conversation_id for m in messages if m.conversation_id})
    groups = []
    for message in messages:
        if not groups or groups[-1]["conversation_pk"] != message.conversation_id:
            groups.append(
                {
                    "conversation_pk": message.conversation_id,
                    "conversation": conversations.get(message.conversation_id),
                    "messages": [],
                }
            )
        groups[-1]["messages"].append(message)
    for group in groups:
        conversation = group["conversation"]
        if conversation is not None:
            group["url"] = reverse("admin:sessions_app_conversation_change", args=[conversation.pk])
            group["chat_url"] = chat_url(conversation.pk)
            group["tokens"] = number(conversation.total_tokens)
            group["message_count"] = number(conversation.messages)
    return groups


# --------------------------------------------------------------------------------------------------------
# List filters
# --------------------------------------------------------------------------------------------------------


class ToolFilter(SmallTableValueFilter):
    """Tools read from the sessions table (a handful of values), never from the messages."""

    title = parameter_name = field = source_field = "tool"
    source_model = Session


class SessionToolFilter(ToolFilter):
    field = "session__tool"


class ModelFilter(SmallTableValueFilter):
    """Models read from the hourly usage roll-up, which is small, never from the messages."""

    title = parameter_name = field = source_field = "model"
    source_model = UsageHourly


class SessionFilter(ObjectIdFilter):
    title = parameter_name = "session"
    model = Session
    only_fields = ("id", "name", "tool")


class ConversationFilter(ObjectIdFilter):
    title = parameter_name = "conversation"
    model = Conversation
    only_fields = ("id", "ordinal")


class TurnStatusFilter(admin.SimpleListFilter):
    """A turn's state in an auditor's words: "unfinished" is a stream still open (or never closed yet)."""

    title = "status"
    parameter_name = "status"
    choices_by_value = {
        "unfinished": (TurnStatus.STREAMING, "unfinished (streaming)"),
        "failed": (TurnStatus.FAILED, "failed"),
        "abandoned": (TurnStatus.ABANDONED, "abandoned"),
        "completed": (TurnStatus.COMPLETED, "completed"),
    }

    def lookups(self, request, model_admin):
        return [(value, label) for value, (_, label) in self.choices_by_value.items()]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        if self.value() not in self.choices_by_value:
            raise IncorrectLookupParameters(f"Not a turn status: {self.value()!r}")
        return queryset.filter(status=self.choices_by_value[self.value()][0])


class ActiveFilter(IsNullFilter):
    title = "status"
    parameter_name = "active"
    field = "ended_at"
    unset_choice, set_choice = ("yes", "active"), ("no", "ended")


class DeletedFilter(IsNullFilter):
    title = "deleted through the API"
    parameter_name = "deleted"
    field = "deleted_at"
    unset_choice, set_choice = ("no", "not deleted"), ("yes", "deleted")


class ApiKeyStatusFilter(IsNullFilter):
    title = "status"
    parameter_name = "status"
    field = "revoked_at"
    unset_choice, set_choice = ("active", "active"), ("revoked", "revoked")


# --------------------------------------------------------------------------------------------------------
# Sessions
# --------------------------------------------------------------------------------------------------------


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


SESSION_COUNTERS = (
    ("requests", "requests"),
    ("conversations", "conversations"),
    ("messages", "messages"),
    ("message_user", "user"),
    ("message_assistant", "assistant"),
    ("message_toolresult", "tool results"),
    ("message_error", "errors"),
    ("message_system", "system"),
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
    ("cache_read_tokens", "cache read tokens"),
    ("cache_creation_tokens", "cache write tokens"),
    ("total_tokens", "tokens"),
)
SESSION_EDITABLE = ("name", "app", "project", "metadata")
# `<counter>_display` columns for every counter, shared by the session, conversation and usage admins.
CounterColumns = type(
    "CounterColumns", (), {f"{field}_display": counter_display(field, label) for field, label in SESSION_COUNTERS}
)


@admin.register(Session)
class SessionAdmin(CounterColumns, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "display_name",
        "tool",
        "user_id",
        "app",
        "tenant",
        "started_at",
        "status",
        "requests_display",
        "conversations_display",
        "messages_display",
        "message_user_display",
        "message_assistant_display",
        "message_toolresult_display",
        "message_error_display",
        "total_tokens_display",
    )
    list_display_links = ("display_name",)
    list_filter = ("tenant", ToolFilter, ActiveFilter, ("started_at", DateRangeFilter), DeletedFilter)
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
                    ("tool", "app", "project"),
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

    def get_readonly_fields(self, request, obj=None):
        editable = () if obj is not None and obj.deleted_at else SESSION_EDITABLE
        if obj is not None and obj.messages:
            # Its usage is counted under its project (services.sessions.FIXED_ONCE_USED).
            editable = tuple(field for field in editable if field != "project")
        fields = flatten_fieldsets(self.fieldsets)
        return [field for field in fields if field not in editable]

    @admin.display(description="cost")
    def cost_display(self, obj):
        """The session's usage by model, priced with today's model prices."""
        if obj.pk is None:
            return EMPTY
        rows = list(SessionModelUsage.objects.filter(session=obj).order_by("-total_tokens"))
        if not rows:
            return EMPTY
        book = PriceBook.load()
        lines = []
        total = 0
        for row in rows:
            price = book.price_for(row.model)
            cost = price.cost(row.__dict__) if price else None
            total += cost or 0
            lines.append(
                (
                    row.model or "(no model)",
                    number(row.requests),
                    number(row.total_tokens),
                    f"{cost:,.4f}" if cost is not None else "no price",
                )
            )
        table = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", lines)
        return format_html(
            "<strong>USD {}</strong> at today's prices"
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
        return obj.name or format_html("<em>{}</em>", str(obj))

    @admin.display(description="status", ordering="ended_at")
    def status(self, obj):
        if obj.deleted_at:
            return badge("deleted", STATUS_COLOURS["deleted"])
        return badge("active", STATUS_COLOURS["active"]) if obj.is_active else badge("ended", STATUS_COLOURS["ended"])

    @admin.display(description="messages")
    def timeline_link(self, obj):
        if obj.pk is None:
            return EMPTY
        return format_html(
            '<a href="{}">Read the message timeline</a> ({} messages) · <a href="{}">message list</a>',
            timeline_url(obj.pk),
            number(obj.messages),
            changelist_url(Message, session=obj.pk),
        )

    @admin.display(description="all conversations")
    def conversations_link(self, obj):
        return format_html(
            '<a href="{}">{} conversations</a>', changelist_url(Conversation, session=obj.pk), number(obj.conversations)
        )

    @admin.display(description="history (latest 20 versions)")
    def state_history(self, obj):
        versions = list(StateVersion.objects.filter(session=obj).order_by("-version")[:20])
        if not versions:
            return EMPTY
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">v{}</a></td><td>{}</td><td>{}</td>'
            '<td><pre style="white-space:pre-wrap;margin:0">{}</pre></td></tr>',
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
        self.message_user(request, f"Ended {ended} session(s).", messages.SUCCESS)

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
            "message_total": number(session.messages),
            "last_url": f"?before_seq={session.last_seq + 1}" if has_next else None,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/sessions_app/session/timeline.html", context)


# --------------------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------------------

# Looks like an id a client sent (external_id, request_id): worth an exact match besides full-text.
IDENTIFIER = re.compile(r"(?=.*[0-9_.:/-])[A-Za-z0-9_.:/-]{4,255}")
PREVIEW_CHARS = 140


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, admin.ModelAdmin):
    list_display = ("created_at", "session_link", "seq", "role_display", "content_preview", "model", "tokens")
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
        return change_link(obj.session, Truncator(str(obj.session)).chars(40))

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
        text = obj.content_head or obj.tool_calls_head or ""
        text = " ".join(text.split())
        if len(text) > PREVIEW_CHARS:
            text = text[:PREVIEW_CHARS] + "…"
        if obj.tool_name:
            return format_html("<code>{}</code> {}", obj.tool_name, text)
        return text or EMPTY

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, obj):
        return number(obj.total_tokens) if obj.total_tokens is not None else EMPTY

    @admin.display(description="content")
    def content_display(self, obj):
        return pre(obj.content)

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


# --------------------------------------------------------------------------------------------------------
# Conversations, LLM requests, state versions
# --------------------------------------------------------------------------------------------------------


@admin.register(Conversation)
class ConversationAdmin(CounterColumns, ReadOnlyAdminMixin, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "display_name",
        "session_link",
        "conversation_id",
        "feishu_conversation_id",
        "messages_display",
        "requests_display",
        "total_tokens_display",
        "started_at",
        "last_message_at",
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
        return change_link(obj.session, Truncator(str(obj.session)).chars(40))

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
            '<a href="{}">Read this conversation as a chat</a> ({} messages)', chat_url(obj.pk), number(obj.messages)
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
            "message_total": number(conversation.messages),
            "tokens": number(conversation.total_tokens),
            "last_url": f"?before_seq={session.last_seq + 1}" if has_next else None,
            "timeline_url": timeline_url(session.pk, at_seq=paged["first_seq"]) if page else timeline_url(session.pk),
            "turns_url": changelist_url(Turn, conversation=conversation.pk),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/sessions_app/conversation/chat.html", context)


# --------------------------------------------------------------------------------------------------------
# Streamed chat turns
# --------------------------------------------------------------------------------------------------------

# The long columns of a turn's two messages: never read for the list.
MESSAGE_HEAVY_FIELDS = ("content", "thinking", "tool_calls", "metadata", "attachments", "search_vector")


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "started_at",
        "session_link",
        "conversation_link",
        "status_display",
        "model_display",
        "tokens",
        "latency_display",
        "finish_display",
        "question_preview",
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
        return change_link(obj.session, Truncator(str(obj.session)).chars(40))

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
        text = " ".join((obj.question_head or "").split())
        if len(text) > PREVIEW_CHARS:
            text = text[:PREVIEW_CHARS] + "…"
        return text or EMPTY


@admin.register(LlmRequest)
class LlmRequestAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "display_name",
        "session_link",
        "auth_type",
        "model",
        "input_tokens_display",
        "output_tokens_display",
        "cache_read_tokens_display",
        "total_tokens_display",
        "created_at",
    )
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
        "cost_display",
        "messages_list",
    )
    readonly_fields = flatten_fieldsets([(None, {"fields": fields})])

    @admin.display(description="cost")
    def cost_display(self, obj):
        price = PriceBook.load().price_for(obj.model)
        if price is None:
            return format_html("no price for <code>{}</code>", obj.model or "(no model)")
        return format_html("USD {} (price {})", f"{price.cost(obj.__dict__):,.6f}", price.pattern)

    input_tokens_display = counter_display("input_tokens", "input tokens")
    output_tokens_display = counter_display("output_tokens", "output tokens")
    total_tokens_display = counter_display("total_tokens", "total tokens")
    cache_read_tokens_display = counter_display("cache_read_tokens", "cache read tokens")
    cache_creation_tokens_display = counter_display("cache_creation_tokens", "cache write tokens")

    @admin.display(description="request")
    def display_name(self, obj):
        return obj.request_id or format_html("<em>{}</em>", "no request_id")

    @admin.display(description="session")
    def session_link(self, obj):
        return change_link(obj.session, Truncator(str(obj.session)).chars(40))

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


# --------------------------------------------------------------------------------------------------------
# Usage roll-ups
# --------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------
# Tenants and API keys
# --------------------------------------------------------------------------------------------------------


# The admin index links to the usage dashboard.
admin.site.index_template = "admin/sessions_app/index.html"


def key_display(api_key: ApiKey) -> str:
    return f"{KEY_PREFIX}{api_key.prefix}_…"


def key_status(api_key: ApiKey):
    if api_key.revoked_at:
        return badge("revoked", STATUS_COLOURS["revoked"])
    return badge("active", STATUS_COLOURS["active"])


class ApiKeyInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ApiKey
    fields = readonly_fields = ("key", "name", "created_at", "last_used_at", "revoked_at", "status")
    show_change_link = True
    can_delete = False
    extra = 0

    @admin.display(description="key")
    def key(self, obj):
        return key_display(obj)

    @admin.display(description="status")
    def status(self, obj):
        return key_status(obj)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at", "active_keys", "all_keys")
    search_fields = ("name",)
    fields = ("name", "created_at", "add_key_link")
    readonly_fields = ("created_at", "add_key_link")
    inlines = [ApiKeyInline]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                key_count=Count("api_keys"),
                active_key_count=Count("api_keys", filter=Q(api_keys__revoked_at__isnull=True)),
            )
        )

    def has_delete_permission(self, request, obj=None):
        return False  # a tenant's sessions and keys are kept for audit

    @admin.display(description="active keys", ordering="active_key_count")
    def active_keys(self, obj):
        return number(obj.active_key_count)

    @admin.display(description="all keys", ordering="key_count")
    def all_keys(self, obj):
        return number(obj.key_count)

    @admin.display(description="API keys")
    def add_key_link(self, obj):
        if obj.pk is None:
            return EMPTY
        url = reverse("admin:sessions_app_apikey_add") + "?" + urlencode({"tenant": obj.pk})
        return format_html('<a href="{}">Create an API key for this tenant</a>', url)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("key", "name", "tenant", "status", "created_at", "last_used_at", "revoked_at")
    list_display_links = ("key", "name")
    list_filter = (ApiKeyStatusFilter, "tenant")
    search_fields = ("name", "=prefix", "tenant__name")
    search_help_text = "Part of the name or the tenant's name, or the key's prefix (the hex after ace_)."
    list_select_related = ("tenant",)
    actions = ["revoke_keys"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("tenant", "name")
        return ("key", "tenant", "name", "status", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("key", "tenant", "status", "created_at", "last_used_at", "revoked_at")

    def has_delete_permission(self, request, obj=None):
        return False  # revoke instead: the key's row says who had access and when

    @admin.display(description="key")
    def key(self, obj):
        return key_display(obj)

    @admin.display(description="status", ordering="revoked_at")
    def status(self, obj):
        return key_status(obj)

    def save_model(self, request, obj, form, change):
        if change:
            obj.save(update_fields=[f for f in form.changed_data if f == "name"])
            return
        created = apikey_create(tenant_name=form.cleaned_data["tenant"].name, name=form.cleaned_data.get("name", ""))
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(created.api_key, field.attname))
        obj._state.adding = False
        obj._state.db = created.api_key._state.db
        obj._plain_key = created.plain_key  # shown once by response_add, never stored

    def response_add(self, request, obj, post_url_continue=None):
        plain_key = getattr(obj, "_plain_key", None)
        if plain_key is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "API key created",
            "subtitle": None,
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "api_key": obj,
            "plain_key": plain_key,
        }
        request.current_app = self.admin_site.name
        response = TemplateResponse(request, "admin/sessions_app/apikey/created.html", context)
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_keys(self, request, queryset):
        selected = queryset.count()
        revoked = apikeys_revoke(keys=queryset)
        message = f"Revoked {revoked} key(s)."
        if revoked < selected:
            message += f" {selected - revoked} were already revoked."
        self.message_user(request, message, messages.SUCCESS)


from sessions_app import admin_imports  # noqa: E402, F401  (import sources and imported files)
