"""Waiting on a condition, not a sleep: for tests whose effect comes from another thread or process (a Celery
worker, a receiver, a server). The suite's one wait_for."""

import time


def wait_for(condition, seconds: float = 30.0):
    """The condition's first truthy value within `seconds` (polled every 20 ms), or None: `assert wait_for(...)`."""
    deadline = time.monotonic() + seconds
    while True:
        if value := condition():
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
