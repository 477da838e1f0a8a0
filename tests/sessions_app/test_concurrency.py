"""Counts stay exact when many writers append to the same session at once."""

import threading

import pytest
from django.db import connection

from sessions_app.models import Conversation, Message
from tests.support.api import make_client
from tests.support.factories import SessionFactory

WRITERS = 8
BATCHES_PER_WRITER = 5


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_to_one_session_keep_exact_counts():
    api = make_client("concurrency")
    session = SessionFactory(tenant=api.tenant, user_id="u")
    errors = []
    start = threading.Barrier(WRITERS)

    def writer(number):
        client = make_client("concurrency")
        try:
            start.wait()
            for batch in range(BATCHES_PER_WRITER):
                body = [
                    {"role": "user", "content": f"w{number} b{batch} question"},
                    {
                        "role": "assistant",
                        "content": "thinking",
                        "request_id": f"w{number}-b{batch}",
                        "input_tokens": 10,
                        "output_tokens": 1,
                    },
                    {
                        "role": "assistant",
                        "content": "answer",
                        "request_id": f"w{number}-b{batch}",
                        "input_tokens": 10,
                        "output_tokens": 5,
                    },
                    {"role": "toolResult", "content": "{}", "auth_type": "oauth"},
                    # Every writer also re-sends one shared idempotent message.
                    {"role": "system", "content": "shared", "external_id": "shared-1"},
                ]
                response = client.post(f"/api/v1/sessions/{session.pk}/messages/", body, format="json")
                if response.status_code not in (200, 201):
                    errors.append(response.content)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    rounds = WRITERS * BATCHES_PER_WRITER
    session.refresh_from_db()
    stored = Message.objects.filter(session=session)
    assert stored.count() == rounds * 4 + 1
    assert session.messages == rounds * 4 + 1
    assert sorted(stored.values_list("seq", flat=True)) == list(range(1, rounds * 4 + 2))
    assert session.last_seq == rounds * 4 + 1
    assert session.conversations == rounds == Conversation.objects.filter(session=session).count()
    assert session.requests == rounds * 2  # one per request_id + one per auth_type tool result
    assert (session.input_tokens, session.output_tokens) == (rounds * 10, rounds * 5)
    assert (session.message_user, session.message_assistant, session.message_toolresult) == (rounds, rounds * 2, rounds)
    assert session.message_system == 1
    ordinals = sorted(Conversation.objects.filter(session=session).values_list("ordinal", flat=True))
    assert ordinals == list(range(1, rounds + 1))
    assert sum(Conversation.objects.filter(session=session).values_list("messages", flat=True)) == rounds * 4 + 1

    grouped = api.get("/api/v1/stats/?group_by=day").json()["totals"]
    assert grouped["messages"] == session.messages
    assert grouped["requests"] == session.requests
    assert grouped["conversations"] == session.conversations
    from sessions_app.selectors.recount import session_count_drift

    assert session_count_drift(session=session) == {}


@pytest.mark.django_db(transaction=True)
def test_recount_from_messages_agrees_with_the_maintained_counters():
    from django.core.management import call_command

    from sessions_app.selectors.recount import session_count_drift

    api = make_client("recount")
    session = SessionFactory(tenant=api.tenant, user_id="u")
    api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "request_id": "r1", "input_tokens": 3, "output_tokens": 1},
            {"role": "assistant", "content": "b", "request_id": "r1", "input_tokens": 3, "output_tokens": 9},
            {"role": "toolResult", "content": "{}", "auth_type": "k", "input_tokens": 2},
            {"role": "system", "content": "s", "output_tokens": 4},
        ],
        format="json",
    )
    session.refresh_from_db()
    assert session_count_drift(session=session) == {}
    call_command("ace_recount", "--tenant", "recount")

    # A counter changed behind the service's back is reported, and the command fails.
    type(session).objects.filter(pk=session.pk).update(output_tokens=0)
    session.refresh_from_db()
    assert session_count_drift(session=session) == {"output_tokens": (0, 13)}
    with pytest.raises(SystemExit):
        call_command("ace_recount", "--session", str(session.pk))
