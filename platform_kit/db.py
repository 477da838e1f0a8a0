"""Database helpers: queries whose cost PostgreSQL cannot predict well, many-row updates in one statement,
and bulk inserts with COPY of rows made without Model.__init__."""

from __future__ import annotations

import contextlib
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import orjson
import psycopg
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, connection, connections, models, transaction
from django.db.models.base import ModelState
from psycopg.copy import LibpqWriter
from psycopg.generators import copy_to
from psycopg.types.json import Jsonb, JsonbBinaryDumper

T = TypeVar("T")


def finite(field: str) -> models.Q:
    """A CHECK condition: `field` holds a finite number (or NULL). PostgreSQL orders NaN above every number,
    Infinity included, and finds it equal to itself (so `x = x` lets it through): `x < 'Infinity'` is false for
    NaN and +Infinity alike, and `x > '-Infinity'` for -Infinity."""
    return models.Q(**{f"{field}__gt": float("-inf"), f"{field}__lt": float("inf")})


@contextlib.contextmanager
def planner_settings(settings: dict[str, str], *, using: str = "default"):
    """A transaction (a savepoint inside the caller's) whose queries run with these settings (e.g.
    {"enable_seqscan": "off"} where PostgreSQL misjudges a plan). Put back on the way out: a SET LOCAL would
    otherwise outlast the savepoint and hold for the rest of the caller's transaction. On an error the rollback
    puts them back."""
    names = list(settings)
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT "
            + ", ".join(["current_setting(%s)"] * len(names))
            + ", "
            + ", ".join(["set_config(%s, %s, true)"] * len(names)),
            [*names, *[part for name in names for part in (name, settings[name])]],
        )
        previous = cursor.fetchone()[: len(names)]
        yield
        cursor.execute(
            "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names)),
            [part for name, value in zip(names, previous, strict=True) for part in (name, value)],
        )


@contextlib.contextmanager
def held_lock(name: str, *, using: str = "default"):
    """Whether this process got the advisory lock `name` (yielded), held until the block ends, whatever
    transactions the block runs, for work that must not run twice at once (a scan of one import source).

    Taken by a transaction of a connection of its own, kept open while the block runs: a session-level advisory
    lock would not survive a pooler in transaction mode (PgBouncer hands the server connection to another client
    between transactions, and the unlock may reach another one), while a client inside a transaction keeps its
    server connection. If the process dies, its connection closes and the lock goes with it."""
    wrapper = connections[using]
    raw = wrapper.get_new_connection(wrapper.get_connection_params())
    try:
        raw.autocommit = False
        with raw.cursor() as cursor:
            # The transaction is idle while the block works: a server-wide idle timeout must not end it.
            cursor.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            cursor.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", [name])
            taken = cursor.fetchone()[0]
        yield taken
    finally:
        with contextlib.suppress(psycopg.Error):
            raw.rollback()
        raw.close()


def within_time(
    fn: Callable[[], T], *, milliseconds: int, using: str = "default", planner: dict[str, str] | None = None
) -> T | None:
    """Run `fn` (some queries) in a savepoint with a statement timeout; None if it took longer.

    For optional shortcuts: a probe that is quick when it helps is abandoned, cleanly, when it does not.
    `planner` settings (e.g. {"enable_seqscan": "off"}) apply to the probe only.
    """
    try:
        with planner_settings({"statement_timeout": str(int(milliseconds)), **(planner or {})}, using=using):
            return fn()
    except OperationalError as error:
        if isinstance(error.__cause__, psycopg.errors.QueryCanceled):
            return None  # the savepoint's rollback has put the settings back
        raise


def statistics_refreshed(*tables: str, using: str = "default", margin: int = 1000) -> list[str]:
    """ANALYZE those of `tables` holding more than twice the rows (plus `margin`) their planner statistics make
    PostgreSQL expect; returns their names.

    For the statements whose good plan depends on the tables' sizes: right after a bulk write (a first import of
    thousands of messages) and before autovacuum has come by, PostgreSQL plans for the tables as they were. On
    the statistics of an emptied table (rows per page: 0) it picks nested loops whose inner side reads a whole
    index per outer row, and a count over 10,000 messages takes minutes instead of milliseconds. What the planner
    expects is its own estimate (rows per page at the last ANALYZE times the pages now); the rows there are, the
    statistics collector's live count plus this transaction's own inserts and deletes. The check reads no row of
    the tables; the ANALYZE samples at most 30,000 rows a table, once per such growth. A concurrent caller waits for
    that ANALYZE (tens of milliseconds; an autovacuum's is cancelled for it) rather than skip it and plan blind;
    run outside a long transaction, which would hold its lock to the end."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            """
            SELECT relname FROM (
                SELECT c.relname,
                       CASE WHEN c.relpages > 0 AND c.reltuples >= 0
                            THEN c.reltuples / c.relpages
                                 * (pg_relation_size(c.oid) / current_setting('block_size')::int)
                            ELSE 0 END AS expected,
                       pg_stat_get_live_tuples(c.oid) + pg_stat_get_xact_tuples_inserted(c.oid)
                           - pg_stat_get_xact_tuples_deleted(c.oid) AS present
                FROM pg_class c WHERE c.oid = ANY(%s::regclass[])
            ) t
            WHERE present > 2 * expected + %s ORDER BY relname
            """,
            [list(tables), margin],
        )
        stale = [name for (name,) in cursor.fetchall()]
        if stale:
            cursor.execute("ANALYZE " + ", ".join(connections[using].ops.quote_name(t) for t in stale))
    return stale


# A statement, or one clause of a larger one: (SQL, parameters).
Clause = tuple[str, list]


def update_rows(model, objects: list, fields: list[str]) -> None:
    """Save `fields` of many rows, each with its own values, in one `UPDATE … FROM (VALUES …)`.

    Django's bulk_update builds a CASE expression per field and row, which for a few dozen rows costs more
    Python than the statement costs PostgreSQL. Values are prepared by the fields themselves (dates, foreign
    keys by their column) and cast to the column types; JSON as COPY writes it (NUL made U+FFFD)."""
    execute(update_rows_sql(model, objects, fields))


def update_rows_sql(model, objects: list, fields: list[str]) -> Clause | None:
    """The statement of `update_rows`, to run on its own or as a clause of a larger one (None: no rows)."""
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    names = [connection.ops.quote_name(field.column) for field in columns]
    return _update_from_values(
        meta.db_table,
        names,
        [field.db_type(connection) for field in columns],
        [f"{name} = v.{name}" for name in names[1:]],
        [[_prepare(field, getattr(obj, field.attname)) for field in columns] for obj in objects],
    )


def _prepare(field, value):
    if isinstance(field, models.JSONField):
        return None if value is None else Jsonb(value, dumps=_json_text)
    return field.get_db_prep_save(value, connection)


def add_to_rows(model, *, add: tuple[str, ...], assign: dict[str, tuple[str, str]], rows: list[tuple]) -> None:
    """The same for counters, each row given as (id, *values of `add`, *values of `assign`): the `add`
    columns get their value added, the `assign` columns ({column: (SQL type, expression of t.column and
    v.column)}) the expression. The ORM's F() expressions cost more to compile than PostgreSQL's work."""
    execute(add_to_rows_sql(model, add=add, assign=assign, rows=rows))


def add_to_rows_sql(model, *, add: tuple[str, ...], assign: dict[str, tuple[str, str]], rows: list[tuple]):
    """The statement of `add_to_rows` (None: no rows)."""
    return _update_from_values(
        model._meta.db_table,
        ["id", *add, *assign],
        ["uuid", *["bigint"] * len(add), *(sql_type for sql_type, _ in assign.values())],
        [f"{name} = t.{name} + v.{name}" for name in add] + [f"{name} = {sql}" for name, (_, sql) in assign.items()],
        rows,
    )


def _update_from_values(table: str, columns: list[str], types: list[str], sets: list[str], rows: list):
    """UPDATE table AS t SET <sets> FROM (VALUES <rows>) AS v(<columns>) WHERE t.<first> = v.<first>."""
    if not rows:
        return None
    row = "(" + ", ".join(f"%s::{sql_type}" for sql_type in types) + ")"
    return (
        f"UPDATE {table} AS t SET {', '.join(sets)} FROM (VALUES {', '.join([row] * len(rows))}) "
        f"AS v({', '.join(columns)}) WHERE t.{columns[0]} = v.{columns[0]}",
        [value for values in rows for value in values],
    )


def execute(clause: Clause | None) -> None:
    if clause is not None:
        with connection.cursor() as cursor:
            cursor.execute(*clause)


class _PreparingCursor(psycopg.Cursor):
    """psycopg's server-side binding cursor, every statement prepared (psycopg keeps the last `prepared_max`, 100,
    per connection, and deallocates the oldest)."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)

    def _convert_query(self, query, params=None):
        # Kept, as psycopg's client-side cursor keeps it: Django logs `_query.query` (the text, with $n).
        self._query = super()._convert_query(query, params)
        return self._query


# Server-side binding sends each parameter on its own, and the protocol counts them in 16 bits.
PREPARED_MAX_PARAMS = 30_000


@contextlib.contextmanager
def prepared_cursor():
    """A cursor (logged and wrapped as Django wraps any) whose statements PostgreSQL parses and plans once per
    connection: for the statements of fixed shape run many times a second (a chat turn's, a small append's),
    where planning them cost PostgreSQL more than running them. The parameters go apart from the text, so
    kilobytes of content are not quoted into it either. ACE_DB_PREPARED=false gives a plain cursor."""
    if not settings.ACE_DB_PREPARED:
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:  # Django's: never prepare. Prepare only what is asked for (prepare=True).
        raw.prepare_threshold = 2**31 - 1
    with connection._prepare_cursor(_PreparingCursor(raw)) as cursor:
        yield cursor


def together(clauses: list[Clause | None], select: Clause = ("SELECT 1 WHERE false", [])) -> Clause | None:
    """One statement of several data-modifying ones, as WITH clauses before `select`: one round trip, and
    the constraints checked at its end (a row may refer to one inserted by another clause). PostgreSQL runs
    them all on one snapshot, so no two may change the same row. None when there is nothing to write."""
    clauses = [clause for clause in clauses if clause is not None]
    if not clauses:
        return None
    sql = "".join(f"{'WITH' if i == 0 else ','} w{i} AS ({clause}) " for i, (clause, _) in enumerate(clauses))
    return sql + select[0], [value for _, params in clauses for value in params] + list(select[1])


# -- rows read as model instances, without compiling a query --------------------------------------------------
_SELECTS: dict[tuple, tuple[str, list]] = {}


def select_instances(sql: str, params: list, tables: tuple[tuple[str, type], ...]) -> tuple | None:
    """The first row of `sql` as (one instance per table, *the row's other values), or None when it has none.

    `sql`'s `{columns}` becomes every concrete column of `tables` ((alias, model), in order) but the ones the
    model's `db_computed_fields` names (a message's search vector: deferred, as `.defer()` would), then whatever
    else it selects. For the calls made many times a second, where the ORM would compile the same query (each
    select_related model's fields, joins and aliases) on every call: the text is built once."""
    key = (sql, tables)
    built = _SELECTS.get(key)
    if built is None:
        columns, layout = [], []
        for alias, model in tables:
            skip = getattr(model, "db_computed_fields", ())
            fields = [field for field in model._meta.concrete_fields if field.attname not in skip]
            columns.extend(f"{alias}.{connection.ops.quote_name(field.column)}" for field in fields)
            converters = [
                (position, field, converter)
                for position, field in enumerate(fields)
                for converter in field.get_db_converters(connection)
            ]
            layout.append((model, [field.attname for field in fields], converters))
        built = _SELECTS[key] = (sql.format(columns=", ".join(columns)), layout)
    text, layout = built
    with prepared_cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    if row is None:
        return None
    instances, start, alias = [], 0, connection.alias
    for model, names, converters in layout:
        values = list(row[start : start + len(names)])
        for position, field, converter in converters:
            values[position] = converter(values[position], field, connection)
        instances.append(model.from_db(alias, names, values))
        start += len(names)
    return (*instances, *row[start:])


# -- rows made and inserted in bulk -------------------------------------------------------------------------
def _field_defaults(model) -> tuple[dict, list]:
    """The model's field defaults: (constant values by attname, [(attname, callable)])."""
    cached = _FIELD_DEFAULTS.get(model)
    if cached is None:
        constants, calls = {}, []
        for field in model._meta.concrete_fields:
            if field.has_default() and callable(field.default):
                calls.append((field.attname, field.default))
            else:
                constants[field.attname] = field.get_default()
        cached = _FIELD_DEFAULTS[model] = (constants, calls)
    return cached


_FIELD_DEFAULTS: dict = {}


def unsaved_instance(model_class, /, **values):
    """A new, unsaved instance with every field set (the model's defaults, then `values`), without
    Model.__init__: a bulk append makes one per message, and __init__ (signals, descriptors, per-field
    checks) costs more than the rest of the append. `copy_insert` writes such instances."""
    constants, calls = _field_defaults(model_class)
    instance = model_class.__new__(model_class)
    instance._state = ModelState()
    attributes = instance.__dict__
    attributes.update(constants)
    for attname, default in calls:
        if attname not in values:
            attributes[attname] = default()
    attributes.update(values)
    return instance


def _json_dumps(value) -> bytes:
    """JSON for a jsonb column, with orjson (several times faster than json here); what orjson refuses
    (integers over 64 bits, keys that are not strings) goes through json. jsonb cannot hold NUL: it becomes
    U+FFFD, as in the text of imported messages."""
    try:
        data = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        data = json.dumps(value, ensure_ascii=False).encode()
    if b"\\u0000" in data:  # perhaps a NUL (or a literal backslash-u0000, which the cleaning leaves as it is)
        data = json.dumps(_without_nul(value), ensure_ascii=False).encode()
    return data


def _json_text(value) -> str:
    return _json_dumps(value).decode()


def _without_nul(value):
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(str(key)): _without_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nul(item) for item in value]
    return value


class _JsonbDumper(JsonbBinaryDumper):
    """jsonb for the dicts and lists of a COPY (the tables written with it have no array columns): the binary
    jsonb format's version byte and the JSON, in one call (a COPY of messages makes one or two per row)."""

    def dump(self, obj) -> bytes:
        return b"\x01" + _json_dumps(obj)


class FlushingCopyWriter(LibpqWriter):
    """Sends each buffer of a COPY before taking the next. psycopg's writer leaves the sending to libpq, which
    keeps what the socket did not take and moves the rest of its buffer down after every partial send:
    while PostgreSQL is slower than the rows are made (an import), that backlog grows to megabytes and
    moving it took 0.9 of the 2.1 CPU-seconds of Python a COPY of 25,000 messages used. The sending
    is psycopg's own (`psycopg.generators.copy_to`, as its writer uses it) with its flush asked for."""

    CHUNK = 128 * 1024  # psycopg's own largest piece for one put (psycopg issue #255)

    def write(self, data) -> None:
        wait, pgconn = self.connection.wait, self._pgconn
        for start in range(0, len(data), self.CHUNK):
            wait(copy_to(pgconn, data[start : start + self.CHUNK], flush=True))


@dataclass(frozen=True)
class _CopyPlan:
    sql: str
    insert: str  # INSERT INTO table (columns) VALUES, for a few rows inside a larger statement
    placeholders: str  # one row of it: (%s::type, …)
    row: operator.itemgetter  # the row's values, in column order, from an instance's __dict__
    types: tuple[str, ...]  # the columns' types: values are formatted by column, not looked up by type


_COPY_PLANS: dict = {}
_COPY_TYPES = {"timestamp with time zone": "timestamptz", "double precision": "float8", "integer": "int4"}


def _written_as_save_would(field) -> bool:
    """Whether the value on the instance is what Model.save() would store: not for a database default, nor
    for a value save() computes (auto_now, auto_now_add, any field with a pre_save of its own)."""
    if field.has_db_default():
        return False
    if isinstance(field, models.DateField | models.TimeField):  # DateTimeField is a DateField
        return not (field.auto_now or field.auto_now_add)
    return type(field).pre_save is models.Field.pre_save


def _copy_plan(model) -> _CopyPlan:
    plan = _COPY_PLANS.get(model)
    if plan is None:
        skip = getattr(model, "db_computed_fields", ())
        fields = [f for f in model._meta.concrete_fields if not f.generated and f.attname not in skip]
        unwritable = [f.name for f in fields if not _written_as_save_would(f)]
        if unwritable:
            raise ImproperlyConfigured(
                f"copy_insert cannot write {model.__name__}.{', '.join(unwritable)} as save() would (a database "
                "default, or a value computed on save): name the column in the model's db_computed_fields if "
                "the database fills it, or write these rows with bulk_create"
            )
        columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        types = []
        for f in fields:
            db_type = f.rel_db_type(connection) if f.is_relation else f.db_type(connection)
            base = db_type.split("(")[0]
            types.append(_COPY_TYPES.get(base, base))
        plan = _COPY_PLANS[model] = _CopyPlan(
            sql=f"COPY {model._meta.db_table} ({columns}) FROM STDIN (FORMAT BINARY)",
            insert=f"INSERT INTO {model._meta.db_table} ({columns}) VALUES ",
            placeholders="(" + ", ".join(f"%s::{sql_type}" for sql_type in types) + ")",
            row=operator.itemgetter(*(f.attname for f in fields)),
            types=tuple(types),
        )
    return plan


def copy_insert(model, objects: list) -> None:
    """Insert instances (from `unsaved_instance`) with COPY, several times faster than INSERT for batches.
    The ids are made in Python and nothing has to come back (bulk_create would also return each message's
    generated search vector). Columns the model lists in `db_computed_fields` are left to the database.
    Binary COPY: text goes as it is, where the text format escapes every newline and tab of the content
    and PostgreSQL unescapes them again (a quarter of its time storing an import's messages)."""
    if not objects:
        return
    plan = _copy_plan(model)
    row = plan.row
    with connection.cursor() as cursor:
        cursor.cursor.adapters.register_dumper(dict, _JsonbDumper)
        cursor.cursor.adapters.register_dumper(list, _JsonbDumper)
        with cursor.cursor.copy(plan.sql, writer=FlushingCopyWriter(cursor.cursor)) as copy:
            copy.set_types(plan.types)
            write_row = copy.write_row
            for obj in objects:
                write_row(row(obj.__dict__))
    mark_saved(objects)


def insert_rows_sql(model, objects: list) -> Clause | None:
    """`copy_insert`'s rows as one INSERT, to write a few of them as a clause of a larger statement (`together`)
    where a COPY would be a round trip of its own. Call `mark_saved` once it has run."""
    if not objects:
        return None
    plan = _copy_plan(model)
    row = plan.row
    params = []
    for obj in objects:
        params.extend(
            Jsonb(value, dumps=_json_text) if isinstance(value, dict | list) else value for value in row(obj.__dict__)
        )
    return plan.insert + ", ".join([plan.placeholders] * len(objects)), params


def mark_saved(objects: list) -> None:
    alias = connection.alias
    for obj in objects:
        state = obj._state
        state.adding, state.db = False, alias


class DeleteProtected(Exception):
    """A row to delete is referenced through a PROTECT (or RESTRICT) foreign key."""


def cascade_delete(model, where: str, params: list, *, depth: int = 0) -> dict[str, int]:
    """Delete the rows of `model` matching `where` (SQL over its table) and, first, what refers to them, as the
    foreign keys' `on_delete` says (CASCADE deletes, SET_NULL clears, PROTECT/RESTRICT refuses), in SQL
    statements whose cost does not depend on Python: Django's `QuerySet.delete()` loads every related row's
    key into memory first. Returns the rows deleted per model label (those with none left out).

    Only the database's rows are touched: no signals, no `delete()` methods. Callers delete first, themselves,
    what a SET_NULL would otherwise only clear, so clearing never updates rows about to be deleted."""
    if depth > 8:
        raise RecursionError(f"cascade_delete: relations of {model._meta.label} nest too deep")
    meta = model._meta
    quote = connection.ops.quote_name
    keys = f"SELECT {quote(meta.pk.column)} FROM {quote(meta.db_table)} WHERE {where}"
    deleted: dict[str, int] = {}
    relations = [
        field
        for field in meta.get_fields(include_hidden=True)
        if field.auto_created and not field.concrete and (field.one_to_one or field.one_to_many)
    ]
    for relation in relations:
        related, column = relation.related_model, relation.field.column
        child_where = f"{quote(column)} IN ({keys})"
        on_delete = relation.on_delete
        if on_delete is models.CASCADE:
            for label, count in cascade_delete(related, child_where, params, depth=depth + 1).items():
                deleted[label] = deleted.get(label, 0) + count
        elif on_delete is models.SET_NULL:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {quote(related._meta.db_table)} SET {quote(column)} = NULL WHERE {child_where}", params
                )
        elif on_delete in (models.PROTECT, models.RESTRICT):
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT EXISTS (SELECT 1 FROM {quote(related._meta.db_table)} WHERE {child_where})", params
                )
                if cursor.fetchone()[0]:
                    raise DeleteProtected(f"{related._meta.label} rows refer to the {meta.label} rows to delete")
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {quote(meta.db_table)} WHERE {where}", params)
        if cursor.rowcount:
            deleted[meta.label] = deleted.get(meta.label, 0) + cursor.rowcount
    return deleted
