# No NaN or Infinity in a number column a client can set (issue 30): a stored NaN passes every range check and
# cannot be written as JSON again, so every later read of its row was a 500. A float column: its value lies
# strictly between -Infinity and +Infinity (NaN is above both in PostgreSQL's ordering, and equal to itself, so
# `x = x` would let it through). A numeric column (it holds NaN, not Infinity): its value is under a bound.
#
# Rows already stored with one: a message's temperature and a telemetry point's value become NULL (unknown), as
# the ingest now leaves out a number it cannot read. Budget limits and model prices never took NaN (the API and
# the admin refused it), so they have nothing to fix. The two big tables get their CHECK without being locked
# while they are scanned (NOT VALID, fix, VALIDATE).

from django.db import migrations, models

import platform_kit.db
from platform_kit.migration_operations import AddCheckConstraintValidatedLater

NOT_FINITE = "{column} = 'NaN'::float8 OR {column} IN ('Infinity'::float8, '-Infinity'::float8)"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("sessions_app", "0021_session_all_tokens"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.CheckConstraint(
                condition=models.Q(("limit__lte", 1000000000000000)), name="budget_limit_within_bounds"
            ),
        ),
        migrations.AddConstraint(
            model_name="modelprice",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("input_usd_per_mtok__lt", 1000000),
                    ("output_usd_per_mtok__lt", 1000000),
                    ("cache_read_usd_per_mtok__lt", 1000000),
                    ("cache_write_usd_per_mtok__lt", 1000000),
                ),
                name="model_price_finite",
            ),
        ),
        AddCheckConstraintValidatedLater(
            model_name="message",
            constraint=models.CheckConstraint(
                condition=platform_kit.db.finite("temperature"), name="message_temperature_finite"
            ),
            fix_sql="UPDATE sessions_app_message SET temperature = NULL WHERE "
            + NOT_FINITE.format(column="temperature"),
        ),
        AddCheckConstraintValidatedLater(
            model_name="telemetryrecord",
            constraint=models.CheckConstraint(
                condition=platform_kit.db.finite("value") & platform_kit.db.finite("sent_value"),
                name="telemetryrecord_value_finite",
            ),
            fix_sql="UPDATE sessions_app_telemetryrecord SET"
            " value = CASE WHEN {value} THEN NULL ELSE value END,"
            " sent_value = CASE WHEN {sent} THEN NULL ELSE sent_value END"
            " WHERE {value} OR {sent}".format(
                value=NOT_FINITE.format(column="value"), sent=NOT_FINITE.format(column="sent_value")
            ),
        ),
    ]
