"""Retention of message content: purging what old messages said leaves every counter, roll-up, statistic and
record provenance exactly as it was, and the old text can no longer be found by keyword or by vector."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from memory_app.embeddings import messages_embed
from memory_app.models import MessageEmbedding
from retention_app.models import RetentionRun
from sessions_app.models import Message, Session
from sessions_app.selectors.recount import rollup_drift, session_count_drift
from tests.support.api import post_messages

pytestmark = pytest.mark.django_db

NOW = datetime.now(UTC)
OLD = (NOW - timedelta(days=100)).isoformat()
RECENT = (NOW - timedelta(days=2)).isoformat()


def open_session(api, user_id="xiaoming"):
    response = api.post("/api/v1/sessions/", {"name": "trip", "user_id": user_id, "tool": "chat"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def post(api, session_id, items):
    ids = [m["id"] for m in post_messages(api, session_id, items)]
    messages_embed(message_ids=ids)  # what the worker does after the commit
    return ids


def old_round(created_at, word):
    return [
        {"role": "user", "content": f"Plan a trip to {word} please", "created_at": created_at},
        {
            "role": "assistant",
            "content": f"Here is your {word} itinerary",
            "thinking": f"The user wants {word}",
            "created_at": created_at,
            "auth_type": "api_key",
            "request_id": f"req-{word}",
            "model": "claude-sonnet-4-5",
            "input_tokens": 120,
            "output_tokens": 80,
            "cache_read_tokens": 10,
            "tool_calls": [{"id": "toolu_1", "name": "search", "arguments": {"query": f"{word} hotels"}}],
            "metadata": {"note": f"about {word}", "message_id": "msg_01", "parent_uuid": "u-1"},
        },
        {"role": "toolResult", "content": f"{word} hotel list", "tool_name": "search", "created_at": created_at},
    ]


def observed(api, session_id):
    """Everything the API says about usage: what a purge must leave identical."""
    return {
        "stats": api.get("/api/v1/stats/?group_by=day").json(),
        "by_model": api.get("/api/v1/stats/?group_by=model").json(),
        "session": api.get(f"/api/v1/sessions/{session_id}/stats/").json(),
        "conversations": api.get(f"/api/v1/sessions/{session_id}/conversations/").json(),
        "detail": {
            k: v for k, v in api.get(f"/api/v1/sessions/{session_id}/").json().items() if k not in ("updated_at",)
        },
    }


def search(api, session_id, q):
    response = api.get(f"/api/v1/sessions/{session_id}/messages/", {"q": q})
    assert response.status_code == 200
    return [m["id"] for m in response.json()["results"]]


def test_purging_old_content_keeps_every_counter_rollup_and_provenance(api):
    session_id = open_session(api)
    old_ids = post(api, session_id, old_round(OLD, "Hangzhou"))
    new_ids = post(api, session_id, old_round(RECENT, "Suzhou"))
    record = api.post(
        "/api/v1/records/",
        {"user_id": "xiaoming", "type": "fact", "content": "Went to Hangzhou", "source_message_ids": old_ids[:1]},
        format="json",
    ).json()
    before = observed(api, session_id)
    assert search(api, session_id, "Hangzhou") and MessageEmbedding.objects.filter(message_id__in=old_ids).exists()
    new_vectors = MessageEmbedding.objects.filter(message_id__in=new_ids).count()
    assert new_vectors

    assert api.put("/api/v1/retention/", {"message_content_days": 30, "roles": []}, format="json").status_code == 200
    preview = api.get("/api/v1/retention/preview/").json()
    assert preview["messages"]["count"] == 3
    assert preview["messages"]["oldest"][:10] == OLD[:10] and preview["messages"]["newest"][:10] == OLD[:10]
    assert (
        Message.objects.filter(pk__in=old_ids, content_purged_at__isnull=True).count() == 3
    )  # a preview changes nothing

    call_command("ace_retention")

    run = RetentionRun.objects.get(tenant=api.tenant, dry_run=False)
    assert run.messages_purged == preview["messages"]["count"] == 3  # the preview said what the run did
    assert observed(api, session_id) == before  # counters, roll-ups, cost inputs: identical
    session = Session.objects.get(pk=session_id)
    assert session_count_drift(session=session) == {} and rollup_drift(tenant=api.tenant) == {
        k: [] for k in rollup_drift(tenant=api.tenant)
    }

    old = {m["id"]: m for m in api.get(f"/api/v1/sessions/{session_id}/messages/").json()["results"]}
    user, assistant, tool = (old[pk] for pk in old_ids)
    assert user["content"] == assistant["content"] == assistant["thinking"] == tool["content"] == ""
    assert all(old[pk]["content_purged_at"] for pk in old_ids)
    assert assistant["tool_calls"] == [{"id": "toolu_1", "name": "search"}]  # the arguments are gone
    assert assistant["metadata"] == {"message_id": "msg_01", "parent_uuid": "u-1"}  # ids stay, free text goes
    assert (assistant["request_id"], assistant["model"], assistant["input_tokens"]) == (
        "req-Hangzhou",
        "claude-sonnet-4-5",
        120,
    )
    assert tool["tool_name"] == "search" and [old[pk]["seq"] for pk in old_ids] == [1, 2, 3]
    # Neither keyword search nor the vectors find the old text any more; the recent messages are untouched.
    assert search(api, session_id, "Hangzhou") == [] and search(api, session_id, "Suzhou")
    assert not MessageEmbedding.objects.filter(message_id__in=old_ids).exists()
    assert MessageEmbedding.objects.filter(message_id__in=new_ids).count() == new_vectors
    assert old[new_ids[1]]["content"] == "Here is your Suzhou itinerary" and old[new_ids[1]]["thinking"]
    recalled = api.post("/api/v1/recall/", {"query": "Hangzhou itinerary", "user_id": "xiaoming"}, format="json")
    assert not set(old_ids) & {hit["id"] for hit in recalled.json()["results"]}
    # The record still cites the purged message: provenance ids stay valid.
    assert api.get(f"/api/v1/records/{record['id']}/").json()["source_message_ids"] == old_ids[:1]

    # Twice is a no-op.
    call_command("ace_retention")
    second = RetentionRun.objects.filter(tenant=api.tenant, dry_run=False).order_by("-started_at").first()
    assert second.messages_purged == 0 and observed(api, session_id) == before
    assert api.get("/api/v1/retention/preview/").json()["messages"]["count"] == 0


def test_dry_run_changes_nothing_and_is_recorded(api, capsys):
    session_id = open_session(api)
    old_ids = post(api, session_id, old_round(OLD, "Xian"))
    api.put("/api/v1/retention/", {"message_content_days": 30, "roles": []}, format="json")
    call_command("ace_retention", "--dry-run", "--tenant", api.tenant.name)
    assert "would purge the content of 3 messages" in capsys.readouterr().out
    assert Message.objects.filter(pk__in=old_ids, content_purged_at__isnull=True).count() == 3
    runs = api.get("/api/v1/retention/runs/").json()["results"]
    assert [(r["dry_run"], r["messages_purged"]) for r in runs] == [(True, 3)]


def test_a_policy_limited_to_roles_purges_only_those(api):
    session_id = open_session(api)
    user, assistant, tool = post(api, session_id, old_round(OLD, "Lhasa"))
    response = api.patch("/api/v1/retention/", {"message_content_days": 7, "roles": ["toolResult"]}, format="json")
    assert response.status_code == 200 and response.json()["roles"] == ["toolResult"]
    call_command("ace_retention")
    contents = {
        str(pk): text
        for pk, text in Message.objects.filter(pk__in=[user, assistant, tool]).values_list("pk", "content")
    }
    assert contents[tool] == "" and "Lhasa" in contents[user] and "Lhasa" in contents[assistant]


def test_another_tenants_messages_and_policy_are_untouched(api, other_api):
    mine, theirs = open_session(api), open_session(other_api)
    post(api, mine, old_round(OLD, "Chengdu"))
    their_ids = post(other_api, theirs, old_round(OLD, "Chengdu"))
    api.put("/api/v1/retention/", {"message_content_days": 30, "roles": []}, format="json")
    assert other_api.get("/api/v1/retention/").json()["message_content_days"] is None
    assert other_api.get("/api/v1/retention/preview/").json()["messages"]["count"] == 0
    call_command("ace_retention")
    assert Message.objects.filter(pk__in=their_ids, content_purged_at__isnull=True).count() == 3
    assert search(other_api, theirs, "Chengdu")
    assert other_api.get("/api/v1/retention/runs/").json()["results"] == []
    assert other_api.get("/api/v1/retention/events/").json()["results"] == []


@pytest.mark.parametrize(
    "body, field",
    [
        ({"message_content_days": 0, "roles": []}, "message_content_days"),
        ({"message_content_days": 36_501, "roles": []}, "message_content_days"),
        ({"message_content_days": "30", "roles": []}, "message_content_days"),
        ({"message_content_days": 30, "roles": ["robot"]}, "roles.0"),
        ({"message_content_days": 30, "roles": "user"}, "roles"),
        ({"message_content_days": 30}, "roles"),  # PUT replaces: both fields
        ({"message_content_days": 30, "roles": [], "days": 3}, "days"),
    ],
)
def test_bad_policies_are_refused_with_what_to_fix_and_change_nothing(api, body, field):
    response = api.put("/api/v1/retention/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"] and response.json()["detail"]
    assert api.get("/api/v1/retention/").json()["message_content_days"] is None
    assert api.get("/api/v1/retention/events/").json()["results"] == []


def test_every_policy_change_is_audited(api):
    assert api.get("/api/v1/retention/").json() | {"created_at": None, "updated_at": None} == {
        "message_content_days": None,
        "roles": [],
        "content_cutoff": None,
        "created_at": None,
        "updated_at": None,
    }
    api.put("/api/v1/retention/", {"message_content_days": 90, "roles": []}, format="json")
    api.patch("/api/v1/retention/", {"message_content_days": 30}, format="json")
    api.patch("/api/v1/retention/", {"message_content_days": 30}, format="json")  # no change: no entry
    policy = api.get("/api/v1/retention/").json()
    assert (
        policy["message_content_days"] == 30
        and policy["content_cutoff"][:10] == (NOW - timedelta(days=30)).date().isoformat()
    )
    events = api.get("/api/v1/retention/events/").json()["results"]
    assert [
        (e["action"], e["actor"], e["before"]["message_content_days"], e["after"]["message_content_days"])
        for e in events
    ] == [
        ("policy_set", "api", 90, 30),
        ("policy_set", "api", None, 90),
    ]


def test_a_later_version_of_a_purged_message_grows_its_tokens_but_does_not_bring_its_text_back(api):
    # An import completes a stored message in place when its log re-emits it (a rewritten file read again):
    # after a purge, that must not restore what the retention removed.
    from sessions_app.services.messages import messages_append_to_sessions

    session_id = open_session(api)
    item = {**old_round(OLD, "Hangzhou")[1], "external_id": "line-2"}
    post(api, session_id, [item])
    assert api.put("/api/v1/retention/", {"message_content_days": 30, "roles": []}, format="json").status_code == 200
    call_command("ace_retention")

    session = Session.objects.get(pk=session_id)
    later = {**item, "content": "Here is your Hangzhou itinerary, day by day", "output_tokens": 95}
    messages_append_to_sessions(appends=[(session, [later])], amend=True)
    message = Message.objects.get(session_id=session_id, external_id="line-2")
    assert message.content_purged_at is not None
    assert (message.content, message.thinking, message.output_tokens) == ("", "", 95)
    assert search(api, session_id, "Hangzhou") == []
    assert session_count_drift(session=Session.objects.get(pk=session_id)) == {}
