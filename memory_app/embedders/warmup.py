"""Load the embedder when a web or worker process starts, not on the first request that needs it.

- Web: the ``post_worker_init`` hook of aceproject/gunicorn_conf.py calls ``warm_up("web")`` in each worker after
  it loaded the application and before it accepts a connection (the model is loaded after the fork: an ONNX
  Runtime or torch thread pool does not survive a fork).
- Celery: ``worker_process_init`` (each pool process, after the fork; aceproject/celery.py) calls
  ``warm_up("worker")``.

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
    try:
        embedder = get_embedder()
        if embedder.loaded:
            return
        seconds = embedder.load()
    except Exception as error:  # noqa: BLE001 - logged; the process serves what it can
        _log.warning("The embedder could not be loaded when this %s process started: %s", role, error)
        return
    _log.info("Embedder %s loaded in %.1f s (%s process %s)", embedder.key, seconds, role, os.getpid())
