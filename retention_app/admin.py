"""Retention in the admin: each tenant's policy for message content with the preview and "apply now" actions,
and the record TTLs (both saved through the services, so the admin is audited like the API); the runs and the
audit trail (read-only). The record TTLs keep their place under memory_app (their model is memory's)."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from memory_app.models import RecordTtl
from platform_kit.admin.display import pretty_json
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from retention_app.models import RetentionEvent, RetentionPolicy, RetentionRun
from retention_app.selectors import retention_preview
from retention_app.services import (
    TTL_FIELDS,
    record_ttl_create,
    record_ttl_delete,
    record_ttl_update,
    record_ttl_validate,
    retention_apply,
    retention_policy_set,
    retention_policy_validate,
    ttl_snapshot,
)
from sessions_app.schema import ROLES


def _day(moment) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d}"


class RetentionPolicyForm(forms.ModelForm):
    roles = forms.MultipleChoiceField(
        choices=[(role, role) for role in ROLES],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The roles whose content is purged; none ticked: every role",
    )

    class Meta:
        model = RetentionPolicy
        fields = ("tenant", "message_content_days", "roles")

    def clean(self):
        cleaned = super().clean()
        errors = retention_policy_validate(
            message_content_days=cleaned.get("message_content_days"), roles=list(cleaned.get("roles") or [])
        )
        if errors:
            raise ValidationError(errors)
        return cleaned


@admin.action(description="Preview: what a retention run would purge now (changes nothing)")
def preview_retention(modeladmin, request, queryset):
    for policy in queryset.select_related("tenant"):
        preview = retention_preview(tenant=policy.tenant)
        modeladmin.message_user(
            request,
            f"{policy.tenant}: the content of {preview.messages.messages} messages "
            f"(created {_day(preview.messages.oldest)} to {_day(preview.messages.newest)}) would be purged; "
            f"{preview.records_to_purge} expired records deleted; {preview.records_expired} expired records kept.",
            messages.INFO,
        )


@admin.action(description="Apply retention now to the selected tenants", permissions=["change"])
def apply_retention_now(modeladmin, request, queryset):
    for policy in queryset.select_related("tenant"):
        run = retention_apply(tenant=policy.tenant, trigger=RetentionRun.Trigger.ADMIN)
        modeladmin.message_user(
            request,
            f"{policy.tenant}: purged the content of {run.messages_purged} messages "
            f"(created {_day(run.oldest_message_at)} to {_day(run.newest_message_at)}); "
            f"deleted {run.records_purged} expired records.",
            messages.SUCCESS,
        )


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    form = RetentionPolicyForm
    actions = [preview_retention, apply_retention_now]
    list_display = ("tenant", "message_content_days", "roles_display", "updated_at")
    list_select_related = ("tenant",)
    readonly_fields = ("created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        return (*self.readonly_fields, "tenant") if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        # Through the service: validated and audited the same way as the API.
        saved = retention_policy_set(
            tenant=obj.tenant,
            actor=f"admin:{request.user}",
            message_content_days=form.cleaned_data.get("message_content_days"),
            roles=list(form.cleaned_data.get("roles") or []),
        )
        obj.pk, obj._state.adding = saved.pk, False

    def has_delete_permission(self, request, obj=None):
        return False  # empty days keeps content forever; the policy and its trail stay

    @admin.display(description="roles")
    def roles_display(self, obj):
        return ", ".join(obj.roles) if obj.roles else "every role"


@admin.register(RetentionRun)
class RetentionRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "started_at",
        "tenant",
        "dry_run",
        "trigger",
        "messages_purged",
        "oldest_message_at",
        "newest_message_at",
        "records_purged",
        "records_expired",
        "error",
    )
    list_filter = ("dry_run", "trigger", "tenant")
    list_select_related = ("tenant",)
    ordering = ("-started_at",)


@admin.register(RetentionEvent)
class RetentionEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("created_at", "tenant", "action", "actor", "subject_id")
    list_filter = ("action", "tenant")
    list_select_related = ("tenant",)
    search_fields = ("subject_id",)
    fields = ("created_at", "tenant", "action", "actor", "subject_id", "before_display", "after_display")
    readonly_fields = fields

    @admin.display(description="before")
    def before_display(self, obj):
        return pretty_json(obj.before)

    @admin.display(description="after")
    def after_display(self, obj):
        return pretty_json(obj.after)


class RecordTtlForm(forms.ModelForm):
    """Checked by the service's own rules before anything is saved, so a refusal is a form error on its field."""

    class Meta:
        model = RecordTtl
        fields = ("tenant", *TTL_FIELDS)

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        adding = self.instance._state.adding
        ttl = RecordTtl(
            pk=self.instance.pk,
            tenant=data["tenant"] if adding else self.instance.tenant,
            **{name: data.get(name, getattr(self.instance, name)) for name in TTL_FIELDS},
        )
        try:
            record_ttl_validate(ttl, before=None if adding else ttl_snapshot(self.instance))
        except ValidationError as error:
            self.add_error(None, error)
        return data


@admin.register(RecordTtl)
class RecordTtlAdmin(admin.ModelAdmin):
    form = RecordTtlForm
    list_display = ("tenant", "record_type", "strategy", "ttl_days", "on_expiry", "updated_at")
    list_filter = ("on_expiry", "record_type", "tenant")
    list_select_related = ("tenant",)
    fields = ("tenant", "record_type", "strategy", "ttl_days", "on_expiry")

    def get_readonly_fields(self, request, obj=None):
        return ("tenant",) if obj else ()

    def save_model(self, request, obj, form, change):
        actor = f"admin:{request.user}"
        values = {name: getattr(obj, name) for name in TTL_FIELDS}
        try:
            if change:
                saved = record_ttl_update(tenant=obj.tenant, ttl_id=obj.pk, actor=actor, **values)
            else:
                saved = record_ttl_create(tenant=obj.tenant, actor=actor, **values)
        except ValidationError as error:
            self.message_user(request, "; ".join(error.messages), messages.ERROR)
            return
        obj.pk, obj._state.adding = saved.pk, False

    def delete_model(self, request, obj):
        record_ttl_delete(tenant=obj.tenant, ttl_id=obj.pk, actor=f"admin:{request.user}")

    def delete_queryset(self, request, queryset):
        for ttl in queryset.select_related("tenant"):
            self.delete_model(request, ttl)
