"""The sessions admin's list filters: tool, machine, model, session, conversation, turn status; ended, deleted,
revoked."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters

from platform_kit.admin.filters import IsNullFilter, ObjectIdFilter, SmallTableValueFilter
from sessions_app.models import Conversation, Session, TurnStatus, UsageDaily, UsageHourly


class ToolFilter(SmallTableValueFilter):
    """Tools read from the sessions table (a handful of values), never from the messages."""

    title = parameter_name = field = source_field = "tool"
    source_model = Session


class MachineFilter(SmallTableValueFilter):
    """Machines read from the daily usage roll-up (a row per machine and day at most), never from the sessions."""

    title = parameter_name = field = source_field = "machine"
    source_model = UsageDaily


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
