# A record's confidence is a finite number (issue 30): a NaN one, stored through MCP's `remember`, passed the
# 0-1 range check (no comparison with NaN is true) and made every read of the records list a 500.
#
# Records and revisions already stored with one: NaN becomes 1.0, the confidence of a record remembered without
# one (what the client meant is unknown; the default is what leaving it out says), +Infinity 1.0 and -Infinity
# 0.0 (the ends of the range). The tables are not locked while the constraint scans them (NOT VALID, fix,
# VALIDATE).

from django.db import migrations, models

import platform_kit.db
from platform_kit.migration_operations import AddCheckConstraintValidatedLater

FIX = (
    "UPDATE {table} SET confidence = CASE WHEN confidence = 'NaN'::float8 THEN 1.0 WHEN confidence > 0 THEN 1.0"
    " ELSE 0.0 END WHERE confidence = 'NaN'::float8 OR confidence IN ('Infinity'::float8, '-Infinity'::float8)"
)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory_app", "0010_field_labels"),
    ]

    operations = [
        AddCheckConstraintValidatedLater(
            model_name="record",
            constraint=models.CheckConstraint(
                condition=platform_kit.db.finite("confidence"), name="record_confidence_finite"
            ),
            fix_sql=FIX.format(table="memory_app_record"),
        ),
        AddCheckConstraintValidatedLater(
            model_name="recordrevision",
            constraint=models.CheckConstraint(
                condition=platform_kit.db.finite("confidence"), name="record_revision_confidence_finite"
            ),
            fix_sql=FIX.format(table="memory_app_recordrevision"),
        ),
    ]
