# Issue 32, part 4: the tools' own cost, kept beside the computed one. Every row that counts usage gets the cost
# its sources reported (nano-dollars: exact integers the counters add like tokens) and how many requests reported
# one. Re-derived for stored messages from what their metadata kept: Claude Code's OTLP `cost_usd`, OpenCode's
# `cost`, OpenClaw's `usage.cost.total`; once per request (its largest), into its request, session, conversation,
# the roll-ups and the session's usage by model (on the first day it has for that model: 0026 put each session's
# usage by model on one day), where the live count puts it (the first message that reported it).
import sys

from django.db import migrations, models

from sessions_app.migrations._backfill import count_into_counters

_REPORTED = """COALESCE(
    CASE WHEN jsonb_typeof(metadata -> 'cost_usd') = 'number' THEN (metadata ->> 'cost_usd')::numeric END,
    CASE WHEN jsonb_typeof(metadata -> 'cost') = 'number' THEN (metadata ->> 'cost')::numeric END,
    CASE WHEN jsonb_typeof(metadata #> '{usage,cost,total}') = 'number'
         THEN (metadata #>> '{usage,cost,total}')::numeric END)"""
_FIELDS = ("reported_cost_nano_usd", "reported_cost_requests")


def reported_costs_from_metadata(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE sessions_app_message SET reported_cost_nano_usd = round({_REPORTED} * 1000000000)::bigint,
                    reported_cost_requests = 1
                WHERE role IN ('assistant', 'error') AND {_REPORTED} >= 0 AND {_REPORTED} < 1000000"""
        )
        if not cursor.rowcount:
            return
        requests, totals = count_into_counters(cursor, _FIELDS)
        nano = totals["reported_cost_nano_usd"]
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
