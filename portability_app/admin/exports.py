"""Tenant exports in the admin: the list (read-only), the download of a succeeded export's zip for staff who may
view exports, and the Tenant admin's action that queues them (docs/portability.md). The action is added here to
the Tenant admin sessions_app registers: the ledger does not know portability exists."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from platform_kit.admin.display import EMPTY, badge, counted, file_size
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from portability_app.models import ExportStatus, TenantExport
from portability_app.services.exports import export_response, tenant_export_request
from sessions_app.models import Tenant

TONES = {"queued": "grey", "running": "blue", "succeeded": "green", "failed": "red"}


@admin.register(TenantExport)
class TenantExportAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("created_at", "tenant", "status_badge", "requested_by", "size_display", "download_link")
    list_filter = ("status", "tenant")
    list_select_related = ("tenant",)
    fields = (
        "tenant",
        "status",
        "requested_by",
        "size",
        "counts",
        "error",
        "created_at",
        "started_at",
        "finished_at",
        "download_link",
    )
    readonly_fields = fields

    @admin.display(description="status", ordering="status")
    def status_badge(self, export):
        return badge(export.get_status_display(), TONES.get(export.status, "grey"))

    @admin.display(description="size", ordering="size")
    def size_display(self, export):
        return EMPTY if export.size is None else file_size(export.size)

    @admin.display(description="download")
    def download_link(self, export):
        if export.status != ExportStatus.SUCCEEDED:
            return EMPTY
        return format_html(
            '<a href="{}">zip</a>', reverse("admin:portability_app_tenantexport_download", args=[export.pk])
        )

    def get_urls(self):
        download = self.admin_site.admin_view(self.download_view)
        return [
            path("<uuid:export_id>/download/", download, name="portability_app_tenantexport_download"),
            *super().get_urls(),
        ]

    def download_view(self, request, export_id):
        if not self.has_view_permission(request):
            raise PermissionDenied
        export = get_object_or_404(TenantExport.objects.select_related("tenant"), pk=export_id)
        if export.status != ExportStatus.SUCCEEDED:
            raise Http404("No file for this export.")
        try:
            return export_response(export)
        except FileNotFoundError:
            raise Http404("No file for this export.") from None


@admin.action(description="Export all data of the selected tenants", permissions=["change"])
def export_data(model_admin, request, queryset):
    actor = f"admin:{request.user.get_username()}"
    names = [tenant_export_request(tenant=tenant, requested_by=actor).tenant.name for tenant in queryset]
    link = reverse("admin:portability_app_tenantexport_changelist")
    model_admin.message_user(
        request,
        format_html(
            'Queued {} ({}); follow {} in <a href="{}">tenant exports</a>.',
            counted(len(names), "export"),
            ", ".join(names),
            "it" if len(names) == 1 else "them",
            link,
        ),
        messages.SUCCESS,
    )


# The Tenant admin (sessions_app/admin/tenancy.py, registered before this module: INSTALLED_APPS' order) gets the
# action; its permission is the Tenant admin's change permission, as it was when the action was the ledger's.
_tenant_admin = admin.site.get_model_admin(Tenant)
_tenant_admin.actions = [*(_tenant_admin.actions or ()), export_data]
