# An aggregate that sums bigint into bigint: what the grouped statistics and the dashboard sum their roll-up columns
# with. PostgreSQL's SUM(bigint) accumulates in a 128-bit state it allocates per group and returns numeric; this
# one keeps a plain bigint (int8pl: an error on overflow, never a wrong sum, as SUM(...)::bigint gave) and sums a
# roll-up row's two dozen columns in a fraction of the time (sessions_app/selectors/usage.py: SUM_BIGINT). NULL
# for no rows, as SUM.

from django.db import migrations

CREATE = """
CREATE AGGREGATE ace_sum_bigint(bigint) (
    SFUNC = int8pl, STYPE = bigint, COMBINEFUNC = int8pl, PARALLEL = SAFE
);
"""
DROP = "DROP AGGREGATE IF EXISTS ace_sum_bigint(bigint);"


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0031_prices_deepseek_kimi_minimax_glm_qwen")]

    operations = [migrations.RunSQL(CREATE, DROP)]
