# The two tables keyed by another table's id (a message's vector, a session's embedding progress) have tenant_id in
# their primary key, after the key's column (docs/scaling.md): what Citus requires, and what their ON CONFLICT
# clauses name. Django keeps the one column as the model's primary key. Each new key's index is built CONCURRENTLY
# while writers go on, then swapped in for the old key in a moment's lock; hence a non-atomic migration.

from django.db import migrations

SWAP = """
BEGIN;
ALTER TABLE {table} DROP CONSTRAINT {table}_pkey;
ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY USING INDEX {table}_pkey_new;
COMMIT;
"""


def _key(table, columns, old_columns):
    def sql(cols):
        return [
            f"DROP INDEX CONCURRENTLY IF EXISTS {table}_pkey_new",
            f"CREATE UNIQUE INDEX CONCURRENTLY {table}_pkey_new ON {table} ({cols})",
            SWAP.format(table=table),
        ]

    return migrations.RunSQL(sql(columns), sql(old_columns))


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("memory_app", "0013_tenant_in_unique_keys")]

    operations = [
        _key("memory_app_messageembedding", "message_id, tenant_id", "message_id"),
        _key("memory_app_sessionembeddingprogress", "session_id, tenant_id", "session_id"),
    ]
