"""Record TTLs in the admin (saved through the services, so audited like the API), and the preview and "apply
now" actions that join the retention policies' admin from here (sessions_app does not know about records)."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from memory_app.models import RecordTtl
from memory_app.retention import (
    TTL_FIELDS,
    record_ttl_create,
    record_ttl_delete,
    record_ttl_update,
    record_ttl_validate,
    retention_apply,
    ttl_snapshot,
)
from memory_app.selectors.retention import retention_preview
from sessions_app.models import RetentionPolicy, RetentionRun


def _day(moment) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d}"


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


_policy_admin = admin.site.get_model_admin(RetentionPolicy)
_policy_admin.actions = [*(_policy_admin.actions or ()), preview_retention, apply_retention_now]
