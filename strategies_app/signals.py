"""Signals other layers subscribe to; sent after the writing transaction commits.

`strategies_app` never imports the layers above it (webhooks): they listen here.
"""

from django.dispatch import Signal

# sender=the StrategyRun model; kwargs: tenant_id, run_id, run (a JSON-ready dict: strategy, version, trigger,
# session, user_id, attempts, error, queued_at, started_at, finished_at). Sent once per run, when it has
# failed for good: its last retry failed, or it could not start (its strategy was disabled).
run_failed = Signal()
