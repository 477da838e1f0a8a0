"""A strategy trigger racing a user's erasure: the user is forgotten between the write that sent the signal and the
trigger's insert of a run. That race is expected — there is nothing left to run — so it is one log line, never a
traceback, and nothing refers to the forgotten session afterwards."""

import logging
import threading

import pytest
from django.db import connection

from sessions_app.models import Message, Session
from sessions_app.services.forget import user_forget
from strategies_app import triggers
from strategies_app.models import Strategy, StrategyRun
from strategies_app.tasks import sessions_messages_triggers, turn_triggers
from tests.support.api import make_client
from tests.support.factories import SessionFactory


def forget_elsewhere(tenant, user_id):
    """The erasure, committed by another connection (as the API would, in another process)."""

    def forget():
        try:
            user_forget(tenant=tenant, user_id=user_id, actor="test")
        finally:
            connection.close()

    thread = threading.Thread(target=forget)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.fixture
def tool_result_session(transactional_db):
    api = make_client("acme")
    Strategy.objects.filter(tenant=api.tenant).update(
        enabled=True, on_tool_result=True, message_threshold=None, accumulated_threshold=None
    )
    session = SessionFactory(tenant=api.tenant, user_id="leaving")
    response = api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        [{"role": "user", "content": "Remember the router is in the closet."}, {"role": "toolResult", "content": "ok"}],
        format="json",
    )
    assert response.status_code == 201
    StrategyRun.objects.all().delete()  # the runs that write queued: this test runs the trigger by hand
    return api, session


def no_tracebacks(caplog):
    return [record.getMessage() for record in caplog.records if record.exc_info]


def test_an_erasure_between_the_trigger_and_its_run_insert_is_one_line_and_no_traceback(
    tool_result_session, monkeypatch, caplog
):
    api, session = tool_result_session
    message_ids = [str(pk) for pk in Message.objects.filter(session=session).values_list("pk", flat=True)]
    real_run_request = triggers.run_request

    def erased_first(**kwargs):
        forget_elsewhere(api.tenant, "leaving")  # after the trigger read the session, before it inserts the run
        return real_run_request(**kwargs)

    monkeypatch.setattr(triggers, "run_request", erased_first)
    with caplog.at_level(logging.INFO):
        evaluated = sessions_messages_triggers([[str(session.pk), str(api.tenant.pk), message_ids]])
    assert evaluated == 1
    assert no_tracebacks(caplog) == []
    assert [r.levelname for r in caplog.records if "deleted meanwhile" in r.getMessage()] == ["INFO"]
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not StrategyRun.objects.filter(session_id=session.pk).exists()


def test_a_turn_whose_session_was_erased_before_its_trigger_ran_is_one_line(tool_result_session, caplog):
    api, session = tool_result_session
    forget_elsewhere(api.tenant, "leaving")
    with caplog.at_level(logging.INFO):
        turn_triggers(str(session.pk), str(api.tenant.pk), ["note"], [])
    assert no_tracebacks(caplog) == []
    assert any("deleted meanwhile" in r.getMessage() for r in caplog.records)
    assert StrategyRun.objects.count() == 0


def test_a_trigger_failure_that_is_no_erasure_is_still_reported(tool_result_session, monkeypatch, caplog):
    api, session = tool_result_session
    message_ids = [str(pk) for pk in Message.objects.filter(session=session).values_list("pk", flat=True)]

    def broken(**kwargs):
        raise RuntimeError("a real bug")

    monkeypatch.setattr(triggers, "run_request", broken)
    assert sessions_messages_triggers([[str(session.pk), str(api.tenant.pk), message_ids]]) == 0
    assert any("a real bug" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


def test_a_run_whose_user_is_forgotten_as_it_starts_ends_quietly(tool_result_session, monkeypatch, caplog):
    from strategies_app.services import runs
    from strategies_app.tasks import run_strategy

    api, session = tool_result_session
    strategy = Strategy.objects.filter(tenant=api.tenant, enabled=True).first()
    run = runs.run_request(strategy=strategy, trigger="manual", session=session)
    real_run_session = runs._run_session

    def erased_first(*args, **kwargs):
        forget_elsewhere(api.tenant, "leaving")  # the run has read its session; its writes come next
        return real_run_session(*args, **kwargs)

    monkeypatch.setattr(runs, "_run_session", erased_first)
    with caplog.at_level(logging.INFO):
        outcome = run_strategy.apply(args=[str(run.pk)])
    assert outcome.successful() and outcome.result == "failed"  # nothing to retry
    assert no_tracebacks(caplog) == []
    assert [r.levelname for r in caplog.records if "deleted while it ran" in r.getMessage()] == ["INFO"]
    assert not StrategyRun.objects.filter(pk=run.pk).exists()  # the erasure took the run too
