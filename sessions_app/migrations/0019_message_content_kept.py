# The messages retention may still purge, indexed apart so a run never reads the purged history again.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built without locking out appends: the message table is the largest one.
    atomic = False

    dependencies = [
        ("sessions_app", "0018_export_withdrawn"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="message",
            index=models.Index(
                condition=models.Q(("content_purged_at__isnull", True)),
                fields=["tenant", "role", "created_at"],
                name="message_content_kept",
            ),
        ),
    ]
