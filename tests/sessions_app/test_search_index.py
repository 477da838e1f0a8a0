"""Keyword search over long messages: their search vectors are built after the write (migration 0008)."""

from django_celery_beat.models import PeriodicTask

from sessions_app.models import Message, Session
from sessions_app.search import INDEX_MAX_CHARS, INLINE_CHARS
from sessions_app.tasks import index_pending_messages
from tests.support.api import make_client
from tests.support.factories import SessionFactory


def url(session, suffix="messages/"):
    return f"/api/v1/sessions/{session.pk}/{suffix}"


def tool_output(marker: str, chars: int) -> str:
    """A long shell output with `marker` on its last line."""
    lines, size = [], 0
    while size < chars:
        line = f"{len(lines):5d}  ok  compiled module_{len(lines)}.py"
        lines.append(line)
        size += len(line) + 1
    return "\n".join([*lines, f"done: {marker}"])


def found(api, session, q) -> list[int]:
    return [m["seq"] for m in api.get(url(session), {"q": q}).json()["results"]]


def test_a_long_message_is_found_once_the_worker_has_indexed_it(burst):
    api = make_client("acme")
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="dev")
    long_output = tool_output("zanzibar", INLINE_CHARS * 5)
    response = api.post(
        url(session),
        [
            {"role": "user", "content": "run the quokka build"},
            {"role": "toolResult", "content": long_output, "tool_name": "Bash"},
        ],
        format="json",
    )
    assert response.status_code == 201
    assert found(api, session, "quokka") == [1]  # a short message: searchable as it is written
    burst()
    assert found(api, session, "zanzibar") == [2]
    assert not Message.objects.filter(session=session, search_vector__isnull=True).exists()


def test_the_periodic_sweep_indexes_long_messages_no_task_reached(api, session):
    # Inside this test's transaction nothing commits, so no task is ever queued: only the sweep can help.
    api.post(url(session), {"role": "toolResult", "content": tool_output("walrus", INLINE_CHARS + 1)}, format="json")
    assert found(api, session, "walrus") == []
    assert index_pending_messages() == 1
    assert found(api, session, "walrus") == [1]
    assert index_pending_messages() == 0  # nothing twice

    task = PeriodicTask.objects.get(task="sessions_app.tasks.index_pending_messages")
    assert task.enabled and (task.interval.every, task.interval.period) == (1, "minutes")


def test_a_message_too_long_for_one_search_vector_is_stored_whole_and_its_start_searchable(api, session):
    # ~1.6 MB of distinct words: more than one tsvector can hold (1 MB), which once failed the write.
    words = [f"w{i:07d}" for i in range(200_000)]
    content = "ocelot " + " ".join(words) + " pangolin"
    response = api.post(url(session), {"role": "toolResult", "content": content}, format="json")
    assert response.status_code == 201
    index_pending_messages()
    assert Message.objects.get(session=session).content == content
    assert found(api, session, "ocelot") == [1]
    assert found(api, session, words[1000]) == [1]
    assert found(api, session, "pangolin") == []  # past the first INDEX_MAX_CHARS characters
    assert len(content) > INDEX_MAX_CHARS


def test_changing_a_message_rebuilds_its_vector(api, session):
    api.post(url(session), {"role": "toolResult", "content": tool_output("narwhal", INLINE_CHARS * 2)}, format="json")
    index_pending_messages()
    assert found(api, session, "narwhal") == [1]

    Message.objects.filter(session=session).update(content="now just a short note about a capybara")
    assert found(api, session, "capybara") == [1]  # short again: rebuilt at once by the trigger
    assert found(api, session, "narwhal") == []

    Message.objects.filter(session=session).update(content=tool_output("axolotl", INLINE_CHARS * 2))
    assert found(api, session, "capybara") == []  # the old vector is dropped with the old text
    index_pending_messages()
    assert found(api, session, "axolotl") == [1]
    assert Session.objects.get(pk=session.pk).messages == 1


def test_an_import_leaves_text_analysis_to_the_indexer_and_is_then_searchable(api):
    from ingest_app.pipeline import import_path
    from tests.support.agent_logs import DATA

    logs = DATA / "claude_code"
    import_path(tenant=api.tenant, path=logs, user_id="dev")
    session = Session.objects.get(tenant=api.tenant, agent_session_id="5f0c2a9e-7d41-4c8e-9b1a-3e2f6d8c0a11")
    imported = Message.objects.filter(session=session)
    assert imported.exists() and not imported.filter(search_vector__isnull=False).exists()
    assert found(api, session, "rain") == []

    assert index_pending_messages() == Message.objects.filter(tenant=api.tenant).count()
    assert found(api, session, "rain") != []
    assert found(api, session, "晴天") != []

    # The import's setting ends with its transaction: a message sent through the API is searchable at once.
    api.post(url(session), {"role": "user", "content": "what about the weekend forecast"}, format="json")
    assert found(api, session, "weekend") == [Session.objects.get(pk=session.pk).last_seq]
