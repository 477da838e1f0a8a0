import os

from celery import Celery

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
