"""The events a webhook can subscribe to: their names and what each means (docs/webhooks.md shows the payloads)."""

from django.db import models


class Event(models.TextChoices):
    RECORD_CREATED = "record.created", "a memory record was created"
    RECORD_UPDATED = "record.updated", "a record changed (an edit, a merged restatement, a source session deleted)"
    RECORD_INVALIDATED = "record.invalidated", "a record was deleted or invalidated (kept for audit)"
    STRATEGY_RUN_FAILED = "strategy_run.failed", "a strategy run failed for good (its retries used up)"
    BUDGET_CROSSED = "budget.crossed", "a usage budget crossed one of its thresholds"
    IMPORT_FINISHED = "import.finished", "a log import finished (ace_import, an upload, an import source's scan)"


# Sent only by "send a test" (POST /api/v1/webhooks/{id}/test/), to that webhook, whatever it subscribes to.
PING = "ping"
DELIVERY_EVENTS = [*Event.values, PING]
