# Issue 32, part 4: the tools' own cost, kept beside the computed one. Every row that counts usage gets the cost
# its sources reported (nano-dollars: exact integers the counters add like tokens) and how many requests reported
# one. Re-derived for stored messages from what their metadata kept: Claude Code's OTLP `cost_usd`, OpenCode's
# `cost`, OpenClaw's `usage.cost.total`; once per request (its largest), into its request, session, conversation,
# the roll-ups and the session's usage by model (on the first day it has for that model: 0026 put each session's
# usage by model on one day), where the live count puts it (the first message that reported it).
import sys

from django.db import migrations, models

_REPORTED = """COALESCE(
    CASE WHEN jsonb_typeof(metadata -> 'cost_usd') = 'number' THEN (metadata ->> 'cost_usd')::numeric END,
    CASE WHEN jsonb_typeof(metadata -> 'cost') = 'number' THEN (metadata ->> 'cost')::numeric END,
    CASE WHEN jsonb_typeof(metadata #> '{usage,cost,total}') = 'number'
         THEN (metadata #>> '{usage,cost,total}')::numeric END)"""
_FIELDS = ("reported_cost_nano_usd", "reported_cost_requests")
_CONTRIBUTIONS = """
CREATE TEMPORARY TABLE ace_reported_costs ON COMMIT DROP AS
SELECT DISTINCT ON (m.session_id, COALESCE(m.llm_request_id::text, m.id::text))
       m.tenant_id, m.session_id, m.conversation_id, m.llm_request_id,
       date_trunc('hour', m.created_at, 'UTC') AS hour, COALESCE(NULLIF(m.model, ''), r.model, '') AS model,
       MAX(m.reported_cost_nano_usd) OVER (PARTITION BY m.session_id, COALESCE(m.llm_request_id::text, m.id::text))
           AS reported_cost_nano_usd,
       1 AS reported_cost_requests
FROM sessions_app_message m LEFT JOIN sessions_app_llmrequest r ON r.id = m.llm_request_id
WHERE m.reported_cost_nano_usd IS NOT NULL AND m.api_calls IS NULL
ORDER BY m.session_id, COALESCE(m.llm_request_id::text, m.id::text), m.seq
"""
_ADD = ", ".join(f"{field} = t.{field} + s.{field}" for field in _FIELDS)
_SUMS = ", ".join(f"SUM({field}) AS {field}" for field in _FIELDS)
_SUMS_OF_W = ", ".join(f"SUM(w.{field}) AS {field}" for field in _FIELDS)
_ROLLUP_DIMENSIONS = "w.tenant_id, {bucket}, x.tool, x.user_id, x.project, x.machine, w.model"
_UPDATES = (
    """UPDATE sessions_app_llmrequest t SET reported_cost_nano_usd = s.reported_cost_nano_usd,
            reported_cost_requests = 1 FROM ace_reported_costs s WHERE t.id = s.llm_request_id""",
    f"""UPDATE sessions_app_session t SET {_ADD}
        FROM (SELECT session_id, {_SUMS} FROM ace_reported_costs GROUP BY 1) s WHERE t.id = s.session_id""",
    f"""UPDATE sessions_app_conversation t SET {_ADD}
        FROM (SELECT conversation_id, {_SUMS} FROM ace_reported_costs GROUP BY 1) s WHERE t.id = s.conversation_id""",
    f"""UPDATE sessions_app_usagehourly t SET {_ADD}
        FROM (SELECT {_ROLLUP_DIMENSIONS.format(bucket="w.hour AS bucket")}, {_SUMS_OF_W}
              FROM ace_reported_costs w JOIN sessions_app_session x ON x.id = w.session_id
              GROUP BY 1, 2, 3, 4, 5, 6, 7) s
        WHERE (t.tenant_id, t.hour, t.tool, t.user_id, t.project, t.machine, t.model)
            = (s.tenant_id, s.bucket, s.tool, s.user_id, s.project, s.machine, s.model)""",
    f"""UPDATE sessions_app_usagedaily t SET {_ADD}
        FROM (SELECT {_ROLLUP_DIMENSIONS.format(bucket="(w.hour AT TIME ZONE 'UTC')::date AS bucket")}, {_SUMS_OF_W}
              FROM ace_reported_costs w JOIN sessions_app_session x ON x.id = w.session_id
              GROUP BY 1, 2, 3, 4, 5, 6, 7) s
        WHERE (t.tenant_id, t.day, t.tool, t.user_id, t.project, t.machine, t.model)
            = (s.tenant_id, s.bucket, s.tool, s.user_id, s.project, s.machine, s.model)""",
    f"""UPDATE sessions_app_sessionmodelusage t SET {_ADD}
        FROM (SELECT c.session_id, c.model, {_SUMS},
                     (SELECT MIN(u.day) FROM sessions_app_sessionmodelusage u
                      WHERE u.session_id = c.session_id AND u.model = c.model) AS day
              FROM ace_reported_costs c GROUP BY 1, 2) s
        WHERE (t.session_id, t.model, t.day) = (s.session_id, s.model, s.day)""",
)


def reported_costs_from_metadata(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE sessions_app_message SET reported_cost_nano_usd = round({_REPORTED} * 1000000000)::bigint,
                    reported_cost_requests = 1
                WHERE role IN ('assistant', 'error') AND {_REPORTED} >= 0 AND {_REPORTED} < 1000000"""
        )
        if not cursor.rowcount:
            return
        cursor.execute(_CONTRIBUTIONS)
        cursor.execute("SELECT COUNT(*), COALESCE(SUM(reported_cost_nano_usd), 0) FROM ace_reported_costs")
        requests, nano = cursor.fetchone()
        for update in _UPDATES:
            cursor.execute(update)
        cursor.execute("DROP TABLE ace_reported_costs")
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    sys.stdout.write(
        f"\n  {requests} stored requests had a cost reported by their source (USD {nano / 10**9:,.6f} in all): "
        "now kept beside the computed cost."
    )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0027_usage_plans"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="reported_cost_nano_usd",
            field=models.BigIntegerField(
                default=0,
                help_text="What the sources reported the calls cost, in 10^-9 USD",
                verbose_name="reported cost (nano-USD)",
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="reported_cost_requests",
            field=models.BigIntegerField(default=0, help_text="The requests that reported a cost"),
        ),
        migrations.AddField(
            model_name="llmrequest",
            name="reported_cost_nano_usd",
            field=models.BigIntegerField(
                default=0,
                help_text="What the sources reported the calls cost, in 10^-9 USD",
                verbose_name="reported cost (nano-USD)",
            ),
        ),
        migrations.AddField(
            model_name="llmrequest",
            name="reported_cost_requests",
            field=models.BigIntegerField(default=0, help_text="The requests that reported a cost"),
        ),
        migrations.AddField(
            model_name="message",
            name="reported_cost_nano_usd",
            field=models.BigIntegerField(
                blank=True,
                help_text="What the source reported the call cost",
                null=True,
                verbose_name="reported cost (nano-USD)",
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="reported_cost_requests",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="reported_cost_nano_usd",
            field=models.BigIntegerField(
                default=0,
                help_text="What the sources reported the calls cost, in 10^-9 USD",
                verbose_name="reported cost (nano-USD)",
            ),
        ),
        migrations.AddField(
            model_name="session",
            name="reported_cost_requests",
            field=models.BigIntegerField(default=0, help_text="The requests that reported a cost"),
        ),
        migrations.AddField(
            model_name="sessionmodelusage",
            name="reported_cost_nano_usd",
            field=models.BigIntegerField(default=0, verbose_name="reported cost (nano-USD)"),
        ),
        migrations.AddField(
            model_name="sessionmodelusage",
            name="reported_cost_requests",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="usagedaily",
            name="reported_cost_nano_usd",
            field=models.BigIntegerField(
                default=0,
                help_text="What the sources reported the calls cost, in 10^-9 USD",
                verbose_name="reported cost (nano-USD)",
            ),
        ),
        migrations.AddField(
            model_name="usagedaily",
            name="reported_cost_requests",
            field=models.BigIntegerField(default=0, help_text="The requests that reported a cost"),
        ),
        migrations.AddField(
            model_name="usagehourly",
            name="reported_cost_nano_usd",
            field=models.BigIntegerField(
                default=0,
                help_text="What the sources reported the calls cost, in 10^-9 USD",
                verbose_name="reported cost (nano-USD)",
            ),
        ),
        migrations.AddField(
            model_name="usagehourly",
            name="reported_cost_requests",
            field=models.BigIntegerField(default=0, help_text="The requests that reported a cost"),
        ),
        migrations.RunPython(reported_costs_from_metadata, migrations.RunPython.noop, elidable=True),
    ]
