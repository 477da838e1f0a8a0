"""`Authorization: Bearer <api key>`: every API request acts for exactly one tenant.

The kit parses the header and answers 401 the same way everywhere; which keys exist and which tenant each
belongs to is the tenancy's business (`sessions_app.auth.ApiKeyAuthentication` implements `tenant_for_key`).
"""

from dataclasses import dataclass

from rest_framework import authentication, exceptions, permissions

from platform_kit.auth_throttle import api_key_blocked, api_key_failed, client_address


class KeysThrottled(exceptions.Throttled):
    """429 with Retry-After: too many unknown keys from this address (platform_kit.auth_throttle)."""

    def __init__(self, wait: int):
        super().__init__(
            wait=wait,
            detail=f"Too many unknown API keys from this address: try again in {wait} s (Retry-After).",
        )


@dataclass(frozen=True)
class TenantPrincipal:
    """request.user for API calls: the tenant the key belongs to."""

    tenant: object
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_staff: bool = False

    def __str__(self):
        return f"tenant:{self.tenant.name}"


class BearerKeyAuthentication(authentication.BaseAuthentication):
    """Reads the key from the Authorization header; `tenant_for_key` says whose it is."""

    keyword = "Bearer"

    def tenant_for_key(self, key: str) -> tuple[object, object] | None:
        """(tenant, what request.auth should hold) for a valid key, None for an unknown or revoked one."""
        raise NotImplementedError

    def key_recently_accepted(self, key: str) -> bool:
        """Whether this process accepted `key` a moment ago: it is still checked while its address is throttled."""
        return False

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").strip()
        if not header:
            return None
        scheme, _, key = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not key.strip():
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <api key>'.")
        key, address = key.strip(), client_address(request)
        wait = api_key_blocked(address)
        if wait is not None and not self.key_recently_accepted(key):
            raise KeysThrottled(wait)
        found = self.tenant_for_key(key)
        if found is None:
            wait = api_key_failed(address)
            if wait is not None:
                raise KeysThrottled(wait)
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        tenant, auth = found
        return TenantPrincipal(tenant=tenant), auth

    def authenticate_header(self, request):
        # Makes DRF answer 401 (with WWW-Authenticate), not 403, when the key is missing or wrong.
        return self.keyword


class HasTenant(permissions.BasePermission):
    message = "Send an API key: 'Authorization: Bearer <api key>'."

    def has_permission(self, request, view):
        return isinstance(request.user, TenantPrincipal)
