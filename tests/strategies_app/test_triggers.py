"""Each trigger end to end: the strategy run the trigger asked for is queued, then run as a worker runs it
(tests/support/burst.py)."""

import json

import pytest
from django_celery_beat.models import PeriodicTask

from memory_app.models import Record
from strategies_app.models import RunStatus, Strategy, StrategyRun, Trigger
from tests.support.api import post_messages
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.usefixtures("burst")  # every task these tests queue waits for their burst()


def only(tenant, name, **settings) -> Strategy:
    """One strategy enabled, with exactly the given triggers."""
    Strategy.objects.filter(tenant=tenant).exclude(name=name).update(enabled=False)
    off = dict(on_tool_result=False, on_state_keys=[], message_threshold=None, accumulated_threshold=None)
    Strategy.objects.filter(tenant=tenant, name=name).update(**{**off, **settings})
    return Strategy.objects.get(tenant=tenant, name=name)


def succeeded(strategy, trigger):
    return StrategyRun.objects.filter(strategy=strategy, trigger=trigger, status=RunStatus.SUCCEEDED)


@pytest.fixture
def chat(api):
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming", name="智能家居")
    return session


def post(api, session, *messages):
    return post_messages(api, session, list(messages))


def test_tool_result_message_triggers_a_run(api, burst, chat):
    strategy = only(api.tenant, "facts-experience", on_tool_result=True)
    post(
        api,
        chat,
        {"role": "user", "content": "Remember that the router is in the hallway closet."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "t1", "name": "note"}]},
    )
    assert not StrategyRun.objects.filter(strategy=strategy).exists()  # no tool result yet
    post(api, chat, {"role": "toolResult", "content": "saved", "tool_name": "note"})
    burst()
    assert succeeded(strategy, Trigger.TOOL_RESULT).exists()
    run = succeeded(strategy, Trigger.TOOL_RESULT).get()
    assert run.trigger_detail.startswith("toolResult message seq 3") and run.added == 1
    assert "router is in the hallway closet" in Record.objects.get(tenant=api.tenant, valid=True).content


def test_a_completed_turn_with_tool_calls_triggers_a_run(api, burst, chat):
    strategy = only(api.tenant, "facts-experience", on_tool_result=True)
    started = api.post(
        f"/api/v1/sessions/{chat.pk}/turns/", {"content": "Remember that my car is a blue Tesla."}, format="json"
    ).json()
    api.post(
        f"/api/v1/turns/{started['turn']}/complete/",
        {
            "content": "Noted.",
            "model": "m",
            "finish_reason": "stop",
            "input_tokens": 10,
            "output_tokens": 2,
            "tool_calls": [{"id": "c1", "name": "memory_note", "arguments": "{}"}],
            "elapsed_ms": 5,
        },  # fmt: skip
        format="json",
    )
    burst()
    assert succeeded(strategy, Trigger.TOOL_RESULT).filter(added=1).exists()
    assert "blue Tesla" in Record.objects.get(tenant=api.tenant, valid=True).content


def merge_patch(api, session, patch):
    body = json.dumps(patch, ensure_ascii=False)
    url = f"/api/v1/sessions/{session.pk}/state/"
    response = api.generic("PATCH", url, body, content_type="application/merge-patch+json")
    assert response.status_code == 200, response.content


def test_a_task_stage_change_triggers_the_task_strategy(api, burst, chat):
    strategy = only(api.tenant, "task-progress", on_state_keys=["stage"])
    post(api, chat, {"role": "user", "content": "帮我配置家里的智能家居"})
    api.put(f"/api/v1/sessions/{chat.pk}/state/", {"stage": "设备调试"}, format="json")
    burst()
    assert succeeded(strategy, Trigger.STATE_CHANGE).exists()
    merge_patch(api, chat, {"stage": "网络配置完成"})
    burst()
    assert succeeded(strategy, Trigger.STATE_CHANGE).count() == 2
    last = succeeded(strategy, Trigger.STATE_CHANGE).order_by("-queued_at").first()
    assert last.state_changes == {"stage": ["设备调试", "网络配置完成"]}
    task = Record.objects.get(tenant=api.tenant, valid=True, type="task")
    assert "网络配置完成" in task.content
    assert task.fields["slot"] == f"task:{chat.pk}"
    # a change to a key nobody watches starts nothing
    merge_patch(api, chat, {"theme": "dark"})
    burst()
    assert StrategyRun.objects.filter(strategy=strategy).count() == 2


def test_a_message_scoring_above_the_threshold_triggers_a_run(api, burst, chat):
    strategy = only(api.tenant, "user-profile", message_threshold=0.6)
    post(api, chat, {"role": "user", "content": "ok thanks"})
    burst()
    assert not StrategyRun.objects.filter(strategy=strategy).exists()  # chit-chat scores low
    post(api, chat, {"role": "user", "content": "I prefer soft lighting at night."})
    burst()
    assert succeeded(strategy, Trigger.THRESHOLD).exists()
    run = succeeded(strategy, Trigger.THRESHOLD).get()
    assert "scored" in run.trigger_detail and run.added == 1 and run.from_seq == 1 and run.to_seq == 2


def test_accumulated_scores_trigger_a_run(api, burst, chat):
    strategy = only(api.tenant, "user-profile", accumulated_threshold=1.0)
    post(api, chat, {"role": "user", "content": "I prefer soft lighting at night."})
    burst()
    started = StrategyRun.objects.filter(strategy=strategy).count()
    for text in ("I like jasmine tea.", "I live in Hangzhou.", "My budget is 3000 yuan."):
        post(api, chat, {"role": "user", "content": text})
    burst()
    assert succeeded(strategy, Trigger.THRESHOLD).count() > started
    assert "unread messages scored" in succeeded(strategy, Trigger.THRESHOLD).first().trigger_detail


def test_the_schedule_runs_over_sessions_with_unread_messages(api, burst, chat):
    from strategies_app.tasks import strategy_scheduled

    strategy = only(api.tenant, "user-profile")
    post(api, chat, {"role": "user", "content": "I prefer soft lighting at night."})
    idle = SessionFactory(tenant=api.tenant, user_id="someone")
    task = PeriodicTask.objects.get(pk=strategy.periodic_task_id)
    assert task.task == "strategies_app.tasks.strategy_scheduled"
    # what beat sends when the interval is due (the periodic task's own kwargs)
    strategy_scheduled.apply_async(kwargs=json.loads(task.kwargs))
    burst()
    assert succeeded(strategy, Trigger.SCHEDULE).exists()
    assert not StrategyRun.objects.filter(session=idle).exists()
    assert strategy_scheduled(str(strategy.pk)) == 0  # everything read


def test_one_write_to_many_sessions_queues_few_tasks_and_triggers_each_session(api, burst):
    """An import stores a batch of files (sessions) in one write: their follow-up work goes out as a few
    tasks for the whole write, and every session's trigger still runs."""
    from celery.signals import before_task_publish
    from django.db import transaction

    from sessions_app.models import Session
    from sessions_app.services.messages import messages_append_to_sessions
    from strategies_app.triggers import TRIGGER_TASK_SESSIONS

    strategy = only(api.tenant, "facts-experience", on_tool_result=True)
    count = TRIGGER_TASK_SESSIONS + 5
    sessions = [SessionFactory(tenant=api.tenant, user_id=f"dev{n}") for n in range(count)]
    published = []

    def record(sender=None, **kwargs):
        published.append(sender)

    before_task_publish.connect(record)
    try:
        with transaction.atomic():
            locked = list(Session.objects.select_for_update().filter(pk__in=[s.pk for s in sessions]))
            messages_append_to_sessions(
                appends=[
                    (session, [
                        {"role": "user", "content": f"Remember that build {n} needs the staging token."},
                        {"role": "toolResult", "content": "noted", "tool_name": "note"},
                    ])
                    for n, session in enumerate(locked)
                ]
            )  # fmt: skip
    finally:
        before_task_publish.disconnect(record)
    triggers = [name for name in published if name.endswith("sessions_messages_triggers")]
    embeds = [name for name in published if name.endswith("embed_messages")]
    assert len(triggers) == 2  # 55 sessions: one task of 50, one of 5 — not one per session
    assert len(embeds) == 1  # 110 messages: one embedding task
    burst()
    assert succeeded(strategy, Trigger.TOOL_RESULT).count() == count
    assert set(succeeded(strategy, Trigger.TOOL_RESULT).values_list("session_id", flat=True)) == {
        s.pk for s in sessions
    }


def test_a_failing_session_does_not_stop_the_triggers_of_the_others(api, chat):
    from strategies_app.tasks import sessions_messages_triggers

    strategy = only(api.tenant, "facts-experience", on_tool_result=True)
    stored = post(api, chat, {"role": "toolResult", "content": "saved", "tool_name": "note"})
    gone = "00000000-0000-4000-8000-000000000000"  # a session deleted meanwhile: nothing to run, no failure
    broken = str(SessionFactory(tenant=api.tenant, user_id="x").pk)  # its message ids are no ids: it fails
    evaluated = sessions_messages_triggers(
        [
            [gone, str(api.tenant.pk), [stored[0]["id"]]],
            [broken, str(api.tenant.pk), ["not-a-message-id"]],
            [str(chat.pk), str(api.tenant.pk), [stored[0]["id"]]],
        ]
    )
    assert evaluated == 2  # the broken one failed (logged), the chat was still evaluated
    assert StrategyRun.objects.filter(strategy=strategy, session=chat, trigger=Trigger.TOOL_RESULT).exists()
