"""The API as the tests call it: a client acting for one tenant (with that tenant's real API key), and the
requests many tests make."""

from __future__ import annotations

import io

from rest_framework.test import APIClient

from sessions_app.models import Tenant
from tests.support.factories import api_key_for


class TenantClient(APIClient):
    """An API client that acts for one tenant."""

    def __init__(self, tenant: Tenant, key: str):
        super().__init__()
        self.tenant = tenant
        self.key = key
        self.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")


def make_client(name: str) -> TenantClient:
    """A client for the tenant `name` (created if new), with a new API key of its own."""
    key = api_key_for(name)
    return TenantClient(Tenant.objects.get(name=name), key)


def post_messages(api: APIClient, session, items: list[dict]) -> list[dict]:
    """Appends `items` to a session (a Session or its id) through the API, which must answer 201; the stored
    messages as the API returned them."""
    session_id = getattr(session, "pk", session)
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", items, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def upload(api: APIClient, *files: tuple[str, bytes], **fields):
    """POST log files to the upload endpoint as a collector does (`files`: (name, bytes) pairs); the response."""
    handles = []
    for name, content in files:
        handle = io.BytesIO(content)
        handle.name = name
        handles.append(handle)
    return api.post("/api/v1/imports/", {"files": handles, **fields}, format="multipart")
