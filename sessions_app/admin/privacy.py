"""The right to be forgotten in the admin: the audit of forgotten users (read-only) and the page that forgets one,
showing the dry run's counts before anything is deleted (docs/portability.md)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from platform_kit.admin.mixins import ReadOnlyAdminMixin
from sessions_app.models import ForgetAudit, Tenant
from sessions_app.services.forget import user_forget, user_hash


class ForgetUserForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("name"))
    user_id = forms.CharField(max_length=255, strip=False)
    confirm = forms.CharField(
        max_length=255, required=False, strip=False, help_text="Type the user id again to delete (after the counts)"
    )


@admin.register(ForgetAudit)
class ForgetAuditAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("forgotten_at", "tenant", "short_hash", "total", "actor")
    list_filter = ("tenant",)
    list_select_related = ("tenant",)
    fields = ("tenant", "user_hash", "deleted", "total", "actor", "forgotten_at")
    readonly_fields = fields
    search_fields = ("user_hash",)
    search_help_text = "A user id: finds the audit of that user, if they were forgotten (the id is not stored)."
    change_list_template = "admin/sessions_app/forgetaudit/change_list.html"

    @admin.display(description="user (keyed hash)")
    def short_hash(self, audit):
        return f"{audit.user_hash[:16]}…"

    def get_search_results(self, request, queryset, search_term):
        if not search_term:
            return queryset, False
        hashes = [user_hash(tenant_id=pk, user_id=search_term) for pk in Tenant.objects.values_list("pk", flat=True)]
        return queryset.filter(user_hash__in=[*hashes, search_term]), False

    def get_urls(self):
        forget = self.admin_site.admin_view(self.forget_view)
        return [path("forget/", forget, name="sessions_app_forgetaudit_forget"), *super().get_urls()]

    def forget_view(self, request):
        if not request.user.has_perm("sessions_app.delete_session"):
            messages.error(request, "Forgetting a user needs the permission to delete sessions.")
            return HttpResponseRedirect(reverse("admin:sessions_app_forgetaudit_changelist"))
        form = ForgetUserForm(request.POST or None)
        counts = None
        if request.method == "POST" and form.is_valid():
            tenant, user_id = form.cleaned_data["tenant"], form.cleaned_data["user_id"]
            confirmed = form.cleaned_data["confirm"] == user_id and "forget" in request.POST
            forgotten = user_forget(
                tenant=tenant, user_id=user_id, actor=f"admin:{request.user.get_username()}", dry_run=not confirmed
            )
            if confirmed:
                messages.success(request, f"Forgot the user: {forgotten.total:,} rows deleted in {tenant.name}.")
                return HttpResponseRedirect(reverse("admin:sessions_app_forgetaudit_change", args=[forgotten.audit.pk]))
            if "forget" in request.POST:
                form.add_error("confirm", "Type the user id exactly, to confirm.")
            counts = forgotten
        context = {
            **self.admin_site.each_context(request),
            "title": "Forget a user",
            "opts": self.model._meta,
            "form": form,
            "counts": counts,
        }
        return TemplateResponse(request, "admin/sessions_app/forgetaudit/forget.html", context)
