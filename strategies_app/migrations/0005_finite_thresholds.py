# A strategy's thresholds are finite numbers or null (issue 30): the API took "Infinity" (and 1e999) for an
# accumulated threshold, and a stored Infinity could not be written as JSON again. A non-finite threshold
# already stored becomes null (off): no message score reaches an infinite one, so it never fired anyway.

from django.db import migrations, models

import platform_kit.db

NOT_FINITE = "{column} = 'NaN'::float8 OR {column} IN ('Infinity'::float8, '-Infinity'::float8)"


class Migration(migrations.Migration):
    dependencies = [
        ("strategies_app", "0004_field_labels"),
    ]

    operations = [
        migrations.RunSQL(
            "UPDATE strategies_app_strategy SET"
            " message_threshold = CASE WHEN {message} THEN NULL ELSE message_threshold END,"
            " accumulated_threshold = CASE WHEN {accumulated} THEN NULL ELSE accumulated_threshold END"
            " WHERE {message} OR {accumulated}".format(
                message=NOT_FINITE.format(column="message_threshold"),
                accumulated=NOT_FINITE.format(column="accumulated_threshold"),
            ),
            migrations.RunSQL.noop,
        ),
        migrations.AddConstraint(
            model_name="strategy",
            constraint=models.CheckConstraint(
                condition=platform_kit.db.finite("message_threshold") & platform_kit.db.finite("accumulated_threshold"),
                name="strategy_thresholds_finite",
            ),
        ),
    ]
