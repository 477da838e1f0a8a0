"""ModelAdmin mixins for the admins of recorded facts and of big tables, and an inline formset that stops early."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.forms.models import BaseInlineFormSet

from platform_kit.admin.display import parse_uuid
from platform_kit.admin.paginator import EstimatedCountPaginator


class ReadOnlyAdminMixin:
    """Viewable (with the view permission), never added, changed or deleted through the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class BigTableAdminMixin:
    """For tables of millions of rows: no COUNT(*), no facet counts, only the listed columns loaded.

    `list_defer` names columns the list never shows (long texts, JSON, the search vector); `list_annotations`
    adds cheap per-row expressions (a content preview instead of the whole content).
    """

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100
    list_max_show_all = 200
    list_defer: tuple[str, ...] = ()

    def list_annotations(self) -> dict:
        return {}

    def get_changelist(self, request, **kwargs):
        model_admin = self

        class BigTableChangeList(ChangeList):
            def get_queryset(self, request, exclude_parameters=None):
                queryset = super().get_queryset(request, exclude_parameters)
                if model_admin.list_defer:
                    queryset = queryset.defer(*model_admin.list_defer)
                return queryset.annotate(**model_admin.list_annotations())

        return BigTableChangeList


class UuidSearchMixin:
    """Pasting an object's id into the search box finds it, whatever the other search fields are."""

    def get_search_results(self, request, queryset, search_term):
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        pk = parse_uuid(search_term)
        if pk is not None:
            found = found | queryset.filter(pk=pk)
        return found, may_have_duplicates


class LimitedInlineFormSet(BaseInlineFormSet):
    """Shows the first `limit` related rows: a session can have thousands of conversations."""

    limit = 50

    def get_queryset(self):
        if not hasattr(self, "_limited_queryset"):
            self._limited_queryset = super().get_queryset()[: self.limit]
        return self._limited_queryset
