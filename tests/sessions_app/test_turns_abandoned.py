"""Turns that are never completed are closed by the periodic task, queued and run as a worker runs it."""

from datetime import timedelta

from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from sessions_app.models import Turn
from sessions_app.selectors.recount import session_count_drift
from sessions_app.tasks import close_abandoned_turns
from tests.support.api import make_client
from tests.support.factories import SessionFactory


def test_the_schedule_is_installed_and_editable_in_the_admin(db):
    task = PeriodicTask.objects.get(task="sessions_app.tasks.close_abandoned_turns")
    assert task.enabled
    assert (task.interval.every, task.interval.period) == (1, "minutes")


def test_the_worker_closes_abandoned_turns_and_keeps_their_partial_content(burst, settings):
    settings.ACE_TURN_TIMEOUT_SECONDS = 60
    api = make_client("abandoned")
    session = SessionFactory(tenant=api.tenant)
    stale = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "讲个故事"}, format="json").json()["turn"]
    fresh = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "还在吗"}, format="json").json()["turn"]
    api.patch(f"/api/v1/turns/{stale}/", {"content": "从前有座山，"}, format="json")
    Turn.objects.filter(pk=stale).update(last_activity_at=timezone.now() - timedelta(minutes=5))

    close_abandoned_turns.delay()
    assert "sessions_app.tasks.close_abandoned_turns" in [ran.name for ran in burst()]
    assert Turn.objects.get(pk=stale).status == "abandoned"

    turn = Turn.objects.select_related("assistant_message").get(pk=stale)
    assert turn.assistant_message.content == "从前有座山，"
    assert turn.assistant_message.finish_reason == "error"
    assert "Abandoned" in turn.assistant_message.metadata["error"]
    assert Turn.objects.get(pk=fresh).status == "streaming"
    counts = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert (counts["message_error"], counts["message_assistant"]) == (1, 1)
    session.refresh_from_db()
    assert session_count_drift(session=session) == {}

    # Running it again closes nothing more.
    assert close_abandoned_turns.apply().get() == 0

    # A closed turn takes no more checkpoints…
    assert api.patch(f"/api/v1/turns/{stale}/", {"content": "late"}, format="json").status_code == 409

    # …but the client's completion, arriving late, is still accepted: it is the truth, the timeout was a guess.
    late = {
        "content": "从前有座山，山里有座庙。",
        "model": "qwen-max",
        "finish_reason": "stop",
        "input_tokens": 10,
        "output_tokens": 12,
        "elapsed_ms": 400000,
    }
    response = api.post(f"/api/v1/turns/{stale}/complete/", late, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "completed"
    assert "error" not in response.json()["assistant_message"]["metadata"]
    counts = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert (counts["message_error"], counts["message_assistant"], counts["output_tokens"]) == (0, 2, 12)
    session.refresh_from_db()
    assert session_count_drift(session=session) == {}
