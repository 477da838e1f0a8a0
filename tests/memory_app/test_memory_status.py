"""The memory backlog is visible: GET /api/v1/memory/status/, the admin's memory status page, and recall
answers that say when the user's rows are not all indexed yet."""

import pytest

from memory_app.embeddings import message_embeddings_reset, messages_embed, records_embed
from memory_app.models import Record
from sessions_app.search import INLINE_CHARS, messages_index
from tests.support.api import make_client, post_messages

pytestmark = pytest.mark.django_db


def open_session(api, user_id="xiaoming"):
    response = api.post("/api/v1/sessions/", {"name": "s", "user_id": user_id, "tool": "chat"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def post(api, session_id, items) -> list[int]:
    return [m["id"] for m in post_messages(api, session_id, items)]


def status(api, **query):
    response = api.get("/api/v1/memory/status/", query)
    assert response.status_code == 200, response.content
    return response.json()


def pending(body):
    return (body["pending_message_vectors"], body["pending_record_vectors"], body["pending_search_index"])


CONVERSATION = [
    {"role": "user", "content": "Planning a trip to Hangzhou in May"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "t1", "name": "Search", "arguments": {}}]},
    {"role": "toolResult", "tool_name": "Search", "content": "West Lake opening hours"},
    {"role": "assistant", "content": "West Lake is best early in the morning."},
    {"role": "user", "content": "   "},
]


def test_the_status_counts_what_waits_and_drops_to_zero_once_it_is_indexed(api, other_api):
    empty = status(api)
    assert pending(empty) == (0, 0, 0) and empty["complete"] is True and empty["oldest_pending_seconds"] == 0
    assert empty["embedder"]["provider"] == "hash" and empty["embedder"]["key"].startswith("hash")
    assert empty["embedder"]["embedded_roles"] == ["user", "assistant"]

    session = open_session(api)
    ids = post(api, session, CONVERSATION)  # the user's and the assistant's text: 2 (not the tool's, not blanks)
    long_id = post(api, session, [{"role": "assistant", "content": "A long answer. " * (INLINE_CHARS // 10)}])[0]
    record = api.post(
        "/api/v1/records/", {"user_id": "xiaoming", "type": "task", "content": "Trip to Hangzhou in May"}, format="json"
    ).json()["id"]
    assert pending(status(api)) == (3, 0, 1)  # a record is embedded as it is written (to find restatements)...
    api.patch(f"/api/v1/records/{record}/", {"content": "Trip to Hangzhou in early May"}, format="json")
    body = status(api)
    assert pending(body) == (3, 1, 1)  # ...and again after its text changes, by a worker
    assert body["complete"] is False and body["oldest_pending_seconds"] > 0
    assert "3 messages without a vector yet" in body["detail"] and "1 long message" in body["detail"]
    assert pending(status(other_api)) == (0, 0, 0)  # another tenant's backlog is not this one's
    assert pending(status(api, user_id="someone-else")) == (0, 0, 0)
    assert pending(status(api, user_id="xiaoming")) == (3, 1, 1)

    assert messages_embed(message_ids=ids) == 2
    assert pending(status(api)) == (1, 1, 1)
    messages_embed(message_ids=[long_id])
    records_embed(record_ids=[record])
    messages_index([long_id])
    done = status(api)
    assert pending(done) == (0, 0, 0) and done["complete"] is True and done["detail"] == ""


def test_a_message_whose_text_changes_after_it_was_counted_waits_again(api, django_capture_on_commit_callbacks):
    """The count keeps a watermark per session; a message completed later (an import's streamed response, a
    chat turn) must be counted again, not hidden behind it."""
    session = open_session(api)
    ids = post(api, session, [{"role": "user", "content": "first"}, {"role": "assistant", "content": "second"}])
    messages_embed(message_ids=ids)
    assert pending(status(api)) == (0, 0, 0)  # the watermark is now past both
    message_embeddings_reset(message_ids=[ids[0]])  # an import completed the first message in place
    assert pending(status(api))[0] == 1
    messages_embed(message_ids=ids)

    turn = api.post(f"/api/v1/sessions/{session}/turns/", {"content": "Where should we eat?"}, format="json").json()
    messages_embed(message_ids=[turn["user_message"]["id"]])
    assert pending(status(api))[0] == 0  # the assistant placeholder has no text yet
    with django_capture_on_commit_callbacks(execute=True):  # turn_completed is sent after the commit
        completed = api.post(
            f"/api/v1/turns/{turn['turn']}/complete/",
            {
                "content": "Try Lou Wai Lou by the lake.",
                "model": "qwen",
                "finish_reason": "stop",
                "input_tokens": 10,
                "output_tokens": 8,
                "elapsed_ms": 900,
            },
            format="json",
        )
    assert completed.status_code == 200, completed.content
    assert pending(status(api))[0] == 1  # the answer's text waits for its vector


def test_a_new_embedder_makes_everything_wait_again_and_deleted_sessions_never_count(api, settings):
    session, gone = open_session(api), open_session(api)
    messages_embed(
        message_ids=post(api, session, [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
    )
    post(api, gone, [{"role": "user", "content": "never embedded"}])
    assert pending(status(api))[0] == 1
    assert api.delete(f"/api/v1/sessions/{gone}/").status_code == 204
    assert pending(status(api))[0] == 0

    settings.ACE_EMBEDDER_DIMENSIONS = 64  # another vector space: the old vectors do not count
    body = status(api)
    assert body["embedder"]["dimensions"] == 64 and pending(body)[0] == 2


def test_recall_says_when_the_users_rows_are_not_all_indexed(api):
    session = open_session(api)
    ids = post(api, session, [{"role": "user", "content": "We love the tea fields of Longjing"}])
    ask = {"query": "tea fields", "user_id": "xiaoming"}
    body = api.post("/api/v1/recall/", ask, format="json").json()
    assert body["complete"] is False
    assert body["pending"] == {"message_vectors": 1, "record_vectors": 0, "search_index": 0}
    assert "1 message without a vector yet" in body["detail"]
    assert [hit["id"] for hit in body["results"]] == ids  # found by keyword meanwhile

    records_only = api.post("/api/v1/recall/", {**ask, "include_messages": False}, format="json").json()
    assert records_only["complete"] is True and records_only["detail"] == ""  # messages were not searched

    messages_embed(message_ids=ids)
    body = api.post("/api/v1/recall/", ask, format="json").json()
    assert (body["complete"], body["detail"]) == (True, "")
    assert body["pending"] == {"message_vectors": 0, "record_vectors": 0, "search_index": 0}


def test_the_status_rejects_a_bad_user_id_and_needs_a_key(api, client):
    assert api.get("/api/v1/memory/status/", {"user_id": "x" * 300}).status_code == 400
    assert client.get("/api/v1/memory/status/").status_code == 401


def test_the_admin_shows_the_memory_status_per_tenant(staff, api, other_api):
    post(api, open_session(api), [{"role": "user", "content": "waiting for a vector"}])
    index = staff.get("/admin/").content.decode()
    assert "/admin/memory_app/record/status/" in index and "Memory status" in index
    page = staff.get("/admin/memory_app/record/status/").content.decode()
    assert "acme" in page and "globex" in page and "1 message without a vector yet" in page
    one = staff.get("/admin/memory_app/record/status/", {"tenant": str(other_api.tenant.pk)}).content.decode()
    assert "globex" in one and "1 message without a vector yet" not in one


def test_a_worker_drains_the_backlog_the_status_shows(burst):
    api = make_client("status-worker")
    session = open_session(api)
    post(api, session, [{"role": "user", "content": f"message {n}"} for n in range(40)])
    api.post("/api/v1/records/", {"user_id": "xiaoming", "type": "fact", "content": "Likes tea"}, format="json")
    burst()
    assert status(api)["complete"]
    assert Record.objects.filter(tenant=api.tenant).exclude(embedding_key="").count() == 1


def test_the_periodic_sweep_reads_each_sessions_history_so_requests_only_read_tails(api):
    from memory_app.models import SessionEmbeddingProgress
    from memory_app.selectors.status import embedding_progress_refresh

    session = open_session(api)
    ids = post(api, session, [{"role": "user", "content": f"line {n}"} for n in range(10)])
    messages_embed(message_ids=ids[:6])
    assert embedding_progress_refresh() == 4  # what the sweep (tasks.embed_pending) runs, for every tenant
    assert SessionEmbeddingProgress.objects.get(session_id=session).embedded_through_seq == 6
    messages_embed(message_ids=ids[6:])
    assert pending(status(api, user_id="xiaoming"))[0] == 0
    assert SessionEmbeddingProgress.objects.get(session_id=session).embedded_through_seq == 10
