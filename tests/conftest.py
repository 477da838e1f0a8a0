import pytest
from rest_framework.test import APIClient

from sessions_app.models import Tenant
from tests.factories import SessionFactory, api_key_for


class TenantClient(APIClient):
    """An API client that acts for one tenant."""

    def __init__(self, tenant: Tenant, key: str):
        super().__init__()
        self.tenant = tenant
        self.key = key
        self.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")


def make_client(name: str) -> TenantClient:
    key = api_key_for(name)
    return TenantClient(Tenant.objects.get(name=name), key)


@pytest.fixture
def api(db) -> TenantClient:
    return make_client("acme")


@pytest.fixture
def other_api(db) -> TenantClient:
    return make_client("globex")


@pytest.fixture
def session(api):
    return SessionFactory(tenant=api.tenant, name="杭州三日游计划", tool="chat", user_id="xiaoming")
