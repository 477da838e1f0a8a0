"""The retention tables take their names here (sessions_app_retention* → retention_app_retention*), and their
content types follow them (app label sessions_app → retention_app), so the admin's permissions, the users' and
groups' grants of them and the admin's change log stay attached.

Renaming keeps every row and id, the indexes (named explicitly: retentionrun_tenant_started,
retentionevent_tenant_created), the foreign keys to the tenant and the identity of RetentionEvent.id; the
constraints and the sequence keep the names they were created with.
"""

from django.db import migrations

from platform_kit.migration_operations import CONTENT_TYPES_MOVE_DEPENDENCIES, ContentTypesMove


class Migration(migrations.Migration):
    dependencies = [
        ("retention_app", "0001_initial"),
        *CONTENT_TYPES_MOVE_DEPENDENCIES,
    ]

    operations = [
        migrations.AlterModelTable(name="retentionpolicy", table=None),
        migrations.AlterModelTable(name="retentionrun", table=None),
        migrations.AlterModelTable(name="retentionevent", table=None),
        ContentTypesMove("sessions_app", "retention_app", ("retentionpolicy", "retentionrun", "retentionevent")),
    ]
