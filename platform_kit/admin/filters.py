"""List filters any app's admin can subclass: a date range, choices from a small table, an object's id, set or
not set."""

from __future__ import annotations

import datetime

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import build_q_object_from_lookup_parameters
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from platform_kit.admin.display import parse_uuid


class DateRangeFilter(admin.DateFieldListFilter):
    """Django's date links (today, past 7 days, …) plus a from/to form; "to" includes the whole day."""

    template = "admin/platform_kit/date_range_filter.html"

    def __init__(self, field, request, params, model, model_admin, field_path):
        self.lookup_kwarg_from = f"{field_path}__from"
        self.lookup_kwarg_to = f"{field_path}__to"
        super().__init__(field, request, params, model, model_admin, field_path)
        self.value_from = self._value(self.lookup_kwarg_from)
        self.value_to = self._value(self.lookup_kwarg_to)
        # A blank from/to (the form sent empty) must not unselect "Any date".
        self.date_params = {k: v for k, v in self.date_params.items() if v or not k.endswith(("__from", "__to"))}
        self.hidden_params = []

    def _value(self, name) -> str:
        value = self.used_parameters.get(name)
        if isinstance(value, list):
            value = value[-1] if value else ""
        return (value or "").strip()

    def expected_parameters(self):
        return [*super().expected_parameters(), self.lookup_kwarg_from, self.lookup_kwarg_to]

    def _day_start(self, value: str) -> datetime.datetime:
        try:
            day = datetime.date.fromisoformat(value)
        except ValueError as error:
            raise IncorrectLookupParameters(error) from error
        return timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))

    def queryset(self, request, queryset):
        lookups = {
            k: v for k, v in self.used_parameters.items() if k not in (self.lookup_kwarg_from, self.lookup_kwarg_to)
        }
        try:
            condition = build_q_object_from_lookup_parameters(lookups)
        except (ValueError, ValidationError) as error:
            raise IncorrectLookupParameters(error) from error
        if self.value_from:
            condition &= Q(**{f"{self.field_path}__gte": self._day_start(self.value_from)})
        if self.value_to:
            end = self._day_start(self.value_to) + datetime.timedelta(days=1)
            condition &= Q(**{f"{self.field_path}__lt": end})
        try:
            return queryset.filter(condition)
        except (ValueError, ValidationError) as error:
            raise IncorrectLookupParameters(error) from error

    def choices(self, changelist):
        # The from/to form keeps every other filter, the search and the ordering of the page it is on.
        self.hidden_params = [(k, v) for k, v in changelist.params.items() if not k.startswith(self.field_generic)]
        yield from super().choices(changelist)


class SmallTableValueFilter(admin.SimpleListFilter):
    """Choices are the distinct values of `source_field` in a small table, never read from the big one."""

    source_model = None
    source_field = ""
    field = ""  # what the filtered queryset is filtered on

    def lookups(self, request, model_admin):
        values = (
            self.source_model.objects.exclude(**{self.source_field: ""})
            .order_by(self.source_field)
            .values_list(self.source_field, flat=True)
            .distinct()
        )
        return [(value, value) for value in values]

    def queryset(self, request, queryset):
        if self.value() is not None:
            return queryset.filter(**{self.field: self.value()})
        return queryset


class ObjectIdFilter(admin.SimpleListFilter):
    """`?<parameter>=<id>`: what the links from an object's page use. Shown only while it is applied."""

    model = None  # the object filtered by
    only_fields: tuple[str, ...] = ("id",)

    def lookups(self, request, model_admin):
        if self.value() is None:
            return []
        pk = parse_uuid(self.value())
        # A bad id still gets a choice, so that queryset() runs and rejects it instead of listing everything.
        obj = self.model.objects.filter(pk=pk).only(*self.only_fields).first() if pk else None
        return [(self.value(), str(obj) if obj else self.value())]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        pk = parse_uuid(self.value())
        if pk is None:
            raise IncorrectLookupParameters(f"Not a {self.parameter_name} id: {self.value()!r}")
        return queryset.filter(**{f"{self.parameter_name}_id": pk})


class IsNullFilter(admin.SimpleListFilter):
    """Two choices on whether `field` is set: a timestamp that marks a state (ended, deleted, revoked)."""

    field: str
    unset_choice: tuple[str, str]  # (parameter value, label) for "field is null"
    set_choice: tuple[str, str]

    def lookups(self, request, model_admin):
        return [self.unset_choice, self.set_choice]

    def queryset(self, request, queryset):
        if self.value() == self.unset_choice[0]:
            return queryset.filter(**{f"{self.field}__isnull": True})
        if self.value() == self.set_choice[0]:
            return queryset.filter(**{f"{self.field}__isnull": False})
        return queryset
