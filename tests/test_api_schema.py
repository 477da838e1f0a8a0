"""What the OpenAPI schema promises beyond the fuzzer's reach, and the output rules it relies on."""

from datetime import UTC, datetime

import yaml

from sessions_app.models import Session
from tests.support.api import make_client


def served_schema(client) -> dict:
    response = client.get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def test_every_operation_documents_its_errors_with_the_error_shape(client, db):
    schema = served_schema(client)
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail", "errors"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            codes = set(operation["responses"])
            assert "401" in codes, (method, path)
            outage = operation["responses"]["503"]  # the database unreachable: retry later
            assert outage["headers"]["Retry-After"]["schema"]["type"] == "integer", (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)
            if "requestBody" in operation:
                assert {"400", "413"} <= codes, (method, path)
            for code in codes - {"200", "201", "202", "204"}:
                body = operation["responses"][code]["content"]["application/json"]["schema"]
                assert body == {"$ref": "#/components/schemas/Error"}, (method, path, code)
    state = schema["paths"]["/api/v1/sessions/{id}/state/"]
    assert "412" in state["patch"]["responses"] and "412" in state["put"]["responses"]
    assert "409" in schema["paths"]["/api/v1/turns/{id}/complete/"]["post"]["responses"]
    assert "put" not in schema["paths"]["/api/v1/sessions/{id}/"]  # it answers 405: use PATCH


def test_schema_states_page_size_bounds_and_closed_bodies(client, db, settings):
    schema = served_schema(client)
    page_size = next(p for p in schema["paths"]["/api/v1/sessions/"]["get"]["parameters"] if p["name"] == "page_size")
    assert page_size["schema"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": settings.ACE_MAX_PAGE_SIZE,
        "default": 100,
    }
    components = schema["components"]["schemas"]
    for name in ("SessionRequest", "MessageInRequest", "StrategyWriteRequest", "RunRequestRequest"):
        assert components[name]["additionalProperties"] is False, name
    versions = schema["paths"]["/api/v1/strategies/{id}/versions/"]["get"]["responses"]["200"]
    assert versions["content"]["application/json"]["schema"]["$ref"].endswith("PaginatedStrategyVersionList")
    assert components["Strategy"]["properties"]["periodic_task"]["nullable"] is True


def test_a_strategy_with_an_unknown_field_is_refused(db):
    api = make_client("acme")
    response = api.post(
        "/api/v1/strategies/",
        {"name": "notes", "type": "fact", "prompt": "Extract facts.\n{messages}", "colour": "red"},
        format="json",
    )
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["colour"]


def test_a_year_before_1000_is_written_with_four_digits(db):
    # The API refuses such a time, but rows written otherwise (an old import) may hold one.
    api = make_client("acme")
    session = Session.objects.create(tenant=api.tenant, user_id="u", tool="chat")
    ancient = datetime(92, 7, 2, 14, 10, 45, tzinfo=UTC)
    Session.objects.filter(pk=session.pk).update(started_at=ancient)
    body = api.get(f"/api/v1/sessions/{session.pk}/").json()
    assert body["started_at"] == "0092-07-02T14:10:45.000000Z"
    assert body["created_at"].endswith("Z") and len(body["created_at"]) == len("2026-01-02T03:04:05.000000Z")
    refused = api.patch(f"/api/v1/sessions/{session.pk}/", {"started_at": "0092-07-02T14:10:45Z"}, format="json")
    assert refused.status_code == 400
    assert "1000-01-01" in refused.json()["errors"]["started_at"][0]


def test_operations_are_grouped_by_area_and_every_group_is_described(client, db):
    schema = served_schema(client)
    described = {tag["name"]: tag.get("description", "") for tag in schema["tags"]}
    used = {}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method in ("get", "post", "put", "patch", "delete"):
                assert operation["tags"] and operation["tags"] != ["v1"], (method, path)
                for tag in operation["tags"]:
                    used.setdefault(tag, []).append(f"{method} {path}")
    assert set(used) == set(described)  # every group in use is described, and none is listed empty
    assert all(len(described[tag]) > 20 for tag in used)
    assert len(used) >= 12 and max(len(ops) for ops in used.values()) < 20
    tag_of = {path: operations["get"]["tags"][0] for path, operations in schema["paths"].items() if "get" in operations}
    assert tag_of["/api/v1/sessions/{id}/messages/"] == tag_of["/api/v1/messages/"] == "Messages"
    assert tag_of["/api/v1/sessions/{id}/stats/"] == tag_of["/api/v1/stats/"] == "Statistics"
    assert tag_of["/api/v1/records/export/"] == "Portability" and tag_of["/api/v1/records/"] == "Records"
    assert schema["paths"]["/api/v1/budgets/"]["post"]["tags"] == ["Budgets"]
