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
