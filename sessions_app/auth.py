"""The API keys of `sessions_app.services.apikeys` as DRF authentication (the header is the kit's)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from platform_kit.api.auth import BearerKeyAuthentication
from sessions_app.services.apikeys import apikey_authenticate, apikey_recently_accepted


class ApiKeyAuthentication(BearerKeyAuthentication):
    def tenant_for_key(self, key: str):
        api_key = apikey_authenticate(plain_key=key)
        return None if api_key is None else (api_key.tenant, api_key)

    def key_recently_accepted(self, key: str) -> bool:
        return apikey_recently_accepted(plain_key=key)


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = ApiKeyAuthentication
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An Open ACE API key (ace_…)"}
