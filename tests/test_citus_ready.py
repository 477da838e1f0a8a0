"""The schema stays ready to be distributed by tenant (Citus; docs/scaling.md), read from the live schema's catalog:
every table is distributed, a reference table or a coordinator table (platform_kit.distribution); a distributed
table carries tenant_id, NOT NULL, in every unique index; foreign keys never point from a reference or coordinator
table at a distributed one, nor from a distributed one at a coordinator table. What the move onto Citus itself still
changes (primary keys and foreign keys between distributed tables, which gain tenant_id there) is listed here, table
by table, so a new one fails until it is made right or listed."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.db import connection

from platform_kit.distribution import COORDINATOR_TABLES, REFERENCE_TABLES, citus_keys_sql
from tests.support.api import post_messages

pytestmark = pytest.mark.django_db

# Distributed tables whose primary key is `id` (or another single column) alone: the migration onto Citus makes each
# (that column, tenant_id) (docs/scaling.md). Django keeps the one-column key; the column stays unique.
PRIMARY_KEYS_WITHOUT_TENANT: frozenset[str] = frozenset(
    {
        "gateway_app_provider",
        "ingest_app_importedfile",
        "ingest_app_importsource",
        "ingest_app_telemetryrecord",
        "ingest_app_uploadsegment",
        "memory_app_record",
        "memory_app_record_source_messages",
        "memory_app_record_source_sessions",
        "memory_app_recordrevision",
        "memory_app_recordttl",
        "platform_kit_storedobject",
        "portability_app_recordimport",
        "portability_app_tenantexport",
        "retention_app_retentionevent",
        "retention_app_retentionpolicy",
        "retention_app_retentionrun",
        "sessions_app_budget",
        "sessions_app_budgetchange",
        "sessions_app_budgetcrossing",
        "sessions_app_budgetusage",
        "sessions_app_conversation",
        "sessions_app_forgetaudit",
        "sessions_app_llmrequest",
        "sessions_app_message",
        "sessions_app_session",
        "sessions_app_sessionmodelusage",
        "sessions_app_stateversion",
        "sessions_app_turn",
        "sessions_app_usagedaily",
        "sessions_app_usagehourly",
        "sessions_app_usageplan",
        "strategies_app_runrecord",
        "strategies_app_strategy",
        "strategies_app_strategyrun",
        "strategies_app_strategyversion",
        "strategies_app_watermark",
        "webhooks_app_webhook",
        "webhooks_app_webhookattempt",
        "webhooks_app_webhookchange",
        "webhooks_app_webhookdelivery",
    }
)

# Foreign keys between distributed tables on one column: the migration onto Citus makes each (column, tenant_id) →
# (id, tenant_id) once the primary keys include tenant_id. (table, column).
FOREIGN_KEYS_WITHOUT_TENANT: frozenset[tuple[str, str]] = frozenset(
    {
        ("ingest_app_importedfile", "session_id"),
        ("ingest_app_importedfile", "source_id"),
        ("ingest_app_telemetryrecord", "message_id"),
        ("ingest_app_telemetryrecord", "session_id"),
        ("memory_app_messageembedding", "message_id"),
        ("memory_app_messageembedding", "session_id"),
        ("memory_app_record_source_messages", "message_id"),
        ("memory_app_record_source_messages", "record_id"),
        ("memory_app_record_source_sessions", "record_id"),
        ("memory_app_record_source_sessions", "session_id"),
        ("memory_app_recordrevision", "record_id"),
        ("memory_app_sessionembeddingprogress", "session_id"),
        ("portability_app_recordimport", "record_id"),
        ("sessions_app_budgetcrossing", "budget_id"),
        ("sessions_app_budgetusage", "budget_id"),
        ("sessions_app_conversation", "session_id"),
        ("sessions_app_llmrequest", "conversation_id"),
        ("sessions_app_llmrequest", "session_id"),
        ("sessions_app_message", "conversation_id"),
        ("sessions_app_message", "llm_request_id"),
        ("sessions_app_message", "session_id"),
        ("sessions_app_session", "current_conversation_id"),
        ("sessions_app_sessionmodelusage", "session_id"),
        ("sessions_app_stateversion", "session_id"),
        ("sessions_app_turn", "assistant_message_id"),
        ("sessions_app_turn", "conversation_id"),
        ("sessions_app_turn", "session_id"),
        ("sessions_app_turn", "user_message_id"),
        ("strategies_app_runrecord", "record_id"),
        ("strategies_app_runrecord", "run_id"),
        ("strategies_app_strategyrun", "session_id"),
        ("strategies_app_strategyrun", "strategy_id"),
        ("strategies_app_strategyrun", "strategy_version_id"),
        ("strategies_app_strategyversion", "strategy_id"),
        ("strategies_app_watermark", "session_id"),
        ("strategies_app_watermark", "strategy_id"),
        ("webhooks_app_webhookattempt", "delivery_id"),
        ("webhooks_app_webhookchange", "webhook_id"),
        ("webhooks_app_webhookdelivery", "redelivery_of_id"),
        ("webhooks_app_webhookdelivery", "webhook_id"),
    }
)


def _rows(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _tables() -> dict[str, bool | None]:
    """Every table of the public schema: whether its tenant_id is NOT NULL (None: no tenant_id)."""
    return dict(
        _rows(
            """
            SELECT c.relname, a.attnotnull
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
            """
        )
    )


def _distributed() -> set[str]:
    return set(_tables()) - REFERENCE_TABLES - COORDINATOR_TABLES


def _unique_indexes() -> list[tuple[str, str, bool, bool]]:
    """(table, index definition, is the primary key, includes tenant_id) of every unique index."""
    return _rows(
        """
        SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisprimary,
               EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id'
                       AND a.attnum = ANY (i.indkey))
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND i.indisunique
        """
    )


def _foreign_keys() -> list[tuple[str, str, list[str], bool, bool]]:
    """(table, referenced table, columns, columns include tenant_id, referenced columns include tenant_id)."""
    return _rows(
        """
        SELECT c.conrelid::regclass::text, c.confrelid::regclass::text,
               ARRAY(SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                     ORDER BY a.attnum)::text[],
               EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attname = 'tenant_id'
                       AND a.attnum = ANY (c.conkey)),
               EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.confrelid AND a.attname = 'tenant_id'
                       AND a.attnum = ANY (c.confkey))
        FROM pg_constraint c
        JOIN pg_class r ON r.oid = c.conrelid
        JOIN pg_namespace n ON n.oid = r.relnamespace
        WHERE n.nspname = 'public' AND c.contype = 'f'
        """
    )


def test_every_table_is_classified_and_the_lists_name_tables_that_exist():
    tables = _tables()
    assert not REFERENCE_TABLES & COORDINATOR_TABLES
    assert REFERENCE_TABLES <= set(tables), REFERENCE_TABLES - set(tables)
    assert COORDINATOR_TABLES <= set(tables), COORDINATOR_TABLES - set(tables)
    # The rest is distributed by tenant: each carries tenant_id, NOT NULL (a new table without it must be listed as
    # a reference or coordinator table in platform_kit/distribution.py, with the reason).
    missing = sorted(table for table in _distributed() if tables[table] is None)
    assert not missing, f"tables that grow with use without tenant_id: {missing}"
    nullable = sorted(table for table in _distributed() if tables[table] is False)
    assert not nullable, f"distributed tables whose tenant_id may be NULL: {nullable}"


def test_every_unique_index_of_a_distributed_table_includes_tenant_id():
    distributed = _distributed()
    without = sorted(
        definition
        for table, definition, primary, with_tenant in _unique_indexes()
        if table in distributed and not primary and not with_tenant
    )
    assert not without, "unique indexes without tenant_id (Citus refuses them):\n" + "\n".join(without)


def test_primary_keys_of_distributed_tables_without_tenant_id_are_the_listed_ones():
    distributed = _distributed()
    without = {table for table, _, primary, with_tenant in _unique_indexes() if primary and not with_tenant}
    assert without & distributed == PRIMARY_KEYS_WITHOUT_TENANT, (
        f"new: {sorted((without & distributed) - PRIMARY_KEYS_WITHOUT_TENANT)}, "
        f"no longer: {sorted(PRIMARY_KEYS_WITHOUT_TENANT - without)}"
    )


def test_foreign_keys_between_distributed_tables_without_tenant_id_are_the_listed_ones():
    distributed = _distributed()
    without = {
        (table, columns[0])
        for table, referenced, columns, with_tenant, referenced_with_tenant in _foreign_keys()
        if table in distributed and referenced in distributed and not (with_tenant and referenced_with_tenant)
    }
    assert without == FOREIGN_KEYS_WITHOUT_TENANT, (
        f"new: {sorted(without - FOREIGN_KEYS_WITHOUT_TENANT)}, "
        f"no longer: {sorted(FOREIGN_KEYS_WITHOUT_TENANT - without)}"
    )


def test_rows_point_only_at_rows_of_their_own_tenant():
    """Every foreign key between distributed tables joins rows of one tenant (what the composite keys of the move
    onto Citus will require), over the sample data of two tenants: sessions, turns, usage, budgets, memories with
    their sources and revisions, the built-in strategies and their versions."""
    from memory_app.sample_data import memory_sample_create
    from sessions_app.sample_data import sample_data_create
    from sessions_app.services.apikeys import tenant_get_or_create

    for name in ("acme", "globex"):
        tenant = tenant_get_or_create(name=name)
        sample_data_create(tenant=tenant)
        memory_sample_create(tenant=tenant)
    distributed = _distributed()
    checked, crossing = 0, []
    with connection.cursor() as cursor:
        for table, referenced, columns, *_ in _foreign_keys():
            if table in distributed and referenced in distributed and "tenant_id" not in columns:
                (column,) = columns
                cursor.execute(
                    f"SELECT count(*), count(*) FILTER (WHERE p.tenant_id <> c.tenant_id) FROM {table} c"
                    f" JOIN {referenced} p ON p.{_referenced_column(table, column)} = c.{column}"
                )
                rows, other_tenant = cursor.fetchone()
                checked += rows
                if other_tenant:
                    crossing.append(f"{table}.{column}: {other_tenant} rows")
    assert checked > 100, checked
    assert not crossing, crossing


def _referenced_column(table: str, column: str) -> str:
    (row,) = _rows(
        """
        SELECT a.attname FROM pg_constraint c
        JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = c.confkey[1]
        JOIN pg_attribute f ON f.attrelid = c.conrelid AND f.attnum = c.conkey[1]
        WHERE c.contype = 'f' AND c.conrelid = %s::regclass AND f.attname = %s
        """,
        [table, column],
    )
    return row[0]


def test_foreign_keys_point_the_ways_citus_allows():
    distributed = _distributed()
    wrong = sorted(
        f"{table}.{','.join(columns)} → {referenced}"
        for table, referenced, columns, *_ in _foreign_keys()
        # A reference table is on every node: it may point only at another reference table. A coordinator table may
        # point at one too, never at a distributed table; a distributed table never at a coordinator table.
        if (table in REFERENCE_TABLES and referenced not in REFERENCE_TABLES)
        or (table in COORDINATOR_TABLES and referenced in distributed)
        or (table in distributed and referenced in COORDINATOR_TABLES)
    )
    assert not wrong, wrong


def test_the_moves_key_changes_apply_to_this_schema_and_the_hot_paths_work_after_them(api, session):
    """Steps 3 and 4 of the move (docs/scaling.md) run here, in the test's transaction: every primary key and every
    foreign key between distributed tables then includes tenant_id, and the writes and reads of the hot paths
    (an append, a chat turn, vectors, the memory status, a record with its sources, recall) still work."""
    from memory_app.embeddings import messages_embed
    from memory_app.selectors.status import memory_status

    with connection.cursor() as cursor:
        build, swap, validate = citus_keys_sql(cursor)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no check left pending: the tables can be altered
        for statement in [*build, *swap, *validate]:
            cursor.execute(statement.replace(" CONCURRENTLY", ""))  # in the test's transaction
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    assert len(build) == len(PRIMARY_KEYS_WITHOUT_TENANT) and len(validate) == len(FOREIGN_KEYS_WITHOUT_TENANT)
    distributed = _distributed()
    assert not [
        t for t, _, primary, with_tenant in _unique_indexes() if primary and not with_tenant and t in distributed
    ]
    assert not [
        (table, columns)
        for table, referenced, columns, with_tenant, referenced_with_tenant in _foreign_keys()
        if table in distributed and referenced in distributed and not (with_tenant and referenced_with_tenant)
    ]

    messages = post_messages(api, session, [{"role": "user", "content": "I prefer window seats on long flights."}])
    base = f"/api/v1/sessions/{session.pk}"
    started = api.post(f"{base}/turns/", {"content": "明天呢？"}, format="json")
    assert started.status_code in (200, 201), started.content
    completion = {"content": "明天多云。", "model": "qwen-max", "finish_reason": "stop", "elapsed_ms": 900}
    completion.update(input_tokens=120, output_tokens=8)
    done = api.post(f"/api/v1/turns/{started.json()['turn']}/complete/", completion, format="json")
    assert done.status_code == 200, done.content
    assert messages_embed(message_ids=[m["id"] for m in messages]) == 1
    assert messages_embed(message_ids=[m["id"] for m in messages]) == 1  # again: ON CONFLICT of the new key
    memory_status(tenant=api.tenant, user_id=session.user_id)
    record = api.post(
        "/api/v1/records/",
        {
            "user_id": session.user_id,
            "type": "fact",
            "content": "Prefers window seats",
            "source_session_ids": [str(session.pk)],
            "source_message_ids": [messages[0]["id"]],
        },
        format="json",
    )
    assert record.status_code == 201, record.content
    recall = api.post("/api/v1/recall/", {"query": "window seats", "user_id": session.user_id}, format="json")
    assert recall.status_code == 200 and recall.json()["results"], recall.content
    assert api.get(f"{base}/stats/").json()["messages"] == 3


def test_ace_citus_prints_the_move_every_distributed_table_once_after_the_anchor():
    out = io.StringIO()
    call_command("ace_citus", stdout=out)
    script = out.getvalue()
    distributed = re.findall(r"create_distributed_table_concurrently\('(\w+)'", script)
    assert distributed[0] == "sessions_app_session" and sorted(distributed) == sorted(_distributed())
    assert set(re.findall(r"create_reference_table\('(\w+)'\)", script)) == REFERENCE_TABLES
    assert script.count("CREATE UNIQUE INDEX CONCURRENTLY") == len(PRIMARY_KEYS_WITHOUT_TENANT)
    assert script.count("VALIDATE CONSTRAINT") >= len(FOREIGN_KEYS_WITHOUT_TENANT)
    assert script.index("-- 2.") < script.index("BEGIN;") < script.index("COMMIT;") < script.index("-- 3.")
