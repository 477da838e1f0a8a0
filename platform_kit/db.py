"""Small helpers: queries whose cost PostgreSQL cannot predict well, and many-row updates in one statement."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import psycopg
from django.db import OperationalError, connection, connections, transaction

T = TypeVar("T")


def within_time(
    fn: Callable[[], T], *, milliseconds: int, using: str = "default", planner: dict[str, str] | None = None
) -> T | None:
    """Run `fn` (some queries) in a savepoint with a statement timeout; None if it took longer.

    For optional shortcuts: a probe that is quick when it helps is abandoned, cleanly, when it does not.
    `planner` settings (e.g. {"enable_seqscan": "off"}) apply to the probe only. Every setting is put back
    afterwards: a SET LOCAL would otherwise outlast the savepoint and hold for the rest of the caller's
    transaction.
    """
    settings = {"statement_timeout": str(int(milliseconds)), **(planner or {})}
    connection = connections[using]
    try:
        with transaction.atomic(using=using):
            with connection.cursor() as cursor:
                names = list(settings)
                cursor.execute(
                    "SELECT "
                    + ", ".join(["current_setting(%s)"] * len(names))
                    + ", "
                    + ", ".join(["set_config(%s, %s, true)"] * len(names)),
                    [*names, *[part for name in names for part in (name, settings[name])]],
                )
                previous = cursor.fetchone()[: len(names)]
            result = fn()
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names)),
                    [part for name, value in zip(names, previous, strict=True) for part in (name, value)],
                )
            return result
    except OperationalError as error:
        if isinstance(error.__cause__, psycopg.errors.QueryCanceled):
            return None  # the savepoint's rollback has put the settings back
        raise


def update_rows(model, objects: list, fields: list[str]) -> None:
    """Save `fields` of many rows, each with its own values, in one `UPDATE … FROM (VALUES …)`.

    Django's bulk_update builds a CASE expression per field and row, which for a few dozen rows costs more
    Python than the statement costs PostgreSQL. Values are prepared by the fields themselves (JSON, dates,
    foreign keys by their column) and cast to the column types."""
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    names = [connection.ops.quote_name(field.column) for field in columns]
    _update_from_values(
        meta.db_table,
        names,
        [field.db_type(connection) for field in columns],
        [f"{name} = v.{name}" for name in names[1:]],
        [[field.get_db_prep_save(getattr(obj, field.attname), connection) for field in columns] for obj in objects],
    )


def add_to_rows(model, *, add: tuple[str, ...], assign: dict[str, tuple[str, str]], rows: list[tuple]) -> None:
    """The same for counters, each row given as (id, *values of `add`, *values of `assign`): the `add`
    columns get their value added, the `assign` columns ({column: (SQL type, expression of t.column and
    v.column)}) the expression. The ORM's F() expressions cost more to compile than PostgreSQL's work."""
    _update_from_values(
        model._meta.db_table,
        ["id", *add, *assign],
        ["uuid", *["bigint"] * len(add), *(sql_type for sql_type, _ in assign.values())],
        [f"{name} = t.{name} + v.{name}" for name in add] + [f"{name} = {sql}" for name, (_, sql) in assign.items()],
        rows,
    )


def _update_from_values(table: str, columns: list[str], types: list[str], sets: list[str], rows: list) -> None:
    """UPDATE table AS t SET <sets> FROM (VALUES <rows>) AS v(<columns>) WHERE t.<first> = v.<first>."""
    if not rows:
        return
    row = "(" + ", ".join(f"%s::{sql_type}" for sql_type in types) + ")"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS t SET {', '.join(sets)} FROM (VALUES {', '.join([row] * len(rows))}) "
            f"AS v({', '.join(columns)}) WHERE t.{columns[0]} = v.{columns[0]}",
            [value for values in rows for value in values],
        )
