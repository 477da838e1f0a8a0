"""The providers endpoints of ../shared/CONTRACT.md, "LLM gateway" (walkthrough: docs/gateway.md)."""

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from gateway_app.api.serializers import ProviderSerializer, ProviderWriteSerializer
from gateway_app.models import Provider
from gateway_app.services.providers import provider_create, provider_delete, provider_update
from platform_kit.api.pagination import cursor_page
from platform_kit.api.views import TenantScopedMixin

# The service's names for the fields whose API names differ.
API_NAMES = {"allowed_models": "models"}


def _in_api_names(error: ValidationError) -> ValidationError:
    return ValidationError({API_NAMES.get(field, field): problems for field, problems in error.message_dict.items()})


@extend_schema_view(
    list=extend_schema(summary="The tenant's upstream providers, newest first"),
    retrieve=extend_schema(summary="One provider (its key is never shown: api_key_hint)"),
    create=extend_schema(
        request=ProviderWriteSerializer,
        responses={201: ProviderSerializer},
        summary="Add a provider the gateway forwards calls to (/gateway/{name}/v1/...)",
    ),
    partial_update=extend_schema(
        request=ProviderWriteSerializer, summary="Change a provider (seen by every server within 5 seconds)"
    ),
    destroy=extend_schema(responses={204: None}, summary="Delete a provider: its calls are refused from then on"),
)
class ProviderViewSet(
    TenantScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = ProviderSerializer
    pagination_class = cursor_page("-created_at")
    model = Provider
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def tenant_queryset(self):
        return Provider.objects.filter(tenant=self.tenant)

    def create(self, request, *args, **kwargs):
        body = ProviderWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            provider = provider_create(tenant=self.tenant, **body.validated_data)
        except ValidationError as error:
            raise _in_api_names(error) from None
        return Response(ProviderSerializer(provider).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        provider = self.get_object()
        body = ProviderWriteSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            provider = provider_update(tenant=self.tenant, provider_id=provider.pk, **body.validated_data)
        except ValidationError as error:
            raise _in_api_names(error) from None
        except Provider.DoesNotExist:  # deleted since get_object
            raise Http404("No such provider.") from None
        return Response(ProviderSerializer(provider).data)

    def destroy(self, request, *args, **kwargs):
        provider = self.get_object()
        try:
            provider_delete(tenant=self.tenant, provider_id=provider.pk)
        except Provider.DoesNotExist:
            pass  # deleted since get_object: gone either way
        return Response(status=status.HTTP_204_NO_CONTENT)
