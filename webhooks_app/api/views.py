"""The Webhooks endpoints of ../shared/CONTRACT.md (walkthrough: docs/webhooks.md)."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from platform_kit.api.errors import Conflict
from platform_kit.api.pagination import cursor_page
from platform_kit.api.schema import error_responses
from platform_kit.api.views import TenantScopedMixin
from webhooks_app.api.filters import WebhookDeliveryFilter
from webhooks_app.api.serializers import (
    DeliveryQuerySerializer,
    WebhookChangeSerializer,
    WebhookCreatedSerializer,
    WebhookDeliveryDetailSerializer,
    WebhookDeliverySerializer,
    WebhookSerializer,
    WebhookWriteSerializer,
)
from webhooks_app.models import Webhook, WebhookChange, WebhookDelivery
from webhooks_app.services.breakers import webhook_breaker_reset
from webhooks_app.services.deliveries import DeliveryNotRedeliverable, delivery_redeliver, webhook_ping
from webhooks_app.services.webhooks import WebhookDeleted, webhook_create, webhook_delete, webhook_update


def api_actor(request) -> str:
    """Who the audit log names for an API call: the key's prefix (the key itself is never stored)."""
    prefix = getattr(request.auth, "prefix", "")
    return f"api:{prefix}" if prefix else "api"


@extend_schema_view(
    list=extend_schema(summary="The tenant's webhooks, newest first"),
    retrieve=extend_schema(summary="One webhook (its secret is never shown again after creation)"),
    create=extend_schema(
        request=WebhookWriteSerializer,
        responses={201: WebhookCreatedSerializer},
        summary="Subscribe a URL to events; the answer holds the signing secret, once",
    ),
    partial_update=extend_schema(request=WebhookWriteSerializer, summary="Change a webhook (every change is logged)"),
    destroy=extend_schema(
        responses={204: None}, summary="Delete: nothing more is sent; it and its deliveries stay for audit"
    ),
)
class WebhookViewSet(
    TenantScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = WebhookSerializer
    pagination_class = cursor_page("-created_at")
    model = Webhook
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def tenant_queryset(self):
        return Webhook.objects.filter(tenant=self.tenant, deleted_at__isnull=True)

    def create(self, request, *args, **kwargs):
        body = WebhookWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        webhook = webhook_create(tenant=self.tenant, actor=api_actor(request), **body.validated_data)
        return Response(WebhookCreatedSerializer(webhook).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        webhook = self.get_object()
        body = WebhookWriteSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            webhook = webhook_update(
                tenant=self.tenant, webhook_id=webhook.pk, actor=api_actor(request), **body.validated_data
            )
        except WebhookDeleted as deleted:
            raise Conflict(str(deleted)) from None
        return Response(WebhookSerializer(webhook).data)

    def destroy(self, request, *args, **kwargs):
        webhook = self.get_object()
        try:
            webhook_delete(tenant=self.tenant, webhook_id=webhook.pk, actor=api_actor(request))
        except WebhookDeleted as deleted:
            raise Conflict(str(deleted)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        parameters=[DeliveryQuerySerializer],
        responses=WebhookDeliverySerializer(many=True),
        summary="The webhook's deliveries, newest first (?status=, ?event=)",
    )
    @action(detail=True, methods=["get"], pagination_class=cursor_page("-created_at"))
    def deliveries(self, request, pk=None):
        webhook = self.get_object()
        query = DeliveryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        deliveries = WebhookDelivery.objects.filter(webhook=webhook, **query.validated_data)
        page = self.paginator.paginate_queryset(deliveries, request, view=self)
        return self.paginator.get_paginated_response(WebhookDeliverySerializer(page, many=True).data)

    @extend_schema(
        request=None,
        responses={202: WebhookDeliverySerializer, **error_responses(409)},
        summary="Send a `ping` event to the webhook now (inactive ones too)",
    )
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        webhook = self.get_object()
        try:
            delivery = webhook_ping(tenant=self.tenant, webhook_id=webhook.pk, actor=api_actor(request))
        except WebhookDeleted as deleted:
            raise Conflict(str(deleted)) from None
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=None,
        responses={200: WebhookSerializer, **error_responses(409)},
        summary="Close the webhook's circuit breaker now: its held deliveries go at once",
    )
    @action(detail=True, methods=["post"], url_path="reset-breaker")
    def reset_breaker(self, request, pk=None):
        webhook = self.get_object()
        try:
            webhook = webhook_breaker_reset(tenant=self.tenant, webhook_id=webhook.pk, actor=api_actor(request))
        except WebhookDeleted as deleted:
            raise Conflict(str(deleted)) from None
        return Response(WebhookSerializer(webhook).data)

    @extend_schema(responses=WebhookChangeSerializer(many=True), summary="Every change to the webhook, newest first")
    @action(detail=True, methods=["get"], pagination_class=cursor_page("-created_at", "-id"))
    def changes(self, request, pk=None):
        webhook = self.get_object()
        page = self.paginator.paginate_queryset(WebhookChange.objects.filter(webhook=webhook), request, view=self)
        return self.paginator.get_paginated_response(WebhookChangeSerializer(page, many=True).data)


@extend_schema_view(
    list=extend_schema(summary="Deliveries of all the tenant's webhooks, newest first"),
    retrieve=extend_schema(
        responses=WebhookDeliveryDetailSerializer, summary="One delivery: its payload, status and every attempt"
    ),
)
class WebhookDeliveryViewSet(TenantScopedMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = WebhookDeliverySerializer
    filterset_class = WebhookDeliveryFilter
    pagination_class = cursor_page("-created_at")
    model = WebhookDelivery

    def tenant_queryset(self):
        return WebhookDelivery.objects.filter(tenant=self.tenant)

    def get_serializer_class(self):
        return WebhookDeliveryDetailSerializer if self.action == "retrieve" else WebhookDeliverySerializer

    def get_queryset(self):
        queryset = super().get_queryset()
        return queryset.prefetch_related("attempt_log") if self.action == "retrieve" else queryset

    def filter_queryset(self, queryset):
        return super().filter_queryset(queryset) if self.action == "list" else queryset

    @extend_schema(
        request=None,
        responses={202: WebhookDeliverySerializer, **error_responses(409)},
        summary="Send the delivery's event again, as a new delivery (same event id)",
    )
    @action(detail=True, methods=["post"])
    def redeliver(self, request, pk=None):
        original = self.get_object()
        try:
            delivery = delivery_redeliver(tenant_id=self.tenant.pk, delivery_id=original.pk, actor=api_actor(request))
        except DeliveryNotRedeliverable as refused:
            raise Conflict(str(refused)) from None
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
