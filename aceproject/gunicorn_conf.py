"""gunicorn settings for Open ACE: `gunicorn --config python:aceproject.gunicorn_conf aceproject.wsgi` (Procfile).

Each worker loads the embedder once it has loaded the application and before it accepts a request, so no request
waits for the model (memory_app/embedders/warmup.py). The application is not preloaded in the master: the model's
thread pools must be made after the fork.
"""

import gc


def post_worker_init(worker):
    from memory_app.embedders.warmup import warm_up

    worker.notify()  # the master counts --timeout from the last notice: loading (or exporting) the model is work
    warm_up("web")
    # What start-up made (modules, settings, the model) lives as long as the process: moved out of the garbage
    # collector's sight, a full collection no longer walks it (~190 ms of CPU, one request in fifteen, in an
    # ingest of 50-message batches).
    gc.freeze()
