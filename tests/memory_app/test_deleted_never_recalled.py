"""A deleted session, message or record is never recalled, by keyword or by vector; memories that only a deleted
session supported go with it, and no record cites a message its owner can no longer read."""

import pytest

from memory_app.embeddings import messages_embed, records_embed
from memory_app.models import MessageEmbedding, Record
from sessions_app.models import Message

pytestmark = pytest.mark.django_db


def open_session(api, name="trip", user_id="xiaoming"):
    response = api.post("/api/v1/sessions/", {"name": name, "user_id": user_id, "tool": "chat"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def post_messages(api, session_id, *contents):
    items = [{"role": "user", "content": text} for text in contents]
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", items, format="json")
    assert response.status_code == 201, response.content
    ids = [m["id"] for m in response.json()]
    messages_embed(message_ids=ids)  # what the worker does after the commit
    return ids


def remember(api, content, message_ids, user_id="xiaoming"):
    body = {"user_id": user_id, "type": "profile", "content": content, "source_message_ids": message_ids}
    response = api.post("/api/v1/records/", body, format="json")
    assert response.status_code == 201, response.content
    records_embed(record_ids=[response.json()["id"]])
    return response.json()["id"]


def recall(api, query, **body):
    response = api.post("/api/v1/recall/", {"query": query, "user_id": "xiaoming", **body}, format="json")
    assert response.status_code == 200, response.content
    return {hit["id"]: hit for hit in response.json()["results"]}


def visible(hits) -> set:
    """Every id a recall answer shows: its hits, and the neighbouring messages a hit may bring as context."""
    return set(hits) | {neighbour["id"] for hit in hits.values() for neighbour in hit.get("context") or []}


def test_a_deleted_sessions_messages_and_the_memories_only_it_supported_are_never_recalled(api):
    session = open_session(api)
    (museum,) = post_messages(api, session, "I love the Palace Museum in Beijing")
    record = remember(api, "Loves the Palace Museum", [museum])
    before = recall(api, "Palace Museum Beijing")
    assert set(before[museum]["matched_by"]) == {"keyword", "vector"}  # both sides find it while it lives
    assert set(before[record]["matched_by"]) == {"keyword", "vector"}

    assert api.delete(f"/api/v1/sessions/{session}/").status_code == 204

    after = recall(api, "Palace Museum Beijing")
    assert museum not in visible(after) and record not in after
    # Not only keyword-filtered: no vector of the session is left for the vector side to find.
    assert not MessageEmbedding.objects.filter(message_id=museum).exists()
    shown = api.get(f"/api/v1/records/{record}/").json()
    assert (shown["valid"], shown["source_message_ids"]) == (False, [museum])  # kept for audit, not recalled
    history = api.get(f"/api/v1/records/{record}/history/").json()["results"]
    assert (history[0]["change"], history[0]["reason"]) == ("invalidate", "its source session was deleted")
    assert api.get(f"/api/v1/messages/{museum}/").status_code == 404
    # Recall scoped to the deleted session finds nothing either.
    assert recall(api, "Palace Museum", session=session) == {}


def test_a_record_with_another_live_source_stays_and_stops_citing_the_deleted_session(api):
    kept_session, gone_session = open_session(api, "kept"), open_session(api, "gone")
    (kept,) = post_messages(api, kept_session, "We went hiking in the Yellow Mountains")
    (gone,) = post_messages(api, gone_session, "Hiking in the Yellow Mountains again next spring")
    record = remember(api, "Likes hiking in the Yellow Mountains", [kept, gone])

    assert api.delete(f"/api/v1/sessions/{gone_session}/").status_code == 204

    hits = recall(api, "hiking Yellow Mountains")
    assert gone not in visible(hits) and kept in visible(hits)  # the deleted session's message is gone from both sides
    if record in hits:  # whether the record outranks the messages is recall's business; what it cites is not
        assert (hits[record]["source_message_ids"], hits[record]["session"]) == ([kept], kept_session)
    shown = api.get(f"/api/v1/records/{record}/").json()
    assert (shown["valid"], shown["source_session_ids"], shown["source_message_ids"]) == (True, [kept_session], [kept])
    # The revision before the change still names both sources, for audit.
    history = api.get(f"/api/v1/records/{record}/history/").json()["results"]
    assert history[0]["reason"] == "its source session was deleted"
    assert sorted(history[1]["source_message_ids"]) == sorted([kept, gone])


def test_a_message_embedded_while_its_session_is_deleted_gets_no_vector(api):
    session = open_session(api)
    items = [{"role": "user", "content": "Booked a flight to Chengdu"}]
    response = api.post(f"/api/v1/sessions/{session}/messages/", items, format="json")
    (message,) = [m["id"] for m in response.json()]
    assert api.delete(f"/api/v1/sessions/{session}/").status_code == 204
    assert messages_embed(message_ids=[message]) == 0  # the queued task runs after the deletion
    assert not MessageEmbedding.objects.filter(message_id=message).exists()
    assert visible(recall(api, "flight to Chengdu")) == set()


def test_a_deleted_sessions_messages_cannot_be_cited_by_a_new_record(api):
    session = open_session(api)
    (message,) = post_messages(api, session, "My sister lives in Xiamen")
    assert api.delete(f"/api/v1/sessions/{session}/").status_code == 204
    body = {"user_id": "xiaoming", "type": "fact", "content": "Sister lives in Xiamen", "source_message_ids": [message]}
    response = api.post("/api/v1/records/", body, format="json")
    assert response.status_code == 400
    assert "source_message_ids" in response.json()["errors"]
    body = {**body, "source_message_ids": [], "source_session_ids": [session]}
    assert "source_session_ids" in api.post("/api/v1/records/", body, format="json").json()["errors"]


def test_a_deleted_record_is_never_recalled_by_keyword_or_vector(api):
    session = open_session(api)
    (message,) = post_messages(api, session, "Allergic to peanuts")
    record = remember(api, "Has a peanut allergy", [message])
    assert set(recall(api, "peanut allergy", include_messages=False)[record]["matched_by"]) == {"keyword", "vector"}

    assert api.delete(f"/api/v1/records/{record}/").status_code == 204

    assert record not in recall(api, "peanut allergy")
    assert record not in recall(api, "Has a peanut allergy", include_messages=False)
    assert Record.objects.get(pk=record).embedding is not None  # the vector stays; `valid` keeps it out
    assert message in recall(api, "peanut allergy")  # the message it came from is the user's own, still there


def test_a_removed_message_is_never_recalled_nor_cited(api):
    """Messages are append-only through the API (a message goes when its session is deleted); a message
    removed from the database anyway (an operator's purge) takes its vector and its citations with it."""
    session = open_session(api)
    first, second = post_messages(api, session, "Our cat is called Mochi", "Mochi is a ginger cat")
    record = remember(api, "Has a ginger cat called Mochi", [first, second])
    assert {first, second} <= visible(recall(api, "cat Mochi"))

    Message.objects.filter(pk=first).delete()

    hits = recall(api, "cat Mochi")
    assert first not in visible(hits) and second in visible(hits)
    assert hits.get(record, {"source_message_ids": [second]})["source_message_ids"] == [second]
    assert api.get(f"/api/v1/records/{record}/").json()["source_message_ids"] == [second]
    assert not MessageEmbedding.objects.filter(message_id=first).exists()
