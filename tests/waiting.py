"""Waiting on a condition, not a sleep: for tests whose effect comes from another thread or process (a Celery
worker, a receiver). Issue 31 gathers the suite's other copies here."""

import time


def wait_for(condition, seconds: float = 20.0):
    """The condition's first truthy value within `seconds` (polled every 20 ms), or None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.02)
    return None
