"""The burst runner the suite runs its background work with (tests/support/burst.py): tasks run as a worker runs them,
after the commit that queued them, a countdown when it is due, the tasks they queue in the same burst."""

import time

from celery.signals import task_prerun
from django.db import transaction

from sessions_app.tasks import close_abandoned_turns

NAME = "sessions_app.tasks.close_abandoned_turns"


def test_a_task_queued_on_commit_waits_for_the_commit_and_runs_as_a_worker_runs_it(burst):
    seen = []

    def look(sender=None, **kwargs):
        seen.append((sender.request.is_eager, sender.request.called_directly, sender.request.delivery_info))

    with transaction.atomic():
        transaction.on_commit(close_abandoned_turns.delay)
        assert burst.queued() == []
    assert burst.queued() == [NAME]
    task_prerun.connect(look, weak=False)
    try:
        ran = burst()
    finally:
        task_prerun.disconnect(look)
    assert [(r.name, r.state) for r in ran] == [(NAME, "SUCCESS")]
    ((eager, direct, delivery),) = seen
    assert not eager and not direct and delivery["routing_key"] == "celery"  # from its queue, as in production
    assert burst.queued() == []


def test_a_countdown_runs_when_due_and_a_later_one_stays_queued(burst):
    close_abandoned_turns.apply_async(countdown=600)
    close_abandoned_turns.apply_async(countdown=0.3)
    started = time.monotonic()
    assert [r.name for r in burst()] == [NAME]
    assert time.monotonic() - started >= 0.25  # not before it was due
    assert burst.queued() == [NAME]  # ten minutes away: beyond this burst
    assert burst() == []
