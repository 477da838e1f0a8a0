import django_filters
from django_filters import rest_framework as filters

from platform_kit.api.fields import BoundedIsoDateTimeFilter
from sessions_app.models import Conversation, Message, Role, Session
from sessions_app.search import keyword_filter


class SessionFilter(filters.FilterSet):
    search = filters.CharFilter(field_name="name", lookup_expr="icontains", help_text="Part of the session's name")
    tool = filters.CharFilter()
    user_id = filters.CharFilter()
    app = filters.CharFilter()
    project = filters.CharFilter()
    machine = filters.CharFilter()
    agent_session_id = filters.CharFilter()
    active = filters.BooleanFilter(field_name="ended_at", lookup_expr="isnull", help_text="true: not ended")
    started_after = BoundedIsoDateTimeFilter(field_name="started_at", lookup_expr="gte")
    started_before = BoundedIsoDateTimeFilter(field_name="started_at", lookup_expr="lt")

    class Meta:
        model = Session
        fields = []


class RoleInFilter(django_filters.BaseInFilter, django_filters.ChoiceFilter):
    pass


class BaseMessageFilter(filters.FilterSet):
    role = RoleInFilter(choices=Role.choices, help_text="One role, or several separated by commas")
    q = filters.CharFilter(method="filter_q", help_text='Keywords (English words, Chinese text, "phrases")')
    since = BoundedIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = BoundedIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    model = filters.CharFilter()
    tool_name = filters.CharFilter()
    request_id = filters.CharFilter()

    class Meta:
        model = Message
        fields = []

    def filter_q(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return keyword_filter(queryset, value)


class SessionMessageFilter(BaseMessageFilter):
    conversation = filters.UUIDFilter(field_name="conversation_id")
    after_seq = filters.NumberFilter(field_name="seq", lookup_expr="gt")


class MessageFilter(BaseMessageFilter):
    session = filters.UUIDFilter(field_name="session_id")
    conversation = filters.UUIDFilter(field_name="conversation_id")
    user_id = filters.CharFilter(field_name="session__user_id")
    tool = filters.CharFilter(field_name="session__tool")


class ConversationFilter(filters.FilterSet):
    session = filters.UUIDFilter(field_name="session_id")
    conversation_id = filters.CharFilter()
    feishu_conversation_id = filters.CharFilter()

    class Meta:
        model = Conversation
        fields = []
