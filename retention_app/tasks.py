"""The daily retention run. Its name is the one it had in memory_app (the beat row of memory_app's migration 0007
and any queued message name it; the `memory_app.tasks.*` route sends it to that queue still)."""

from celery import shared_task

from retention_app.models import RetentionRun
from retention_app.services import retention_apply_all


@shared_task(name="memory_app.tasks.apply_retention", acks_late=True, time_limit=3600, soft_time_limit=3540)
def apply_retention() -> dict:
    """The daily retention run (scheduled by memory_app's migration 0007, editable in the admin): every tenant's
    message content older than its policy purged, its expired records under "purge" TTLs deleted. Each batch commits
    on its own, so a run cut short resumes where it stopped the next time; running it twice does nothing more."""
    runs = retention_apply_all(trigger=RetentionRun.Trigger.SCHEDULE)
    return {
        "tenants": len(runs),
        "messages_purged": sum(run.messages_purged for run in runs),
        "records_purged": sum(run.records_purged for run in runs),
    }


@shared_task(name="retention_app.tasks.sweep_stored_files", acks_late=True, time_limit=3600, soft_time_limit=3540)
def sweep_stored_files() -> dict:
    """Hourly (retention_app's migration 0004): stored files nothing refers to any more — an upload's part whose
    write was rolled back, an export's zip or a forgotten user's upload whose delete never ran — deleted
    (platform_kit.storage.stored_files_sweep)."""
    from platform_kit.storage import stored_files_sweep

    return stored_files_sweep()
