"""Webhooks in the admin: subscriptions (through the same services as the API, every change logged) and the
delivery log with each answer, filters, and the Redeliver action."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.html import format_html

from platform_kit.admin.display import (
    EMPTY,
    badge,
    change_link,
    changelist_url,
    parse_uuid,
    pre,
    pretty_json,
    truncated,
)
from platform_kit.admin.filters import DateRangeFilter
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin
from platform_kit.redaction import redact_url
from webhooks_app.events import DELIVERY_EVENTS, Event
from webhooks_app.models import BreakerState, DeliveryStatus, Webhook, WebhookAttempt, WebhookChange, WebhookDelivery
from webhooks_app.services.breakers import webhook_breaker_reset
from webhooks_app.services.deliveries import DeliveryNotRedeliverable, delivery_redeliver, webhook_ping
from webhooks_app.services.webhooks import WebhookDeleted, _validate, webhook_create, webhook_delete, webhook_update

STATUS_TONES = {DeliveryStatus.PENDING: "blue", DeliveryStatus.SUCCEEDED: "green", DeliveryStatus.FAILED: "red"}
EDITABLE = ("url", "events", "description", "active")
BREAKER_FIELDS = ("breaker", "breaker_opened_at", "consecutive_failures", "breaker_probe_at", "held_deliveries")


def admin_actor(request) -> str:
    return f"admin:{request.user}"


class WebhookForm(forms.ModelForm):
    events = forms.MultipleChoiceField(choices=Event.choices, widget=forms.CheckboxSelectMultiple)
    new_secret = forms.BooleanField(
        required=False, label="Generate a new secret", help_text="Shown once, after saving; the old one stops working"
    )

    class Meta:
        model = Webhook
        fields = ("tenant", *EDITABLE)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:  # its secrets shown as [REDACTED]; saved back unchanged, they are kept
            self.initial["url"] = redact_url(self.instance.url)

    def clean(self):
        cleaned = super().clean()
        try:
            _validate({field: cleaned[field] for field in EDITABLE if field in cleaned})
        except ValidationError as error:
            for field, problems in error.message_dict.items():
                for problem in problems:
                    self.add_error(field if field in self.fields else None, problem)
        return cleaned


class BreakerFilter(admin.SimpleListFilter):
    title = "circuit breaker"
    parameter_name = "breaker"

    def lookups(self, request, model_admin):
        return [("open", "open (deliveries held)"), ("closed", "closed")]

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.filter(breaker_opened_at__isnull=False)
        if self.value() == "closed":
            return queryset.filter(breaker_opened_at__isnull=True)
        return queryset


class WebhookChangeInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = WebhookChange
    fields = ("created_at", "action", "actor", "changes")
    readonly_fields = fields
    extra = 0
    verbose_name_plural = "audit log (every change)"


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ("name", "tenant", "events_display", "state", "breaker", "deliveries_link", "created_at")
    list_filter = ("active", BreakerFilter, "tenant")
    search_fields = ("url", "description")
    list_select_related = ("tenant",)
    readonly_fields = (
        "id", "breaker", "breaker_opened_at", "consecutive_failures", "breaker_probe_at", "held_deliveries",
        "deliveries_link", "created_at", "updated_at", "deleted_at",
    )  # fmt: skip
    inlines = (WebhookChangeInline,)
    actions = ("send_test", "reset_breakers", "delete_webhooks")

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("tenant", *EDITABLE)
        return (
            "id", "tenant", *EDITABLE, "new_secret", *BREAKER_FIELDS, "deliveries_link", "created_at", "updated_at",
            "deleted_at",
        )  # fmt: skip

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        if obj.deleted_at is not None:
            return (*self.readonly_fields, "tenant", *EDITABLE, "new_secret")
        return (*self.readonly_fields, "tenant")

    def has_delete_permission(self, request, obj=None):
        return False  # deleting keeps it for audit: the "Delete" action

    def save_model(self, request, obj, form, change):
        # Through the services: validated as the API validates, and logged.
        if change:
            changes = {field: form.cleaned_data[field] for field in form.changed_data if field in EDITABLE}
            if form.cleaned_data.get("new_secret"):
                from webhooks_app.services.signing import secret_generate

                changes["secret"] = secret_generate()
            saved = webhook_update(tenant=obj.tenant, webhook_id=obj.pk, actor=admin_actor(request), **changes)
        else:
            saved = webhook_create(
                tenant=form.cleaned_data["tenant"],
                actor=admin_actor(request),
                **{field: form.cleaned_data[field] for field in EDITABLE},
            )
        if not change or form.cleaned_data.get("new_secret"):
            self.message_user(
                request,
                format_html(
                    "The webhook's signing secret (shown this once; give it to the receiver): <code>{}</code>",
                    saved.secret,
                ),
                messages.WARNING,
            )
        obj.pk = saved.pk

    def save_related(self, request, form, formsets, change):
        pass  # the audit log is written by the services, never through the inline

    @admin.display(description="webhook", ordering="url")
    def name(self, webhook):
        return truncated(webhook.description or redact_url(webhook.url), 60)

    @admin.display(description="events")
    def events_display(self, webhook):
        return ", ".join(webhook.events)

    @admin.display(description="state", ordering="active")
    def state(self, webhook):
        if webhook.deleted_at is not None:
            return badge("deleted", "slate")
        return badge("active", "green") if webhook.active else badge("inactive", "grey")

    @admin.display(description="circuit breaker")
    def breaker(self, webhook):
        state = webhook.breaker_state
        tone = {BreakerState.CLOSED: "green", BreakerState.OPEN: "red", BreakerState.HALF_OPEN: "amber"}[state]
        if state == BreakerState.CLOSED and webhook.consecutive_failures:
            return format_html("{} {}", badge(state, tone), f"({webhook.consecutive_failures} failed in a row)")
        return badge(state, tone)

    @admin.display(description="held deliveries")
    def held_deliveries(self, webhook):
        if webhook.pk is None or webhook.breaker_opened_at is None:
            return EMPTY
        held = WebhookDelivery.objects.filter(webhook=webhook, status=DeliveryStatus.PENDING).count()
        url = changelist_url(WebhookDelivery, webhook=webhook.pk, status=DeliveryStatus.PENDING)
        return format_html('<a href="{}">{} pending</a>', url, held)

    @admin.display(description="deliveries")
    def deliveries_link(self, webhook):
        if webhook.pk is None:
            return EMPTY
        return format_html('<a href="{}">deliveries</a>', changelist_url(WebhookDelivery, webhook=webhook.pk))

    @admin.action(description="Send a test ping to the selected webhooks", permissions=["change"])
    def send_test(self, request, queryset):
        sent = 0
        for webhook in queryset.filter(deleted_at__isnull=True).select_related("tenant"):
            webhook_ping(tenant=webhook.tenant, webhook_id=webhook.pk, actor=admin_actor(request))
            sent += 1
        self.message_user(request, f"Queued a ping to {sent} webhook(s); see their deliveries.")

    @admin.action(
        description="Reset the circuit breaker of the selected webhooks (held deliveries go)", permissions=["change"]
    )
    def reset_breakers(self, request, queryset):
        done = 0
        for webhook in queryset.filter(deleted_at__isnull=True).select_related("tenant"):
            if webhook.breaker_opened_at is not None or webhook.consecutive_failures:
                webhook_breaker_reset(tenant=webhook.tenant, webhook_id=webhook.pk, actor=admin_actor(request))
                done += 1
        self.message_user(request, f"Closed the circuit breaker of {done} webhook(s); their held deliveries go now.")

    @admin.action(description="Delete the selected webhooks (kept for audit)", permissions=["change"])
    def delete_webhooks(self, request, queryset):
        done = 0
        for webhook in queryset.filter(deleted_at__isnull=True).select_related("tenant"):
            try:
                webhook_delete(tenant=webhook.tenant, webhook_id=webhook.pk, actor=admin_actor(request))
                done += 1
            except WebhookDeleted:
                continue
        self.message_user(request, f"Deleted {done} webhook(s): nothing more is sent to them.")


class WebhookAttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = WebhookAttempt
    fields = ("number", "started_at", "duration_ms", "outcome", "response_status", "error", "response_body")
    readonly_fields = fields
    extra = 0


class WebhookFilter(admin.SimpleListFilter):
    """`?webhook=<id>`: the link from a webhook's page. Shown only while it is applied."""

    title = "webhook"
    parameter_name = "webhook"

    def lookups(self, request, model_admin):
        value = self.value()
        if value is None:
            return []
        webhook = Webhook.objects.filter(pk=parse_uuid(value)).first() if parse_uuid(value) else None
        return [(value, str(webhook) if webhook else value)]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        pk = parse_uuid(self.value())
        return queryset.filter(webhook_id=pk) if pk else queryset.none()


class EventFilter(admin.SimpleListFilter):
    title = "event"
    parameter_name = "event"

    def lookups(self, request, model_admin):
        return [(name, name) for name in DELIVERY_EVENTS]

    def queryset(self, request, queryset):
        return queryset.filter(event=self.value()) if self.value() else queryset


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, admin.ModelAdmin):
    list_display = (
        "created_at", "event", "webhook_display", "status_badge", "attempts", "response_status", "delivered_at",
        "error_preview",
    )  # fmt: skip
    list_filter = ("status", EventFilter, WebhookFilter, ("created_at", DateRangeFilter), "tenant")
    search_fields = ("id",)  # shows the search box; get_search_results does the real work
    search_help_text = "A delivery id, an event id (X-ACE-Event-Id) or a webhook id."
    list_select_related = ("webhook", "tenant")
    list_defer = ("payload", "response_body", "response_headers")
    ordering = ("-created_at",)
    readonly_fields = (
        "id", "tenant", "webhook_display", "event", "event_id", "status_badge", "attempts", "next_attempt_at",
        "requested_by", "redelivery_of_link", "created_at", "delivered_at", "duration_ms", "response_status",
        "response_headers_display", "response_body_display", "error", "payload_display",
    )  # fmt: skip
    fields = readonly_fields
    inlines = (WebhookAttemptInline,)
    actions = ("redeliver",)

    def get_search_results(self, request, queryset, search_term):
        pk = parse_uuid(search_term)
        if not search_term.strip():
            return queryset, False
        if pk is None:
            return queryset.none(), False
        return queryset.filter(pk=pk) | queryset.filter(event_id=pk) | queryset.filter(webhook_id=pk), False

    @admin.display(description="webhook")
    def webhook_display(self, delivery):
        return change_link(
            delivery.webhook, truncated(delivery.webhook.description or redact_url(delivery.webhook.url), 40)
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, delivery):
        return badge(delivery.status, STATUS_TONES.get(delivery.status, "grey"))

    @admin.display(description="last error")
    def error_preview(self, delivery):
        return truncated(delivery.error, 40)

    @admin.display(description="redelivery of")
    def redelivery_of_link(self, delivery):
        return change_link(delivery.redelivery_of) if delivery.redelivery_of_id else EMPTY

    @admin.display(description="response headers")
    def response_headers_display(self, delivery):
        return pretty_json(delivery.response_headers)

    @admin.display(description="response body (its start)")
    def response_body_display(self, delivery):
        return pre(delivery.response_body)

    @admin.display(description="payload (the body sent)")
    def payload_display(self, delivery):
        return pretty_json(delivery.payload)

    @admin.action(description="Redeliver the selected deliveries (as new deliveries)", permissions=["view"])
    def redeliver(self, request, queryset):
        done, refused = 0, []
        for delivery_id, tenant_id in queryset.values_list("pk", "tenant_id"):
            try:
                delivery_redeliver(tenant_id=tenant_id, delivery_id=delivery_id, actor=admin_actor(request))
                done += 1
            except DeliveryNotRedeliverable as why:
                refused.append(f"{delivery_id}: {why}")
        self.message_user(request, f"Queued {done} redelivery(ies).")
        if refused:
            self.message_user(request, "Not redelivered: " + " ".join(refused[:10]), messages.WARNING)
