"""Load the embedder when a web or worker process starts, not on the first request that needs it.

- Web: the ``post_worker_init`` hook of aceproject/gunicorn_conf.py calls ``warm_up("web")`` in each worker after
  it loaded the application and before it accepts a connection (the model is loaded after the fork: an ONNX
  Runtime or torch thread pool does not survive a fork).
- Celery: ``worker_process_init`` (each pool process, after the fork; aceproject/celery.py) calls
  ``warm_up("worker")``.

A web process also loads the Chinese word segmenter recall uses for CJK queries (jieba's dictionary, about a
second; memory_app.selectors.recall._segmenter).

Skipped when ACE_EMBEDDER_PRELOAD is false or the settings embed nothing (ACE_EMBEDDER=hash has nothing to load).
A failure is logged and never stops the process: embedding then fails (and is retried) as it would have on first
use, and /healthz says the embedder is not loaded.
"""

from __future__ import annotations

import logging
import os

from django.conf import settings

from memory_app.embedders import get_embedder

_log = logging.getLogger("aceproject.embedder")  # the name the logs have always had (and their filters know)


def warm_up(role: str) -> None:
    if not getattr(settings, "ACE_EMBEDDER_PRELOAD", True):
        return
    if role == "web":
        _load_segmenter()
    try:
        embedder = get_embedder()
        if embedder.loaded:
            return
        seconds = embedder.load()
    except Exception as error:  # noqa: BLE001 - logged; the process serves what it can
        _log.warning("The embedder could not be loaded when this %s process started: %s", role, error)
        return
    _log.info("Embedder %s loaded in %.1f s (%s process %s)", embedder.key, seconds, role, os.getpid())


def _load_segmenter() -> None:
    import time

    from memory_app.selectors.recall import _segmenter

    if _segmenter.cache_info().currsize:
        return
    log = logging.getLogger("memory_app.selectors.recall")
    start = time.perf_counter()
    try:
        _segmenter()
    except Exception as error:  # noqa: BLE001 - logged; loaded on the first CJK query instead
        log.warning("The word segmenter could not be loaded when this web process started: %s", error)
        return
    log.info("Word segmenter loaded in %.1f s (web process %s)", time.perf_counter() - start, os.getpid())
