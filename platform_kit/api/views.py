"""What every API view of a tenant's data shares."""


class TenantScopedMixin:
    """Every queryset is the tenant's own: another tenant's id is simply not found (404)."""

    # A view sets `model` and defines `tenant_queryset()`: its rows of `self.tenant`, the tenant of the
    # request's API key (platform_kit.api.auth). The docstring above is in the OpenAPI schema of every view.

    @property
    def tenant(self):
        return self.request.user.tenant

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular building the schema
            return self.model.objects.none()
        return self.tenant_queryset()
