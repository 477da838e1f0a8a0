from django_filters import rest_framework as filters

from memory_app.models import Record, RecordType, unexpired
from sessions_app.search import keyword_filter


class RecordFilter(filters.FilterSet):
    user_id = filters.CharFilter()
    namespace = filters.CharFilter()
    type = filters.MultipleChoiceFilter(choices=RecordType.choices)
    q = filters.CharFilter(method="filter_q", help_text="Keywords in the content (English and Chinese)")
    session = filters.UUIDFilter(field_name="source_sessions", help_text="Records drawn from this session")
    strategy = filters.CharFilter()
    valid = filters.BooleanFilter(help_text="Default: only valid records. false: deleted or invalidated ones")
    expired = filters.BooleanFilter(method="filter_expired", help_text="true: only records whose TTL ran out")

    class Meta:
        model = Record
        fields = []

    def filter_queryset(self, queryset):
        if self.form.cleaned_data.get("valid") is None:
            queryset = queryset.filter(valid=True)
        return super().filter_queryset(queryset)

    def filter_expired(self, queryset, name, value):
        return queryset.exclude(unexpired()) if value else queryset.filter(unexpired())

    def filter_q(self, queryset, name, value):
        return keyword_filter(queryset, value.strip()) if value.strip() else queryset
