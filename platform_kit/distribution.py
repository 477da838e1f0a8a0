"""How the tables would be laid out on a distributed PostgreSQL (Citus, distributed by tenant): the reviewed lists
behind docs/scaling.md and tests/test_citus_ready.py.

Every table of the public schema is one of three kinds:
- distributed by `tenant_id`: every table that grows with use. It carries `tenant_id`, and its unique indexes
  include it, so each tenant's rows live together on one node (co-location);
- a reference table: small, shared, read with tenant data (joined, or referenced by a foreign key), copied whole to
  every node: REFERENCE_TABLES;
- a coordinator table: the framework's own and the service's per-host bookkeeping, never joined with tenant data,
  left where they are on the coordinator: COORDINATOR_TABLES.
A new table is distributed unless it is added to one of the lists here (and the test says why it fails).
"""

# Small shared tables the distributed ones point at or join.
REFERENCE_TABLES = frozenset(
    {
        "sessions_app_tenant",  # a few rows; every distributed table points at it
        "sessions_app_apikey",  # looked up by its prefix before the tenant is known (every API call)
        "sessions_app_modelprice",  # the price list, shared by every tenant, joined by the cost roll-ups
        # Strategies point at their schedule (strategies_app_strategy.periodic_task_id) and beat joins these:
        "django_celery_beat_periodictask",
        "django_celery_beat_periodictasks",
        "django_celery_beat_intervalschedule",
        "django_celery_beat_crontabschedule",
        "django_celery_beat_solarschedule",
        "django_celery_beat_clockedschedule",
    }
)

# Tables of the framework and of the service itself, never joined with tenant data: they stay on the coordinator.
COORDINATOR_TABLES = frozenset(
    {
        "django_migrations",
        "django_content_type",
        "django_session",
        "django_admin_log",
        "auth_user",
        "auth_group",
        "auth_permission",
        "auth_group_permissions",
        "auth_user_groups",
        "auth_user_user_permissions",
        "axes_accessattempt",
        "axes_accessattemptexpiration",
        "axes_accessfailurelog",
        "axes_accesslog",
        "platform_kit_authfailurewindow",  # failed API keys by address: before any tenant is known
        "platform_kit_servererrortally",  # the service's own 500s
        "gateway_app_ratewindow",  # one row per API key (a reference table), rewritten every minute of use
    }
)


def distributed_tables(cursor) -> set[str]:
    """The distributed tables of the live schema: every table of the public schema not listed above."""
    cursor.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
    )
    return {row[0] for row in cursor.fetchall()} - REFERENCE_TABLES - COORDINATOR_TABLES


def citus_keys_sql(cursor) -> tuple[list[str], list[str], list[str]]:
    """The move's key changes (docs/scaling.md, steps 3 and 4), read from the live schema: primary keys of
    distributed tables gain tenant_id, and foreign keys between distributed tables become (column, tenant_id) →
    (key, tenant_id). Three lists of statements: the new keys' indexes (built CONCURRENTLY, each on its own, while
    writers go on), the swap (one short transaction: foreign keys dropped, keys replaced, foreign keys added NOT
    VALID), and the foreign keys' validation (each on its own; no long lock). Names are kept."""
    distributed = distributed_tables(cursor)
    cursor.execute(
        """
        SELECT r.relname, c.conname,
               ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(num, pos)
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.num ORDER BY k.pos)::text[]
        FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
        WHERE n.nspname = 'public' AND c.contype = 'p'
        """
    )
    keys = {
        table: (name, columns)
        for table, name, columns in cursor.fetchall()
        if table in distributed and "tenant_id" not in columns
    }
    cursor.execute(
        """
        SELECT r.relname, c.conname, a.attname, p.relname, pa.attname, c.condeferrable, c.condeferred
        FROM pg_constraint c
        JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
        JOIN pg_class p ON p.oid = c.confrelid
        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
        JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = c.confkey[1]
        WHERE n.nspname = 'public' AND c.contype = 'f' AND cardinality(c.conkey) = 1
        ORDER BY 1, 2
        """
    )
    foreign_keys = [row for row in cursor.fetchall() if row[0] in distributed and row[3] in distributed]
    build = [
        f"CREATE UNIQUE INDEX CONCURRENTLY {table}_pkey_tenant ON {table} ({', '.join(columns)}, tenant_id)"
        for table, (_, columns) in sorted(keys.items())
    ]
    swap = [f"ALTER TABLE {table} DROP CONSTRAINT {name}" for table, name, *_ in foreign_keys]
    swap += [
        f"ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} PRIMARY KEY USING INDEX {table}_pkey_tenant"
        for table, (name, _) in sorted(keys.items())
    ]
    for table, name, column, parent, parent_column, deferrable, deferred in foreign_keys:
        timing = " DEFERRABLE" + (" INITIALLY DEFERRED" if deferred else "") if deferrable else ""
        swap.append(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({column}, tenant_id)"
            f" REFERENCES {parent} ({parent_column}, tenant_id){timing} NOT VALID"
        )
    validate = [f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}" for table, name, *_ in foreign_keys]
    return build, swap, validate
