# The tenant export's table takes this app's name (sessions_app_tenantexport → portability_app_tenantexport; its
# rows, index and constraints go with it), and its content type row moves to this app, so the admin permissions
# given on it (view_tenantexport, …) and the admin log keep pointing at it.

from django.db import migrations

from platform_kit.migration_operations import CONTENT_TYPES_MOVE_DEPENDENCIES, ContentTypesMove


class Migration(migrations.Migration):
    dependencies = [
        *CONTENT_TYPES_MOVE_DEPENDENCIES,
        ("portability_app", "0001_initial"),
        ("sessions_app", "0025_export_model_move"),
    ]

    operations = [
        migrations.AlterModelTable(name="tenantexport", table=None),
        ContentTypesMove("sessions_app", "portability_app", ("tenantexport",)),
    ]
