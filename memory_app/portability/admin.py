"""Memory export and import in the admin (docs/portability.md): the same JSON Lines, the same checks and the same
services as `GET /api/v1/records/export/` and `POST /api/v1/records/import/`, for a tenant the staff user picks."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from memory_app.portability.importer import records_import
from memory_app.portability.lines import parse_export
from memory_app.selectors.export import memory_export_lines
from memory_app.serializers import user_id_map
from platform_kit.api.errors import validation_detail
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
    if not model_admin.has_view_permission(request):
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
        "opts": model_admin.model._meta,
        **forms_,
    }
    return TemplateResponse(request, "admin/memory_app/record/portability.html", context)
