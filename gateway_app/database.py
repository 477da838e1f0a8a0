"""The gateway's database work, off the event loop: a small pool of threads, each keeping its own connection (as a
gunicorn worker does, CONN_MAX_AGE and the health check included). The relay awaits a job only where the call
must wait for it (the key, the budgets, the rate limits, the memory block); the turn's writes run behind the stream.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connections

log = logging.getLogger("gateway_app")


def _job(function, args, kwargs):
    close_old_connections()  # a connection past its age, or broken by an outage, is replaced
    return function(*args, **kwargs)


class Pool:
    def __init__(self, threads: int, name: str):
        self.threads = threads
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix=name)

    async def run(self, function, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(_job, function, args, kwargs))

    def close(self) -> None:
        """Each thread closes its own connections (a connection belongs to its thread), then the threads end."""
        threads = len(self.pool._threads)
        if threads:
            barrier = threading.Barrier(threads)  # one job per thread: each waits until every thread holds one

            def close_own():
                barrier.wait(timeout=30)
                connections.close_all()

            for _ in range(threads):
                self.pool.submit(close_own)
        self.pool.shutdown(wait=True)


class Database:
    """Two pools: the checks a call waits for before it is forwarded (`run`), never queued behind the turns'
    writes, which run on their own (`write`)."""

    def __init__(self):
        self.checks = Pool(max(2, settings.ACE_GATEWAY_DB_THREADS // 2), "gateway-checks")
        self.writes = Pool(settings.ACE_GATEWAY_DB_THREADS, "gateway-writes")

    async def run(self, function, *args, **kwargs):
        return await self.checks.run(function, *args, **kwargs)

    async def write(self, function, *args, **kwargs):
        return await self.writes.run(function, *args, **kwargs)

    def close(self) -> None:
        self.checks.close()
        self.writes.close()
