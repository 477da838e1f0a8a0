"""Memory export and import in the admin (docs/portability.md): the same JSON Lines, the same checks and the same
services as `GET /api/v1/records/export/` and `POST /api/v1/records/import/`, for a tenant the staff user picks.

The pages hang on the list of imported records (`RecordImport`, read-only): /admin/portability_app/recordimport/
export/ and import/. Who may use them is as before, when they were the Records admin's: staff who may view
records export, staff who may add records import. The Records list links here (the room's template
admin/memory_app/record/change_list.html)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from memory_app.models import Record
from memory_app.selectors.export import memory_export_lines
from platform_kit.admin.display import pretty_json
from platform_kit.admin.mixins import ReadOnlyAdminMixin
from platform_kit.api.errors import validation_detail
from portability_app.memory.importer import records_import
from portability_app.memory.lines import parse_export, user_id_map
from portability_app.models import RecordImport
from sessions_app.models import Tenant


class MemoryExportForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("name"))
    user_id = forms.CharField(max_length=255, required=False, help_text="Only this user's records (empty: all)")


class MemoryImportForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("name"), help_text="Import into this tenant")
    file = forms.FileField(help_text="A memory export (.jsonl), as the export writes it")
    map_user = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One old=new per line: import user old's records as user new",
    )


def _filename(tenant: Tenant, user_id: str) -> str:
    name = f"memory-{tenant.name}{'-' + user_id if user_id else ''}-{timezone.now():%Y%m%dT%H%M%SZ}.jsonl"
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def export_view(model_admin, request):
    if not model_admin.admin_site.get_model_admin(Record).has_view_permission(request):
        raise PermissionDenied
    form = MemoryExportForm(request.GET or None)
    if request.GET and form.is_valid():
        tenant, user_id = form.cleaned_data["tenant"], form.cleaned_data["user_id"].strip()
        response = StreamingHttpResponse(
            memory_export_lines(tenant=tenant, user_id=user_id or None), content_type="application/x-ndjson"
        )
        response["Content-Disposition"] = f'attachment; filename="{_filename(tenant, user_id)}"'
        return response
    return _page(model_admin, request, "Export memory", export_form=form, import_form=MemoryImportForm())


def import_view(model_admin, request):
    if not request.user.has_perm("memory_app.add_record"):
        raise PermissionDenied
    form = MemoryImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        tenant = form.cleaned_data["tenant"]
        try:
            mapping = user_id_map([line.strip() for line in form.cleaned_data["map_user"].splitlines() if line.strip()])
            header, records = parse_export(form.cleaned_data["file"].read().splitlines(), user_id_map=mapping)
        except ValidationError as error:
            form.add_error(None, validation_detail(error.detail))
        else:
            summary = records_import(
                tenant=tenant, header=header, records=records, actor=f"admin:{request.user.get_username()}"
            )
            messages.success(
                request,
                f"Imported {summary.records:,} records into {tenant.name}: {summary.created:,} new, "
                f"{summary.merged:,} merged, {summary.unchanged:,} unchanged.",
            )
            return HttpResponseRedirect(reverse("admin:memory_app_record_changelist"))
    return _page(model_admin, request, "Import memory", export_form=MemoryExportForm(), import_form=form)


def _page(model_admin, request, title, **forms_):
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "opts": Record._meta,
        **forms_,
    }
    return TemplateResponse(request, "admin/portability_app/memory.html", context)


@admin.register(RecordImport)
class RecordImportAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("imported_at", "tenant", "origin_tenant", "origin_record_id", "record", "outcome", "actor")
    list_filter = ("outcome", "tenant")
    list_select_related = ("tenant", "record")
    search_fields = ("=origin_record_id", "=record__id")
    fields = (
        "tenant",
        "origin_tenant",
        "origin_record_id",
        "record",
        "outcome",
        "external_sources_display",
        "actor",
        "imported_at",
    )
    readonly_fields = fields

    @admin.display(description="exported sources not found here")
    def external_sources_display(self, row):
        return pretty_json(row.external_sources)

    def get_urls(self):
        export = path(
            "export/",
            self.admin_site.admin_view(lambda request: export_view(self, request)),
            name="portability_app_recordimport_export",
        )
        import_ = path(
            "import/",
            self.admin_site.admin_view(lambda request: import_view(self, request)),
            name="portability_app_recordimport_import",
        )
        return [export, import_, *super().get_urls()]
