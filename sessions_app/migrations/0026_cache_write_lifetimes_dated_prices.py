# Issue 32: money as exact as the tokens.
#
# 1. Cache writes by lifetime. Every row that counts tokens gets `cache_creation_5m_tokens` and
#    `cache_creation_1h_tokens` (their sum is `cache_creation_tokens`). The importers kept only the sum until now,
#    but Claude Code responses keep their whole `usage` in the message's metadata, `cache_creation` split
#    included: their 1-hour writes are re-derived from it, and added to their request, session, conversation,
#    roll-ups and session usage by model. Every other existing write is counted as a 5-minute one: the API's
#    default lifetime, and how it was priced until now. The migration says how many requests each concerns
#    (docs/accounting.md, "Cache writes by lifetime").
# 2. Dated prices: `effective_from` (empty: since always), and a price for 1-hour cache writes (Anthropic lists
#    them at 2x input; other providers have no such writes: their 5-minute price is kept).
# 3. A session's usage by model is kept per UTC day too, so that a session spanning a price change is priced
#    at the price of each day. Existing rows are put on the session's first day; `manage.py ace_recount
#    --rollups --fix` splits them by day exactly (it recounts from the messages).

import sys

from django.db import migrations, models

from sessions_app.migrations._backfill import count_into_counters

_COUNTING_TABLES = (
    ("message", "sessions_app_message"),
    ("llmrequest", "sessions_app_llmrequest"),
    ("session", "sessions_app_session"),
    ("conversation", "sessions_app_conversation"),
    ("usagehourly", "sessions_app_usagehourly"),
    ("usagedaily", "sessions_app_usagedaily"),
    ("sessionmodelusage", "sessions_app_sessionmodelusage"),
)


def _lifetime_fields(model_name: str) -> list:
    nullable = model_name == "message"  # a message reports tokens or not; every counter starts at 0
    kwargs = {"null": True, "blank": True} if nullable else {"default": 0}
    return [
        migrations.AddField(
            model_name=model_name,
            name="cache_creation_5m_tokens",
            field=models.BigIntegerField(verbose_name="5-minute cache writes", **kwargs),
        ),
        migrations.AddField(
            model_name=model_name,
            name="cache_creation_1h_tokens",
            field=models.BigIntegerField(verbose_name="1-hour cache writes", **kwargs),
        ),
    ]


def count_existing_writes_as_5_minutes(apps, schema_editor):
    counted = 0
    with schema_editor.connection.cursor() as cursor:
        for model_name, table in _COUNTING_TABLES:
            if model_name == "message":
                cursor.execute(
                    f"UPDATE {table} SET cache_creation_5m_tokens = cache_creation_tokens, "
                    "cache_creation_1h_tokens = 0 WHERE cache_creation_tokens IS NOT NULL"
                )
            else:
                cursor.execute(
                    f"UPDATE {table} SET cache_creation_5m_tokens = cache_creation_tokens "
                    "WHERE cache_creation_tokens <> 0"
                )
            if model_name == "llmrequest":
                counted = cursor.rowcount
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the ALTER TABLEs that follow need no pending events
    if counted:
        sys.stdout.write(
            f"\n  {counted} stored LLM requests wrote to a cache: counted as 5-minute writes (the API's default "
            "lifetime, and how they were priced until now) unless their Claude Code usage says otherwise (below)."
        )


# The counters whose 5-minute writes are their cache writes less the 1-hour ones, once those are counted.
_COUNTER_TABLES = [table for model_name, table in _COUNTING_TABLES if model_name != "message"]


def split_claude_code_writes_from_their_usage(apps, schema_editor):
    """The 1-hour writes of stored Claude Code responses, from the `usage` their metadata keeps."""
    path = "'{usage,cache_creation,ephemeral_1h_input_tokens}'"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE sessions_app_message SET
                    cache_creation_1h_tokens = LEAST((metadata #>> {path})::bigint, cache_creation_tokens),
                    cache_creation_5m_tokens = cache_creation_tokens
                        - LEAST((metadata #>> {path})::bigint, cache_creation_tokens)
                WHERE cache_creation_tokens > 0 AND metadata #>> {path} ~ '^[0-9]{{1,12}}$'
                  AND (metadata #>> {path})::bigint > 0"""
        )
        if not cursor.rowcount:
            return
        requests, totals = count_into_counters(
            cursor, ("cache_creation_1h_tokens",), where="m.cache_creation_1h_tokens > 0"
        )
        tokens = totals["cache_creation_1h_tokens"]
        for table in _COUNTER_TABLES:
            cursor.execute(
                f"UPDATE {table} SET cache_creation_5m_tokens = cache_creation_tokens - cache_creation_1h_tokens "
                "WHERE cache_creation_1h_tokens > 0"
            )
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    sys.stdout.write(
        f"\n  {requests} stored requests wrote {tokens} tokens to a 1-hour cache (re-derived from their Claude Code "
        "usage): now counted and priced as 1-hour writes."
    )


def one_hour_writes_at_twice_input(apps, schema_editor):
    ModelPrice = apps.get_model("sessions_app", "ModelPrice")
    for price in ModelPrice.objects.all():
        anthropic = price.provider == "anthropic" or price.model.startswith("claude")
        price.cache_write_1h_usd_per_mtok = (
            price.input_usd_per_mtok * 2 if anthropic else price.cache_write_usd_per_mtok
        )
        price.save(update_fields=["cache_write_1h_usd_per_mtok"])


def usage_by_model_on_the_sessions_first_day(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sessions_app_sessionmodelusage u SET day = (s.started_at AT TIME ZONE 'UTC')::date "
            "FROM sessions_app_session s WHERE s.id = u.session_id"
        )
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0025_export_model_move")]

    operations = [
        *[operation for model_name, _ in _COUNTING_TABLES for operation in _lifetime_fields(model_name)],
        migrations.RunPython(count_existing_writes_as_5_minutes, migrations.RunPython.noop, elidable=True),
        # Dated prices and the 1-hour cache write price.
        migrations.AddField(
            model_name="modelprice",
            name="cache_write_1h_usd_per_mtok",
            field=models.DecimalField(
                decimal_places=6,
                blank=True,
                default=0,
                help_text="USD per million tokens written to a 1-hour cache; empty: 2x input, as Anthropic prices them",
                max_digits=12,
                verbose_name="cache write (1 hour)",
            ),
            preserve_default=False,
        ),
        migrations.RunPython(one_hour_writes_at_twice_input, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="modelprice",
            name="cache_write_usd_per_mtok",
            field=models.DecimalField(
                decimal_places=6,
                help_text="USD per million tokens written to a 5-minute cache (and writes whose lifetime is not "
                "reported)",
                max_digits=12,
                verbose_name="cache write (5 minutes)",
            ),
        ),
        migrations.AddField(
            model_name="modelprice",
            name="effective_from",
            field=models.DateField(
                blank=True,
                null=True,
                help_text="The UTC day this price took effect; empty: since always. Usage is priced at the price in "
                "force on the day it happened.",
            ),
        ),
        migrations.RemoveConstraint(model_name="modelprice", name="model_price_key"),
        migrations.AddConstraint(
            model_name="modelprice",
            constraint=models.UniqueConstraint(
                fields=("model", "match", "effective_from"), name="model_price_key", nulls_distinct=False
            ),
        ),
        migrations.RemoveConstraint(model_name="modelprice", name="model_price_not_negative"),
        migrations.AddConstraint(
            model_name="modelprice",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("input_usd_per_mtok__gte", 0),
                    ("output_usd_per_mtok__gte", 0),
                    ("cache_read_usd_per_mtok__gte", 0),
                    ("cache_write_usd_per_mtok__gte", 0),
                    ("cache_write_1h_usd_per_mtok__gte", 0),
                ),
                name="model_price_not_negative",
            ),
        ),
        migrations.RemoveConstraint(model_name="modelprice", name="model_price_finite"),
        migrations.AddConstraint(
            model_name="modelprice",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("input_usd_per_mtok__lt", 1000000),
                    ("output_usd_per_mtok__lt", 1000000),
                    ("cache_read_usd_per_mtok__lt", 1000000),
                    ("cache_write_usd_per_mtok__lt", 1000000),
                    ("cache_write_1h_usd_per_mtok__lt", 1000000),
                ),
                name="model_price_finite",
            ),
        ),
        migrations.AlterModelOptions(
            name="modelprice",
            options={
                "ordering": ["provider", "model", "match", models.F("effective_from").asc(nulls_first=True)],
                "verbose_name": "model price",
            },
        ),
        # A session's usage by model, per UTC day.
        migrations.AddField(
            model_name="sessionmodelusage",
            name="day",
            field=models.DateField(null=True),
        ),
        migrations.RunPython(usage_by_model_on_the_sessions_first_day, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="sessionmodelusage",
            name="day",
            field=models.DateField(help_text="The UTC day the usage happened (a price applies as it was that day)"),
        ),
        migrations.RemoveConstraint(model_name="sessionmodelusage", name="session_model_usage_key"),
        migrations.AddConstraint(
            model_name="sessionmodelusage",
            constraint=models.UniqueConstraint(fields=("session", "model", "day"), name="session_model_day_usage_key"),
        ),
        migrations.RunPython(split_claude_code_writes_from_their_usage, migrations.RunPython.noop, elidable=True),
        migrations.AlterModelOptions(
            name="sessionmodelusage",
            options={"verbose_name": "session usage by model", "verbose_name_plural": "session usage by model"},
        ),
    ]
