"""Retention in the admin: each tenant's policy for message content (saved through the service, so the admin is
audited like the API), the runs and the audit trail (read-only). memory_app adds the preview and "apply now"."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from platform_kit.admin.display import pretty_json
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from sessions_app.models import RetentionEvent, RetentionPolicy, RetentionRun
from sessions_app.schema import ROLES
from sessions_app.services.retention import retention_policy_set, retention_policy_validate


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


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    form = RetentionPolicyForm
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
