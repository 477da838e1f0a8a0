"""`Authorization: Bearer <api key>`: every API request acts for exactly one tenant."""

from dataclasses import dataclass

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from sessions_app.models import Tenant
from sessions_app.services.apikeys import apikey_authenticate


@dataclass(frozen=True)
class TenantPrincipal:
    """request.user for API calls: the tenant the key belongs to."""

    tenant: Tenant
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_staff: bool = False

    def __str__(self):
        return f"tenant:{self.tenant.name}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").strip()
        if not header:
            return None
        scheme, _, key = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not key.strip():
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <api key>'.")
        api_key = apikey_authenticate(plain_key=key.strip())
        if api_key is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        return TenantPrincipal(tenant=api_key.tenant), api_key

    def authenticate_header(self, request):
        # Makes DRF answer 401 (with WWW-Authenticate), not 403, when the key is missing or wrong.
        return self.keyword


class HasTenant(permissions.BasePermission):
    message = "Send an API key: 'Authorization: Bearer <api key>'."

    def has_permission(self, request, view):
        return isinstance(request.user, TenantPrincipal)


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = ApiKeyAuthentication
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An Open ACE API key (ace_…)"}
