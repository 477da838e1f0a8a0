"""Runs: the watermark makes them safe to repeat; failures are visible, retried and write nothing."""

import threading

import pytest
from django.db import connection

from memory_app.models import Record
from sessions_app.services.messages import messages_append
from strategies_app.models import RunStatus, Strategy, StrategyRun, Trigger, Watermark
from strategies_app.services.runs import run_execute, run_request
from tests.support.fake_llm import FakeLLM


def append(session, *texts, role="user"):
    return messages_append(
        tenant=session.tenant, session_id=session.pk, items=[{"role": role, "content": t} for t in texts]
    )


def profile(tenant, **changes) -> Strategy:
    """The built-in profile strategy, run by hand only here: the others are disabled and its triggers off."""
    Strategy.objects.filter(tenant=tenant).exclude(name="user-profile").update(enabled=False)
    strategy = Strategy.objects.get(tenant=tenant, name="user-profile")
    Strategy.objects.filter(pk=strategy.pk).update(message_threshold=None, accumulated_threshold=None, **changes)
    strategy.refresh_from_db()
    return strategy


def test_a_run_reads_only_unread_messages_and_records_its_decisions(api, session):
    strategy = profile(api.tenant)
    append(session, "Hello there.", "I prefer window seats on long flights.")
    first = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
    assert first.status == RunStatus.SUCCEEDED
    assert (first.from_seq, first.to_seq, first.messages_processed) == (1, 2, 2)
    assert first.added == 1 and first.decisions[0]["action"] == "ADD"
    record = Record.objects.get(pk=first.decisions[0]["record"])
    assert record.strategy == "user-profile" and record.strategy_version == 1
    assert [str(m) for m in record.source_messages.values_list("seq", flat=True)] == ["2"]
    # run again: nothing new was said, nothing is read twice
    again = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
    assert again.status == RunStatus.SUCCEEDED and again.messages_processed == 0 and again.added == 0
    # a restatement in a later message extends the provenance instead of adding a duplicate
    append(session, "I prefer window seats on long flights.")
    third = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
    assert (third.from_seq, third.to_seq) == (3, 3)
    assert third.updated == 1 and third.added == 0
    assert Record.objects.filter(tenant=api.tenant, user_id=session.user_id, valid=True).count() == 1
    assert record.source_messages.count() == 2
    # executing a finished run again does nothing
    assert run_execute(third.pk).messages_processed == 1


def test_a_changed_preference_invalidates_the_old_record_which_stays_in_history(api, session):
    strategy = profile(api.tenant)
    append(session, "I prefer soft lighting at night.")
    run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
    old = Record.objects.get(tenant=api.tenant, valid=True)
    append(session, "Actually, I now prefer bright lighting.")
    run = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
    assert (run.invalidated, run.added) == (1, 1)
    actions = {d["action"]: d for d in run.decisions}
    assert actions["INVALIDATE"]["record"] == str(old.pk) and "no longer holds" in actions["INVALIDATE"]["reason"]
    old.refresh_from_db()
    assert not old.valid and old.invalidated_reason.startswith("contradicted by")
    assert old.revisions.filter(change="invalidate").exists()
    assert "bright" in Record.objects.get(tenant=api.tenant, valid=True).content.lower()


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_never_process_a_message_twice_or_skip_one(api):
    from tests.support.factories import SessionFactory

    session = SessionFactory(tenant=api.tenant, user_id="racer")
    strategy = profile(api.tenant)
    append(session, *[f"I like dish number {i}." for i in range(40)])
    runs = [run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk for _ in range(4)]

    def work(run_id):
        try:
            run_execute(run_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(run_id,)) for run_id in runs]
    for thread in threads:
        thread.start()
        append(session, f"I like extra dish {thread.name}.")  # messages keep arriving meanwhile
    for thread in threads:
        thread.join()
    done = list(StrategyRun.objects.filter(pk__in=runs))
    assert all(r.status == RunStatus.SUCCEEDED for r in done)
    assert sum(r.messages_processed for r in done) <= session.__class__.objects.get(pk=session.pk).last_seq
    ranges = sorted((r.from_seq, r.to_seq) for r in done if r.from_seq is not None)
    for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
        assert start == end + 1  # contiguous: nothing twice, nothing skipped
    assert ranges[0][0] == 1
    assert Watermark.objects.get(strategy=strategy, session=session).last_seq == ranges[-1][1]
    assert Record.objects.filter(tenant=api.tenant, user_id="racer").count() == ranges[-1][1]


def test_an_llm_that_is_down_fails_the_run_visibly_and_writes_nothing(api, session, settings):
    settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = "http://127.0.0.1:9/v1", "fake"
    strategy = profile(api.tenant, extractor="llm")
    append(session, "I prefer window seats.")
    run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
    with pytest.raises(Exception, match="unreachable"):
        run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "unreachable" in run.error and run.attempts == 1
    assert not Record.objects.filter(tenant=api.tenant).exists()
    assert not Watermark.objects.filter(strategy=strategy, session=session, last_seq__gt=0).exists()  # read again


def test_invalid_llm_json_is_asked_again_then_fails_without_half_a_result(api, session, settings):
    with FakeLLM() as llm:
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL, settings.ACE_LLM_ATTEMPTS = llm.base_url, "fake", 2
        strategy = profile(api.tenant, extractor="llm")
        append(session, "I prefer window seats.")
        good = {
            "content": "Prefers window seats", "about": "preference:seat", "value": "window", "exclusive": True,
            "confidence": 0.9, "source_seqs": [1], "fields": [], "invalidates": [], "reason": "stated",
        }  # fmt: skip
        # first answer is not JSON, the second is: the run succeeds with the second, tokens of both counted
        llm.script = ["Sure! Here are the memories: ...", {"memories": [good]}]
        run = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
        assert run.status == RunStatus.SUCCEEDED and run.added == 1 and run.extractor == "llm"
        assert run.input_tokens > 0 and run.output_tokens > 0 and run.llm_latency_ms > 0
        assert "invalid" in llm.requests[1]["messages"][-1]["content"]
        # two answers that break the schema (one memory fine, one not): nothing of either is written
        append(session, "And I prefer aisle seats on short hops.")
        bad = {**good, "source_seqs": [2], "confidence": 7}
        llm.script = [{"memories": [good, bad]}, {"memories": [{**good, "source_seqs": [99]}]}]
        failed = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
        with pytest.raises(Exception, match="invalid JSON"):
            run_execute(failed.pk)
        failed.refresh_from_db()
        assert failed.status == RunStatus.FAILED and "not seqs of the messages" in failed.error
        assert Record.objects.filter(tenant=api.tenant).count() == 1


def test_a_disabled_strategy_never_runs(api, session):
    strategy = profile(api.tenant)
    append(session, "I prefer tea.")
    run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
    Strategy.objects.filter(pk=strategy.pk).update(enabled=False)
    run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "disabled" in run.error and run.messages_processed == 0
    assert not Record.objects.filter(tenant=api.tenant).exists()


def test_a_failing_run_is_retried_by_the_worker_until_the_llm_answers(api, session, settings, burst, monkeypatch):
    import strategies_app.tasks as tasks

    with FakeLLM() as llm:
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = llm.base_url, "fake"
        llm.remember = {"window seats": {"content": "Prefers window seats", "about": "preference:seat"}}
        llm.script = [503]
        strategy = profile(api.tenant, extractor="llm")
        append(session, "I prefer window seats.")
        # A short delay: the retry is a message with a countdown, run when it is due (in production BACKOFF·2^n).
        monkeypatch.setattr(tasks, "BACKOFF", 0.1)
        run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
        states = [ran.state for ran in burst() if ran.name == "strategies_app.tasks.run_strategy"]
        assert states == ["RETRY", "SUCCESS"]
        assert StrategyRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
        run.refresh_from_db()
        assert run.attempts == 2 and run.added == 1
        assert Record.objects.get(tenant=api.tenant, valid=True).content == "Prefers window seats"


def test_an_llm_that_times_out_fails_the_run_and_writes_nothing(api, session, settings):
    with FakeLLM() as llm:
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL, settings.ACE_LLM_TIMEOUT = llm.base_url, "fake", 0.5
        llm.script = ["timeout"]
        strategy = profile(api.tenant, extractor="llm")
        append(session, "I prefer window seats.")
        run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session)
        with pytest.raises(Exception, match="did not answer within"):
            run_execute(run.pk)
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED and "did not answer within 0.5 s" in run.error
        assert not Record.objects.filter(tenant=api.tenant).exists()


def test_a_run_for_a_user_reads_each_of_their_sessions(api):
    from tests.support.factories import SessionFactory

    strategy = profile(api.tenant)
    first, second = (SessionFactory(tenant=api.tenant, user_id="xiaoming") for _ in range(2))
    other = SessionFactory(tenant=api.tenant, user_id="someone-else")
    append(first, "I live in Hangzhou.")
    append(second, "My budget is 3000 yuan.")
    append(other, "I live in Berlin.")
    run = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, user_id="xiaoming").pk)
    assert run.status == RunStatus.SUCCEEDED and run.sessions_processed == 2 and run.added == 2
    assert run.from_seq is None  # a seq range only means something within one session
    assert set(Record.objects.filter(valid=True).values_list("user_id", flat=True)) == {"xiaoming"}


def test_a_long_backlog_is_read_in_batches_without_gaps(api, session, settings, django_capture_on_commit_callbacks):
    settings.ACE_STRATEGY_BATCH = 3
    strategy = profile(api.tenant)
    append(session, *[f"I like dish number {i}." for i in range(7)])
    with django_capture_on_commit_callbacks(execute=True):
        first = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
    assert (first.from_seq, first.to_seq) == (1, 3)
    follow_up = StrategyRun.objects.exclude(pk=first.pk).get(strategy=strategy)  # queued by the first
    assert follow_up.trigger_detail == f"continues {first.pk}"
    second = run_execute(follow_up.pk)
    assert (second.from_seq, second.to_seq) == (4, 6)


def test_every_extractor_reads_one_context_and_only_a_models_time_is_model_latency(api, session, settings):
    append(session, "I prefer window seats.")
    rules = run_execute(run_request(strategy=profile(api.tenant), trigger=Trigger.MANUAL, session=session).pk)
    assert (rules.extractor, rules.added, rules.llm_latency_ms) == ("rules", 1, 0)  # no model, no model time

    with FakeLLM() as llm:
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = llm.base_url, "fake"
        strategy = profile(api.tenant, extractor="llm")
        append(session, "And I prefer aisle seats on short hops.")
        llm.script = [{"memories": []}]
        run = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session).pk)
        assert run.extractor == "llm" and run.llm_latency_ms > 0
        prompt = llm.requests[0]["messages"][1]["content"]
        assert session.user_id in prompt and session.name in prompt  # the run's context: whose, and where
