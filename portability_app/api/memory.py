"""`/api/v1/records/export/` and `/api/v1/records/import/`: a tenant's memory exported as JSON Lines, and an
export imported (docs/portability.md). Beside the records' endpoints (memory_app), routed before them."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.metadata import SimpleMetadata
from rest_framework.response import Response

from memory_app.models import Record
from memory_app.selectors.export import memory_export_lines
from platform_kit.api.fields import StrictCharField
from platform_kit.api.schema import error_responses
from platform_kit.api.views import TenantScopedMixin
from portability_app.memory.importer import records_import
from portability_app.memory.lines import parse_export, user_id_map


class MemoryExportQuerySerializer(serializers.Serializer):
    user_id = StrictCharField(max_length=255, required=False, help_text="Only this user's records (default: all)")


class MemoryImportSummarySerializer(serializers.Serializer):
    records = serializers.IntegerField(help_text="Record lines read")
    created = serializers.IntegerField(help_text="New records, with their revisions")
    merged = serializers.IntegerField(help_text="Merged into a valid record of yours that said the same")
    unchanged = serializers.IntegerField(help_text="Imported before, or already records of yours: nothing written")
    external_sources = serializers.IntegerField(
        help_text="Exported sources naming no session or message of yours: kept as references on the import"
    )


class _WithoutActions(SimpleMetadata):
    """OPTIONS without the form of a POST: the import's body is the export's lines, no serializer's fields."""

    def determine_actions(self, request, view):
        return {}


# No docstring: an operation without a description of its own shows TenantScopedMixin's, as the records' do.
class MemoryPortabilityViewSet(TenantScopedMixin, viewsets.GenericViewSet):
    model = Record
    metadata_class = _WithoutActions

    def tenant_queryset(self):
        return Record.objects.filter(tenant=self.tenant)

    @extend_schema(
        parameters=[MemoryExportQuerySerializer],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
        summary="Export the tenant's records, or one user's, as JSON Lines (docs/portability.md)",
        description="A header line, then one line per record with its fields, provenance and revisions. Streamed.",
    )
    @action(detail=False, methods=["get"])
    def export(self, request):
        query = MemoryExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        user_id = query.validated_data.get("user_id")
        response = StreamingHttpResponse(
            memory_export_lines(tenant=self.tenant, user_id=user_id), content_type="application/x-ndjson"
        )
        name = f"memory-{self.tenant.name}{'-' + user_id if user_id else ''}-{timezone.now():%Y%m%dT%H%M%SZ}.jsonl"
        response["Content-Disposition"] = f'attachment; filename="{_safe_filename(name)}"'
        return response

    @extend_schema(
        # Any content type is read as the export's lines (application/x-ndjson, text/plain, …).
        request={"text/plain": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter(
                "map_user",
                str,
                many=True,
                description="`old=new`: import the records of user `old` as user `new` (repeat for more users)",
            )
        ],
        responses={200: MemoryImportSummarySerializer, **error_responses(400, 413)},
        summary="Import a memory export (JSON Lines): every line checked first, nothing written if one is bad",
        description="The body is the export as written (any content type, e.g. application/x-ndjson). A bad line is a "
        "400 naming it (`line 3.type`); importing the same export again writes nothing (docs/portability.md).",
    )
    @action(detail=False, methods=["post"], url_path="import")
    def import_(self, request):
        mapping = user_id_map(request.query_params.getlist("map_user"))
        header, records = parse_export(request.body.splitlines(), user_id_map=mapping)
        summary = records_import(tenant=self.tenant, header=header, records=records, actor="api")
        return Response(MemoryImportSummarySerializer(summary.as_dict()).data)


def _safe_filename(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
