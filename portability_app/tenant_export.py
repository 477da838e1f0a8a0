"""A tenant's full export (docs/portability.md): one JSON Lines file per table in a zip, with a manifest. The zip
writer of `ace_export tenant` and of the exports in the background (`portability_app.tasks.tenant_export_run`).

Every table is read with a server-side cursor and written to the zip as it is read, so the export holds a few
thousand rows in memory whatever the tenant's size. Vectors and keyword-search vectors are left out (derived
from the text; the importing side computes its own), and so are secrets (`SECRETS`: signing secrets of webhooks
and budget channels). Records are written as the memory export writes them
(`memory_app.selectors.export`: provenance and revisions on each line), so `records.jsonl` imports with
`ace_import_memory` or `POST /api/v1/records/import/`.
"""

from __future__ import annotations

import zipfile
from typing import BinaryIO

import orjson
from django.db import transaction
from django.utils import timezone

from ingest_app.models import ImportedFile, ImportSource, TelemetryRecord
from memory_app.models import RecordTtl
from memory_app.selectors.export import memory_export_lines
from portability_app.models import RecordImport
from retention_app.models import RetentionEvent, RetentionPolicy, RetentionRun
from sessions_app.models import (
    Budget,
    BudgetChange,
    BudgetCrossing,
    BudgetUsage,
    Conversation,
    ForgetAudit,
    LlmRequest,
    Message,
    Session,
    SessionModelUsage,
    StateVersion,
    Tenant,
    Turn,
    UsageDaily,
    UsageHourly,
    UsagePlan,
)
from strategies_app.models import Strategy, StrategyRun, StrategyVersion
from webhooks_app.models import Webhook, WebhookAttempt, WebhookChange, WebhookDelivery

FORMAT = "open-ace.tenant"
VERSION = 1
DERIVED = {"search_vector", "embedding", "embedding_bits"}
# Secrets are never exported: a webhook's signing secret, a budget's Feishu and DingTalk signing secrets.
SECRETS = {Webhook: {"secret"}, Budget: {"feishu_secret", "dingtalk_secret"}}
# (file name, model, how its rows belong to the tenant)
TABLES = (
    ("sessions", Session, "tenant"),
    ("conversations", Conversation, "tenant"),
    ("messages", Message, "tenant"),
    ("llm_requests", LlmRequest, "tenant"),
    ("state_versions", StateVersion, "tenant"),
    ("turns", Turn, "tenant"),
    ("session_model_usage", SessionModelUsage, "tenant"),
    ("usage_hourly", UsageHourly, "tenant"),
    ("usage_daily", UsageDaily, "tenant"),
    ("telemetry", TelemetryRecord, "tenant"),
    ("import_sources", ImportSource, "tenant"),
    ("imported_files", ImportedFile, "tenant"),
    ("strategies", Strategy, "tenant"),
    ("strategy_versions", StrategyVersion, "strategy__tenant"),
    ("strategy_runs", StrategyRun, "tenant"),
    ("forget_audits", ForgetAudit, "tenant"),
    ("budgets", Budget, "tenant"),
    ("budget_usage", BudgetUsage, "budget__tenant"),
    ("budget_crossings", BudgetCrossing, "tenant"),
    ("budget_changes", BudgetChange, "tenant"),
    ("usage_plans", UsagePlan, "tenant"),
    ("retention_policies", RetentionPolicy, "tenant"),
    ("retention_runs", RetentionRun, "tenant"),
    ("retention_events", RetentionEvent, "tenant"),
    ("record_ttls", RecordTtl, "tenant"),
    ("record_imports", RecordImport, "tenant"),
    ("webhooks", Webhook, "tenant"),
    ("webhook_deliveries", WebhookDelivery, "tenant"),
    ("webhook_attempts", WebhookAttempt, "delivery__tenant"),
    ("webhook_changes", WebhookChange, "webhook__tenant"),
)


def _line(value) -> bytes:
    return orjson.dumps(value, default=str) + b"\n"


# One transaction: the tables are read with server-side cursors, which a pooler in transaction mode (PgBouncer)
# keeps only inside a transaction.
@transaction.atomic
def tenant_export(*, tenant: Tenant, out: BinaryIO, chunk_size: int = 2000) -> dict[str, int]:
    """Write the zip to `out` (a file opened for binary writing); returns the rows written per file."""
    counts: dict[str, int] = {}
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, model, scope in TABLES:
            left_out = DERIVED | SECRETS.get(model, set())
            columns = [f.attname for f in model._meta.concrete_fields if f.attname not in left_out]
            rows = model._base_manager.filter(**{scope: tenant}).order_by("pk").values(*columns)
            counts[name] = 0
            with archive.open(f"{name}.jsonl", "w", force_zip64=True) as file:
                for row in rows.iterator(chunk_size=chunk_size):
                    file.write(_line(row))
                    counts[name] += 1
        counts["records"] = -1  # the header line is not a record
        with archive.open("records.jsonl", "w", force_zip64=True) as file:
            for line in memory_export_lines(tenant=tenant):
                file.write(line)
                counts["records"] += 1
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "tenant": tenant.name,
            "tenant_id": tenant.pk,
            "exported_at": timezone.now(),
            "files": {f"{name}.jsonl": count for name, count in counts.items()},
        }
        archive.writestr("manifest.json", orjson.dumps(manifest, default=str, option=orjson.OPT_INDENT_2))
    return counts
