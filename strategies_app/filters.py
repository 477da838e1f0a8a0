import django_filters

from strategies_app.models import RunStatus, StrategyRun, Trigger


class StrategyRunFilter(django_filters.FilterSet):
    strategy = django_filters.UUIDFilter(field_name="strategy_id")
    session = django_filters.UUIDFilter(field_name="session_id")
    user_id = django_filters.CharFilter()
    status = django_filters.ChoiceFilter(choices=RunStatus.choices)
    trigger = django_filters.ChoiceFilter(choices=Trigger.choices)

    class Meta:
        model = StrategyRun
        fields = ["strategy", "session", "user_id", "status", "trigger"]
