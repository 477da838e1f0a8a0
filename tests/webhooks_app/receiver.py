"""A webhook receiver on loopback for the webhook tests: answers with the statuses it is given, in turn (the
last one repeats), after `delay` seconds if given (a slow receiver), and keeps every request it received."""

from __future__ import annotations

import contextlib
import time

from tests.support.http import FakeServer, Request


@contextlib.contextmanager
def receiving(statuses=(200,), delay: float = 0.0):
    statuses = list(statuses)

    def answer(request: Request):
        turn = next(n for n, received in enumerate(receiver.received) if received is request)
        status = statuses[min(turn, len(statuses) - 1)]
        if delay:
            time.sleep(delay)  # a slow receiver: the sender's timeout ends the wait first
        return status, {"status": status}

    with FakeServer(answer) as receiver:
        receiver.url += "/hooks/ace"
        yield receiver
