"""Big imports in forked worker processes: each takes whole groups of files (a session's file and its sub-agent
files) and reads them with its own database connection; and fewer garbage collections while an import runs."""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import queue
import sys
import traceback
from collections.abc import Callable

import billiard
from django.db import connections


@contextlib.contextmanager
def fewer_gc_collections():
    """An import makes hundreds of thousands of small dicts and lists that live until their batch is stored,
    and few reference cycles: at Python's default thresholds the cyclic garbage collector scans them again
    and again (a quarter of the parsing time). Collections are rarer for the import's duration."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 100_000), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def parallel_possible() -> bool:
    """Worker processes are forked (Linux), and not inside the caller's transaction (they could not use it).
    They are billiard's processes (Celery's own fork of multiprocessing): a Celery pool process, where the
    collector scans, is daemonic, and billiard lets a daemonic process have children where multiprocessing
    refuses."""
    return (
        sys.platform.startswith("linux")
        and "fork" in billiard.get_all_start_methods()
        and not any(conn.in_atomic_block for conn in connections.all(initialized_only=True))
    )


def groups_in_processes(
    groups: list[list], *, workers: int, work: Callable, on_progress: Callable[[int, int], None] | None = None
) -> list:
    """Run `work(next_group, stopped, report)` in `workers` forked processes that share out `groups`; what each
    returned. What a worker passes to `report(files, bytes_read)` reaches `on_progress` here, as it comes.

    A worker that fails fails the call, once the others have finished the batch they are in (its exception,
    or its text when it cannot travel); so does a worker that ended without a result (killed)."""
    context = billiard.get_context("fork")
    tasks, results, stop = context.Queue(), context.Queue(), context.Event()
    for group in groups:
        tasks.put(group)
    for _ in range(workers):
        tasks.put(None)  # one "no more" for each worker
    processes = [
        context.Process(target=_worker, args=(work, tasks, results, stop), name=f"ace-import-{n}", daemon=True)
        for n in range(workers)
    ]
    for process in processes:
        process.start()
    answers = []
    try:
        while len(answers) < workers:
            try:
                answer = results.get(timeout=1)
            except queue.Empty:
                if not any(process.is_alive() for process in processes) and results.empty():
                    break
                continue
            if answer[0] == "progress":
                if on_progress is not None:
                    on_progress(*answer[1])
                continue
            answers.append(answer)
            if answer[0] == "failed":
                stop.set()  # the others finish the batch they are in, then stop
    except BaseException:  # e.g. a task's time limit: the workers stop after their batch
        stop.set()
        raise
    finally:
        for process in processes:
            process.join()
    done, failed = [], None
    for outcome, payload in answers:
        if outcome == "done":
            done.append(payload)
        elif failed is None:
            failed = payload
    if failed is not None:
        raise failed
    if len(answers) < workers:
        raise RuntimeError("an import worker process ended without a result (killed?); import again to go on")
    return done


def _worker(work: Callable, tasks, results, stop) -> None:
    """One import process: groups of files from `tasks` until "no more", what `work` returned to `results`. It
    stops after its current batch when told to, or when the process that started it is gone (killed
    by a time limit, say): what it committed stays, the next import reads the rest."""
    gc.freeze()  # what it inherited is never collected here: no scans of it, no copies of its pages
    for conn in connections.all(initialized_only=True):
        # The parent's connections stay the parent's (a scan holds its source's lock on one): this
        # process drops them unclosed (psycopg never ends a connection another process opened) and opens
        # its own.
        conn.connection = None
    parent = os.getppid()

    def stopped() -> bool:
        return stop.is_set() or os.getppid() != parent

    finished = False

    def next_group():
        nonlocal finished
        if finished or stopped():
            return None
        group = tasks.get()
        finished = group is None
        return group

    def report(files: int, bytes_read: int) -> None:
        results.put(("progress", (files, bytes_read)))

    try:
        results.put(("done", work(next_group, stopped, report)))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            pickle.dumps(error)
        except Exception:  # noqa: BLE001 - an exception that cannot travel: its text does
            error = RuntimeError("".join(traceback.format_exception(error)))
        results.put(("failed", error))
    finally:
        connections.close_all()
        if os.getppid() != parent:
            results.cancel_join_thread()  # nobody will read it: exit without waiting to send
