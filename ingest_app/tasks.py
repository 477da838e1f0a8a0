"""The ingest side's Celery tasks.

Their names are those they had in sessions_app: the beat rows (migrations 0006) and any message still queued
during an upgrade name them, so they keep them.
"""

from celery import shared_task

from ingest_app.models import ImportSource
from ingest_app.pipeline import import_source_scan


@shared_task(name="sessions_app.tasks.collect_imports", acks_late=True)
def collect_imports() -> int:
    """Periodic (django-celery-beat, every 5 minutes by default): one scan task per enabled import source."""
    source_ids = [str(pk) for pk in ImportSource.objects.filter(enabled=True).values_list("pk", flat=True)]
    for source_id in source_ids:
        scan_import_source.delay(source_id)
    return len(source_ids)


# A first scan of a big directory can take a while; every batch commits, so a scan cut short by the time
# limit loses nothing and the next one goes on from there.
@shared_task(name="sessions_app.tasks.scan_import_source", acks_late=True, time_limit=3600, soft_time_limit=3500)
def scan_import_source(source_id: str) -> str:
    """Import what is new under one import source (skipped while another scan of it runs)."""
    source = ImportSource.objects.select_related("tenant").filter(pk=source_id, enabled=True).first()
    if source is None:
        return "not found or disabled"
    summary = import_source_scan(source=source)
    return "skipped: a scan is running" if summary is None else summary.line()
