# RecordImport's table takes this app's name (memory_app_recordimport → portability_app_recordimport; its rows,
# its identity sequence, its unique constraint and foreign keys go with it), and its content type row moves here.

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
        ("portability_app", "0003_recordimport"),
        ("memory_app", "0012_record_import_move"),
    ]

    operations = [
        migrations.AlterModelTable(name="recordimport", table=None),
        migrations.RunPython(
            content_type_move("memory_app", "portability_app", "recordimport"),
            content_type_move("portability_app", "memory_app", "recordimport"),
        ),
    ]
