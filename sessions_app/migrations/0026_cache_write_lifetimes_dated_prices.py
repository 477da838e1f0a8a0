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


# Each re-derived 1-hour write, once per request (its largest, as rule 3 counts it), where rule 5 counts it:
# the hour and model of the request's first message that reported it, its session and conversation.
_SPLIT_SQL = """
CREATE TEMPORARY TABLE ace_split_writes ON COMMIT DROP AS
SELECT DISTINCT ON (m.session_id, COALESCE(m.llm_request_id::text, m.id::text))
       m.tenant_id, m.session_id, m.conversation_id, m.llm_request_id,
       date_trunc('hour', m.created_at, 'UTC') AS hour, COALESCE(NULLIF(m.model, ''), r.model, '') AS model,
       MAX(m.cache_creation_1h_tokens) OVER (PARTITION BY m.session_id, COALESCE(m.llm_request_id::text, m.id::text))
           AS one_hour
FROM sessions_app_message m LEFT JOIN sessions_app_llmrequest r ON r.id = m.llm_request_id
WHERE m.cache_creation_1h_tokens > 0
ORDER BY m.session_id, COALESCE(m.llm_request_id::text, m.id::text), m.seq
"""
_SPLIT_UPDATES = (
    """UPDATE sessions_app_llmrequest t SET cache_creation_1h_tokens = s.one_hour,
           cache_creation_5m_tokens = t.cache_creation_tokens - s.one_hour
       FROM ace_split_writes s WHERE t.id = s.llm_request_id""",
    """UPDATE sessions_app_session t SET cache_creation_1h_tokens = t.cache_creation_1h_tokens + s.one_hour,
           cache_creation_5m_tokens = t.cache_creation_5m_tokens - s.one_hour
       FROM (SELECT session_id, SUM(one_hour) AS one_hour FROM ace_split_writes GROUP BY 1) s
       WHERE t.id = s.session_id""",
    """UPDATE sessions_app_conversation t SET cache_creation_1h_tokens = t.cache_creation_1h_tokens + s.one_hour,
           cache_creation_5m_tokens = t.cache_creation_5m_tokens - s.one_hour
       FROM (SELECT conversation_id, SUM(one_hour) AS one_hour FROM ace_split_writes GROUP BY 1) s
       WHERE t.id = s.conversation_id""",
    """UPDATE sessions_app_usagehourly t SET cache_creation_1h_tokens = t.cache_creation_1h_tokens + s.one_hour,
           cache_creation_5m_tokens = t.cache_creation_5m_tokens - s.one_hour
       FROM (SELECT w.tenant_id, w.hour, x.tool, x.user_id, x.project, x.machine, w.model,
                    SUM(w.one_hour) AS one_hour
             FROM ace_split_writes w JOIN sessions_app_session x ON x.id = w.session_id
             GROUP BY 1, 2, 3, 4, 5, 6, 7) s
       WHERE (t.tenant_id, t.hour, t.tool, t.user_id, t.project, t.machine, t.model)
           = (s.tenant_id, s.hour, s.tool, s.user_id, s.project, s.machine, s.model)""",
    """UPDATE sessions_app_usagedaily t SET cache_creation_1h_tokens = t.cache_creation_1h_tokens + s.one_hour,
           cache_creation_5m_tokens = t.cache_creation_5m_tokens - s.one_hour
       FROM (SELECT w.tenant_id, (w.hour AT TIME ZONE 'UTC')::date AS day, x.tool, x.user_id, x.project, x.machine,
                    w.model, SUM(w.one_hour) AS one_hour
             FROM ace_split_writes w JOIN sessions_app_session x ON x.id = w.session_id
             GROUP BY 1, 2, 3, 4, 5, 6, 7) s
       WHERE (t.tenant_id, t.day, t.tool, t.user_id, t.project, t.machine, t.model)
           = (s.tenant_id, s.day, s.tool, s.user_id, s.project, s.machine, s.model)""",
    """UPDATE sessions_app_sessionmodelusage t SET cache_creation_1h_tokens = t.cache_creation_1h_tokens + s.one_hour,
           cache_creation_5m_tokens = t.cache_creation_5m_tokens - s.one_hour
       FROM (SELECT session_id, model, SUM(one_hour) AS one_hour FROM ace_split_writes GROUP BY 1, 2) s
       WHERE (t.session_id, t.model) = (s.session_id, s.model)""",
)


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
        cursor.execute(_SPLIT_SQL)
        cursor.execute("SELECT COUNT(*), COALESCE(SUM(one_hour), 0) FROM ace_split_writes")
        requests, tokens = cursor.fetchone()
        for update in _SPLIT_UPDATES:
            cursor.execute(update)
        cursor.execute("DROP TABLE ace_split_writes")
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
