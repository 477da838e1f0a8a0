"""The database as a test may break it on purpose."""

import contextlib

from django.db import connection


@contextlib.contextmanager
def table_renamed(table: str):
    """The table is missing while inside (renamed, then back): an unexpected failure of a real request, as in a
    half-applied migration. For live-server and transactional tests (the rename is committed)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
