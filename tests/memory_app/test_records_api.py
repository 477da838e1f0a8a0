"""Records: provenance, revisions, deletes that stick, tenants kept apart."""

import pytest

from memory_app.models import Record, RecordRevision
from tests.support.factories import SessionFactory


@pytest.fixture
def sources(api):
    """Two sessions of xiaoming with a message each, as a strategy would cite them."""
    trip = SessionFactory(tenant=api.tenant, name="杭州行", user_id="xiaoming")
    weekend = SessionFactory(tenant=api.tenant, name="周末安排", user_id="xiaoming")
    first = api.post(
        f"/api/v1/sessions/{trip.pk}/messages/", {"role": "user", "content": "我喜欢博物馆"}, format="json"
    ).json()
    second = api.post(
        f"/api/v1/sessions/{weekend.pk}/messages/", {"role": "user", "content": "我很喜欢逛博物馆！"}, format="json"
    ).json()
    return trip, weekend, first, second


def create(api, **body):
    payload = {"user_id": "xiaoming", "type": "profile", "content": "偏好博物馆", **body}
    return api.post("/api/v1/records/", payload, format="json")


def test_a_record_keeps_its_exact_provenance(api, sources):
    trip, _, first, _ = sources
    response = create(
        api,
        source_message_ids=[first["id"]],
        fields={"interest": "museum"},
        confidence=0.9,
        strategy="user-profile",
        strategy_version=3,
    )
    assert response.status_code == 201, response.content
    record = response.json()
    assert record["source_message_ids"] == [first["id"]]
    assert record["source_session_ids"] == [str(trip.pk)]  # the message's session is a source too
    assert (record["strategy"], record["strategy_version"], record["revision"], record["valid"]) == (
        "user-profile",
        3,
        1,
        True,
    )
    assert api.get(f"/api/v1/records/?session={trip.pk}").json()["results"][0]["id"] == record["id"]


def test_a_restatement_merges_and_extends_provenance(api, sources):
    _, weekend, first, second = sources
    original = create(api, content="Prefers museums.", source_message_ids=[first["id"]], confidence=0.6).json()
    again = create(api, content="prefers  MUSEUMS", source_message_ids=[second["id"]], confidence=0.8)
    assert again.status_code == 200
    merged = again.json()
    assert merged["id"] == original["id"]
    assert merged["source_message_ids"] == sorted([first["id"], second["id"]])
    assert str(weekend.pk) in merged["source_session_ids"]
    assert (merged["confidence"], merged["revision"]) == (0.8, 2)
    assert Record.objects.count() == 1
    # A similar but different fact is not merged.
    assert create(api, content="Prefers art museums.").status_code == 201
    # Nor is the same text of another type or another user.
    assert create(api, content="Prefers museums.", type="fact").status_code == 201
    assert create(api, content="Prefers museums.", user_id="someone-else").status_code == 201


def test_every_change_is_a_revision_and_delete_sticks(api, sources):
    _, _, first, second = sources
    record = create(api, source_message_ids=[first["id"]]).json()
    changed = api.patch(
        f"/api/v1/records/{record['id']}/",
        {"content": "偏好历史博物馆", "source_message_ids": [second["id"]]},
        format="json",
    )
    assert changed.status_code == 200
    assert changed.json()["revision"] == 2
    assert api.delete(f"/api/v1/records/{record['id']}/").status_code == 204

    assert api.get("/api/v1/records/?user_id=xiaoming").json()["results"] == []  # not listed (nor recalled)
    kept = api.get(f"/api/v1/records/{record['id']}/").json()
    assert (kept["valid"], kept["invalidated_reason"]) == (False, "deleted")
    assert [r["id"] for r in api.get("/api/v1/records/?valid=false").json()["results"]] == [record["id"]]
    history = api.get(f"/api/v1/records/{record['id']}/history/").json()["results"]
    assert [(h["revision"], h["change"]) for h in history] == [(3, "delete"), (2, "update"), (1, "create")]
    assert history[2]["content"] == "偏好博物馆"
    assert history[1]["source_message_ids"] == sorted([first["id"], second["id"]])
    # A deleted record takes no more changes, and deleting again says so.
    assert api.patch(f"/api/v1/records/{record['id']}/", {"content": "x"}, format="json").status_code == 409
    assert api.delete(f"/api/v1/records/{record['id']}/").status_code == 409
    assert RecordRevision.objects.filter(record_id=record["id"]).count() == 3


def test_filters_and_keyword_search(api):
    create(api, content="偏好博物馆")
    create(api, type="task", content="杭州行程草稿已完成第一天", fields={"stage": "draft"})
    create(api, type="fact", content="The Hangzhou museum is closed on Mondays", user_id="alice")

    def contents(query):
        response = api.get("/api/v1/records/" + query)
        assert response.status_code == 200, response.content
        return sorted(r["content"] for r in response.json()["results"])

    assert contents("?user_id=xiaoming") == ["偏好博物馆", "杭州行程草稿已完成第一天"]
    assert contents("?type=task") == ["杭州行程草稿已完成第一天"]
    assert contents("?type=profile&type=fact") == ["The Hangzhou museum is closed on Mondays", "偏好博物馆"]
    assert contents("?q=博物馆") == ["偏好博物馆"]
    assert contents("?q=museums") == ["The Hangzhou museum is closed on Mondays"]


def test_tenants_never_see_or_touch_each_others_records(api, other_api, sources):
    _, _, first, _ = sources
    record = create(api, source_message_ids=[first["id"]]).json()
    assert other_api.get(f"/api/v1/records/{record['id']}/").status_code == 404
    assert other_api.get(f"/api/v1/records/{record['id']}/history/").status_code == 404
    assert other_api.patch(f"/api/v1/records/{record['id']}/", {"content": "x"}, format="json").status_code == 404
    assert other_api.delete(f"/api/v1/records/{record['id']}/").status_code == 404
    assert other_api.get("/api/v1/records/").json()["results"] == []
    # Citing another tenant's message is refused, and writes nothing.
    response = other_api.post(
        "/api/v1/records/",
        {"user_id": "u", "type": "fact", "content": "stolen", "source_message_ids": [first["id"]]},
        format="json",
    )
    assert response.status_code == 400
    assert "source_message_ids" in response.json()["errors"]
    assert Record.objects.filter(content="stolen").count() == 0
    assert api.get(f"/api/v1/records/{record['id']}/").json()["valid"] is True


@pytest.mark.parametrize(
    "body,field",
    [
        ({"type": "opinion"}, "type"),
        ({"content": ""}, "content"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": "high"}, "confidence"),
        ({"fields": ["a"]}, "fields"),
        ({"source_message_ids": ["not-a-uuid"]}, "source_message_ids.0"),
        ({"source_session_ids": ["00000000-0000-0000-0000-000000000000"]}, "source_session_ids"),
        ({"valid_from": "2026-02-01T00:00:00Z", "valid_until": "2026-01-01T00:00:00Z"}, "valid_until"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_records_are_refused(api, body, field):
    response = create(api, **body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()
    assert Record.objects.count() == 0


def test_a_near_identical_restatement_merges_but_a_similar_different_fact_does_not(api, settings):
    settings.ACE_DEDUP_SIMILARITY = 0.92
    first = create(api, type="fact", content="Xiaoming prefers museums on quiet weekdays").json()
    merged = create(api, type="fact", content="Xiaoming prefers museum on quiet weekday")
    assert merged.status_code == 200  # the same fact (the hash embedder stems: cosine 1.0)
    assert merged.json()["id"] == first["id"]
    history = api.get(f"/api/v1/records/{first['id']}/history/").json()["results"]
    assert history[0]["change"] == "merge" and "cosine similarity" in history[0]["reason"]

    art = create(api, type="fact", content="Xiaoming prefers art museums").json()
    science = create(api, type="fact", content="Xiaoming prefers science museums")
    assert science.status_code == 201  # similar (cosine ~0.57) but a different fact
    assert science.json()["id"] != art["id"]
    settings.ACE_DEDUP_SIMILARITY = 0.5  # the threshold is a setting
    assert create(api, type="fact", content="Xiaoming prefers history museums").status_code == 200


def test_a_changed_number_is_a_new_fact_and_a_restatement_keeps_the_newest_wording(api, settings):
    settings.ACE_DEDUP_SIMILARITY = 0.5
    first = create(api, type="task", content="Trip budget is 5000 CNY").json()
    other = create(api, type="task", content="Trip budget is 3000 CNY")
    assert other.status_code == 201 and other.json()["id"] != first["id"]  # close in meaning, different numbers
    again = create(api, type="task", content="The trip budget is 5000 CNY!")
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert again.json()["content"] == "The trip budget is 5000 CNY!"
    history = api.get(f"/api/v1/records/{first['id']}/history/").json()["results"]
    assert history[-1]["content"] == "Trip budget is 5000 CNY"  # the earlier wording stays in the history


def test_malformed_record_ids_are_404_not_500(api):
    for url in ("/api/v1/records/nope/", "/api/v1/records/nope/history/"):
        assert api.get(url).status_code == 404, url
    assert api.delete("/api/v1/records/nope/").status_code == 404
