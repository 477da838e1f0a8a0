# The tenant export's table takes this app's name (sessions_app_tenantexport → portability_app_tenantexport; its
# rows, index and constraints go with it), and its content type row moves to this app, so the admin permissions
# given on it (view_tenantexport, …) and the admin log keep pointing at it.

from django.db import migrations


def content_type_move(old_app: str, new_app: str, model: str):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        db = schema_editor.connection.alias
        old = ContentType.objects.using(db).filter(app_label=old_app, model=model).first()
        if old is None:
            return  # a new database: the content types are made after the migrations
        # One made meanwhile for the new label (a migrate that stopped between the two) has no history: it goes.
        ContentType.objects.using(db).filter(app_label=new_app, model=model).delete()
        old.app_label = new_app
        old.save(update_fields=["app_label"])

    return move


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("portability_app", "0001_initial"),
        ("sessions_app", "0025_export_model_move"),
    ]

    operations = [
        migrations.AlterModelTable(name="tenantexport", table=None),
        migrations.RunPython(
            content_type_move("sessions_app", "portability_app", "tenantexport"),
            content_type_move("portability_app", "sessions_app", "tenantexport"),
        ),
    ]
