"""Strategies in the admin: edit them (every change a version), run them by hand, audit every run."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from platform_kit.admin.display import EMPTY, badge, counted, hint, pretty_json, text_column, truncated
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin
from sessions_app.links import timeline_url
from sessions_app.models import Session
from strategies_app.models import Strategy, StrategyRun, StrategyVersion, Trigger
from strategies_app.prompts import PLACEHOLDERS
from strategies_app.services.runs import StrategyDisabled, run_request
from strategies_app.services.strategies import _validate, strategy_create, strategy_update

STATUS_TONES = {"queued": "slate", "running": "blue", "succeeded": "green", "failed": "red"}
EDITABLE = ("enabled", *Strategy.VERSIONED_FIELDS)


class StrategyForm(forms.ModelForm):
    class Meta:
        model = Strategy
        fields = ("tenant", "name", *EDITABLE)
        help_texts = {"prompt": "Placeholders: " + ", ".join("{" + name + "}" for name in PLACEHOLDERS)}

    def clean(self):
        cleaned = super().clean()
        try:
            _validate({k: v for k, v in cleaned.items() if k in Strategy.VERSIONED_FIELDS})
        except ValidationError as error:
            for field, problems in error.message_dict.items():
                for problem in problems:
                    self.add_error(field if field in self.fields else None, problem)
        return cleaned


class StrategyVersionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = StrategyVersion
    fields = ("version", "type", "extractor", "prompt", "settings", "actor", "created_at")
    readonly_fields = fields
    ordering = ("-version",)
    extra = 0


class RunForm(forms.Form):
    session = forms.UUIDField(required=False, help_text="One session's unread messages…")
    user_id = forms.CharField(required=False, max_length=255, help_text="…or all of a user's sessions")

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("session") and not cleaned.get("user_id"):
            raise forms.ValidationError("Give a session id or a user id.")
        return cleaned


@admin.register(Strategy)
class StrategyAdmin(admin.ModelAdmin):
    form = StrategyForm
    list_display = ("name_version", "runs_link", "enabled", "type", "extractor_code", "triggers", "tenant_column")
    list_filter = ("enabled", "type", "extractor", "builtin", "tenant")
    search_fields = ("name", "description")
    list_select_related = ("tenant",)
    readonly_fields = ("version", "builtin", "schedule_link", "run_link", "created_at", "updated_at")
    inlines = (StrategyVersionInline,)
    actions = ("enable", "disable", "run_unread")
    tenant_column = text_column("tenant", 14, ordering="tenant__name")  # the whole on hover

    def get_fieldsets(self, request, obj=None):
        return [
            (None, {"fields": ("tenant", "name", "description", "type", "enabled", "version", "builtin")}),
            ("Extraction", {"fields": ("extractor", "prompt")}),
            (
                "Triggers",
                {
                    "fields": (
                        "on_tool_result",
                        "on_state_keys",
                        "message_threshold",
                        "accumulated_threshold",
                        "schedule_minutes",
                        "schedule_link",
                    )  # fmt: skip
                },
            ),
            ("Runs", {"fields": ("run_link", "created_at", "updated_at")}),
        ]

    def get_readonly_fields(self, request, obj=None):
        return (*self.readonly_fields, "tenant", *(("name",) if obj.builtin else ())) if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        # Through the services, so a change makes a version and the beat task follows the schedule.
        values = {field: form.cleaned_data[field] for field in EDITABLE if field in form.cleaned_data}
        if change:
            changed = {f: values[f] for f in form.changed_data if f in values}
            if "name" in form.changed_data:
                changed["name"] = form.cleaned_data["name"]
            saved = strategy_update(tenant=obj.tenant, strategy_id=obj.pk, actor=f"admin:{request.user}", **changed)
        else:
            saved = strategy_create(
                tenant=form.cleaned_data["tenant"],
                name=form.cleaned_data["name"],
                actor=f"admin:{request.user}",
                **values,
            )
        obj.pk, obj.version = saved.pk, saved.version

    @admin.display(description="triggers")
    def triggers(self, obj):
        parts = []
        if obj.on_tool_result:
            parts.append("tool results")
        if obj.on_state_keys:
            parts.append("state " + ", ".join(obj.on_state_keys))
        if obj.message_threshold is not None:
            parts.append(f"score ≥ {obj.message_threshold:g}")
        if obj.accumulated_threshold is not None:
            parts.append(f"Σ score ≥ {obj.accumulated_threshold:g}")
        if obj.schedule_minutes:
            parts.append(f"every {obj.schedule_minutes} min")
        if not parts:
            return "manual only"
        return format_html_join(
            mark_safe("<br>"), "{}", ((truncated(part, 32),) for part in parts)
        )  # one trigger a line

    @admin.display(description="strategy", ordering="name")
    def name_version(self, obj):
        return f"{obj.name} v{obj.version}"

    @admin.display(description="extractor", ordering="extractor")
    def extractor_code(self, obj):
        return hint(obj.extractor, obj.get_extractor_display())

    @admin.display(description="runs")
    def runs_link(self, obj):
        url = reverse("admin:strategies_app_strategyrun_changelist")
        query = urlencode({StrategyNameFilter.parameter_name: obj.name, "tenant__id__exact": obj.tenant_id})
        return format_html('<a href="{}?{}">runs</a>', url, query)

    @admin.display(description="schedule (django-celery-beat)")
    def schedule_link(self, obj):
        if obj.periodic_task_id is None:
            return "no periodic task (set schedule minutes to create one)"
        url = reverse("admin:django_celery_beat_periodictask_change", args=[obj.periodic_task_id])
        return format_html('<a href="{}">{}</a> (edit the timing there, e.g. a crontab)', url, obj.periodic_task)

    @admin.display(description="run by hand")
    def run_link(self, obj):
        if obj.pk is None:
            return EMPTY
        return format_html(
            '<a href="{}">Run for a session or a user…</a>', reverse("admin:strategy_run", args=[obj.pk])
        )

    def get_urls(self):
        run = path("<uuid:object_id>/run/", self.admin_site.admin_view(self.run_view), name="strategy_run")
        return [run, *super().get_urls()]

    def run_view(self, request, object_id):
        strategy = self.get_object(request, str(object_id))
        if strategy is None or not self.has_change_permission(request, strategy):
            return redirect("admin:strategies_app_strategy_changelist")
        form = RunForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            session = None
            if form.cleaned_data.get("session"):
                session = Session.objects.filter(pk=form.cleaned_data["session"], tenant=strategy.tenant).first()
                if session is None:
                    form.add_error("session", "No session of this strategy's tenant has that id.")
            if form.is_valid():
                try:
                    run = run_request(
                        strategy=strategy,
                        trigger=Trigger.MANUAL,
                        session=session,
                        user_id=form.cleaned_data.get("user_id", ""),
                        detail=f"admin:{request.user}",
                    )
                except StrategyDisabled as disabled:
                    self.message_user(request, str(disabled), messages.ERROR)
                else:
                    self.message_user(request, f"Queued run {run.pk}.", messages.SUCCESS)
                    return redirect("admin:strategies_app_strategyrun_change", run.pk)
        context = {**self.admin_site.each_context(request), "title": f"Run {strategy.name}", "form": form}
        context.update(opts=self.model._meta, original=strategy)
        return TemplateResponse(request, "admin/strategies_app/run_form.html", context)

    @admin.action(description="Enable selected strategies", permissions=["change"])
    def enable(self, request, queryset):
        for strategy in queryset:
            strategy_update(
                tenant=strategy.tenant, strategy_id=strategy.pk, enabled=True, actor=f"admin:{request.user}"
            )
        self.message_user(request, f"Enabled {queryset.count()} strateg(ies).", messages.SUCCESS)

    @admin.action(description="Disable selected strategies", permissions=["change"])
    def disable(self, request, queryset):
        for strategy in queryset:
            strategy_update(
                tenant=strategy.tenant, strategy_id=strategy.pk, enabled=False, actor=f"admin:{request.user}"
            )
        self.message_user(request, f"Disabled {queryset.count()} strateg(ies).", messages.SUCCESS)

    @admin.action(description="Run now over sessions with unread messages", permissions=["change"])
    def run_unread(self, request, queryset):
        from strategies_app.tasks import strategy_scheduled

        queued = sum(strategy_scheduled(str(strategy.pk)) for strategy in queryset.filter(enabled=True))
        self.message_user(request, f"Queued {counted(queued, 'run')}.", messages.SUCCESS)


class StrategyNameFilter(admin.SimpleListFilter):
    """Strategies by name: every tenant has its own copy of the built-in ones (the tenant filter tells them apart)."""

    title = "strategy"
    parameter_name = "strategy_name"

    def lookups(self, request, model_admin):
        names = Strategy.objects.order_by("name").values_list("name", flat=True).distinct()
        return [(name, name) for name in names]

    def queryset(self, request, queryset):
        return queryset.filter(strategy__name=self.value()) if self.value() else queryset


@admin.register(StrategyRun)
class StrategyRunAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, admin.ModelAdmin):
    # When, which strategy, did it work, on whose messages, and what it decided (each count on hover).
    list_display = (
        "queued_at", "strategy_label", "status_badge", "trigger", "session_link", "user_column", "message_range",
        "decision_counts",
    )  # fmt: skip
    list_filter = ("status", "trigger", StrategyNameFilter, "tenant")
    search_fields = ("=user_id", "=id")
    ordering = ("-queued_at",)
    list_select_related = ("strategy", "strategy_version", "session")
    list_defer = ("decisions", "error", "state_changes", "session__metadata")
    user_column = text_column("user_id", 14, "user ID")  # the whole on hover
    readonly_fields = (
        "id", "tenant", "strategy", "version", "trigger", "trigger_detail", "state_changes_display", "status_badge",
        "error", "session_link", "user_id", "extractor", "message_range", "sessions_processed", "messages_processed",
        "candidates", "added", "updated", "invalidated", "unchanged", "decisions_table", "input_tokens",
        "output_tokens", "llm_latency_ms", "duration_ms", "attempts", "queued_at", "started_at", "heartbeat_at",
        "finished_at",
    )  # fmt: skip
    fields = readonly_fields

    @admin.display(description="version", ordering="strategy_version__version")
    def version(self, obj):
        return obj.strategy_version.version

    @admin.display(description="strategy", ordering="strategy__name")
    def strategy_label(self, obj):
        return f"{obj.strategy.name} v{obj.strategy_version.version}"

    @admin.display(description="decisions")
    def decision_counts(self, obj):
        counts = [(label, getattr(obj, label)) for label in ("added", "updated", "invalidated", "unchanged")]
        made = ", ".join(f"{value} {label}" for label, value in counts[:3] if value)
        return hint(made or "no change", " · ".join(f"{value} {label}" for label, value in counts))

    @admin.display(description="took", ordering="duration_ms")
    def duration(self, obj):
        if obj.duration_ms is None:
            return EMPTY
        return f"{obj.duration_ms:,.0f} ms" if obj.duration_ms < 10_000 else f"{obj.duration_ms / 1000:,.1f} s"

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        status = badge(obj.get_status_display(), STATUS_TONES.get(obj.status, "grey"))
        took = self.duration(obj)
        return status if took == EMPTY else format_html('<span title="took {}">{}</span>', took, status)

    @admin.display(description="session")
    def session_link(self, obj):
        if obj.session_id is None:
            return f"all sessions of {obj.user_id}" if obj.user_id else EMPTY
        return format_html(
            '<a href="{}">{}</a>',
            timeline_url(obj.session_id, at_seq=obj.from_seq),
            truncated(str(obj.session), 24),
        )

    @admin.display(description="messages (seq)")
    def message_range(self, obj):
        if obj.from_seq is None:
            return EMPTY
        return f"{obj.from_seq}–{obj.to_seq}"

    @admin.display(description="decisions")
    def decisions_table(self, obj):
        if not obj.decisions:
            return EMPTY
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td><a href='{}'>{}</a></td><td>{}</td><td>{}</td></tr>",
            (
                (
                    d.get("action"),
                    reverse("admin:memory_app_record_change", args=[d.get("record")]),
                    (d.get("content") or "")[:120],
                    d.get("slot", ""),
                    d.get("reason", ""),
                )
                for d in obj.decisions
            ),
        )
        return format_html(
            "<table><thead><tr><th>action</th><th>record</th><th>about</th><th>reason</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="state changes")
    def state_changes_display(self, obj):
        return pretty_json(obj.state_changes)


@admin.action(description="Run memory strategies on selected sessions (unread messages)", permissions=["change"])
def run_strategies_on_sessions(modeladmin, request, queryset):
    queued = 0
    for session in queryset.filter(deleted_at__isnull=True).select_related("tenant")[:500]:
        for strategy in Strategy.objects.filter(tenant=session.tenant, enabled=True):
            run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session, detail=f"admin:{request.user}")
            queued += 1
    modeladmin.message_user(request, f"Queued {queued} strategy run(s).", messages.SUCCESS)


# sessions_app does not know this app; the action joins its session admin from here.
_session_admin = admin.site.get_model_admin(Session)
_session_admin.actions = [*(_session_admin.actions or ()), run_strategies_on_sessions]
