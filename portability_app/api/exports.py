"""`/api/v1/exports/`: a tenant's full export, made in the background and downloaded as a zip
(docs/portability.md). Requested through `services.exports`, the same service as the admin's action."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from platform_kit.api.errors import Conflict
from platform_kit.api.pagination import cursor_page
from platform_kit.api.schema import error_responses
from platform_kit.api.views import TenantScopedMixin
from portability_app.models import ExportStatus, TenantExport
from portability_app.services.exports import export_response, tenant_export_request


class TenantExportSerializer(serializers.ModelSerializer):
    class Meta:
        model = TenantExport
        fields = ("id", "status", "requested_by", "size", "counts", "error", "created_at", "started_at", "finished_at")
        read_only_fields = fields


def _actor(request) -> str:
    prefix = getattr(request.auth, "prefix", "")
    return f"api:{prefix}" if prefix else "api"


@extend_schema_view(
    list=extend_schema(summary="The tenant's exports, newest first"),
    retrieve=extend_schema(summary="One export: its status, and the rows per file once it succeeded"),
    create=extend_schema(
        request=None,
        responses={202: TenantExportSerializer},
        summary="Export all the tenant's data in the background (poll it, then download the zip)",
    ),
)
class TenantExportViewSet(
    TenantScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = TenantExportSerializer
    pagination_class = cursor_page("-created_at")
    model = TenantExport
    http_method_names = ["get", "post", "head", "options"]

    def tenant_queryset(self):
        return TenantExport.objects.filter(tenant=self.tenant)

    def create(self, request, *args, **kwargs):
        export = tenant_export_request(tenant=self.tenant, requested_by=_actor(request))
        return Response(TenantExportSerializer(export).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="The export's zip"),
            **error_responses(409),
        },
        summary="Download the zip of a succeeded export (409 while it is queued or running, or if it failed)",
    )
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        export = self.get_object()
        if export.status == ExportStatus.WITHDRAWN:
            raise Conflict(export.error)
        if export.status != ExportStatus.SUCCEEDED:
            raise Conflict(f"The export is {export.status}: only a succeeded export can be downloaded.")
        try:
            return export_response(export)
        except FileNotFoundError:
            raise NotFound("The export's file was deleted.") from None
