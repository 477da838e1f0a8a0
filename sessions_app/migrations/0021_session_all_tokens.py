# The dashboard's top sessions by tokens rank by every token (input, output, cache read and write), as ccusage
# counts them: an index on that sum within a tenant, so the ranking stays a walk down an index.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built without locking out the writers of session rows (every message appended updates one).
    atomic = False

    dependencies = [
        ("sessions_app", "0020_field_labels"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="session",
            index=models.Index(
                models.F("tenant"),
                models.OrderBy(
                    models.F("input_tokens")
                    + models.F("output_tokens")
                    + models.F("cache_read_tokens")
                    + models.F("cache_creation_tokens"),
                    descending=True,
                ),
                name="session_tenant_all_tokens",
            ),
        ),
    ]
