import gc
import os

from celery import Celery, signals

from aceproject.data_folder import make_broker_folders

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")

# Every task retries, instead of failing, while the database is unreachable (platform_kit.tasks.Task).
app = Celery("aceproject", task_cls="platform_kit.tasks:Task")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _make_embedded_broker_folders(sender, **kwargs):
    """The file-system broker's folders, made when a process first uses Celery (to publish or to consume)."""
    if sender.conf.broker_url.startswith("filesystem://"):
        make_broker_folders(sender.conf.broker_transport_options)


@signals.worker_process_init.connect
def _load_the_embedder(**kwargs):
    """Each pool process loads the embedder when it starts, not in the first embedding task or recall it runs."""
    from memory_app.embedders.warmup import warm_up

    warm_up("worker")
    gc.freeze()  # as gunicorn's workers do (aceproject/gunicorn_conf.py): start-up's objects out of the collector's way


@signals.worker_init.connect
def _load_the_embedder_in_a_poolless_worker(sender=None, **kwargs):
    """A worker without child processes (``--pool solo`` or ``threads``) loads it in its one process."""
    pool = getattr(sender, "pool_cls", None)
    name = pool if isinstance(pool, str) else f"{getattr(pool, '__module__', '')}.{getattr(pool, '__name__', '')}"
    if "prefork" not in name:
        from memory_app.embedders.warmup import warm_up

        warm_up("worker")
