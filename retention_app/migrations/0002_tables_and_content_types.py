"""The retention tables take their names here (sessions_app_retention* → retention_app_retention*), and their
content types follow them (app label sessions_app → retention_app), so the admin's permissions, the users' and
groups' grants of them and the admin's change log stay attached.

Renaming keeps every row and id, the indexes (named explicitly: retentionrun_tenant_started,
retentionevent_tenant_created), the foreign keys to the tenant and the identity of RetentionEvent.id; the
constraints and the sequence keep the names they were created with.
"""

from django.db import migrations

MODELS = ("retentionpolicy", "retentionrun", "retentionevent")


def _content_types_move(apps, schema_editor, source: str, target: str) -> None:
    """Give the models' content types of `source` the app label `target`, ids kept. A database created after the
    move has none (post_migrate makes them at the end of `migrate`). One that got the target's too (post_migrate
    after a `migrate` that stopped between 0001 and this one) keeps the source's, which the grants and the change
    log point to: the other's log entries and grants move to it, and the other goes."""
    db = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    LogEntry = apps.get_model("admin", "LogEntry")
    for model in MODELS:
        kept = ContentType.objects.using(db).filter(app_label=source, model=model).first()
        if kept is None:
            continue
        other = ContentType.objects.using(db).filter(app_label=target, model=model).first()
        if other is not None:
            LogEntry.objects.using(db).filter(content_type=other).update(content_type=kept)
            for permission in Permission.objects.using(db).filter(content_type=other):
                same = Permission.objects.using(db).filter(content_type=kept, codename=permission.codename).first()
                if same is None:
                    permission.content_type = kept
                    permission.save(update_fields=["content_type"])
                    continue
                for group in permission.group_set.all():
                    group.permissions.add(same)
                for user in permission.user_set.all():
                    user.user_permissions.add(same)
                permission.delete()
            other.delete()
        kept.app_label = target
        kept.save(update_fields=["app_label"])


def forwards(apps, schema_editor):
    _content_types_move(apps, schema_editor, "sessions_app", "retention_app")


def backwards(apps, schema_editor):
    _content_types_move(apps, schema_editor, "retention_app", "sessions_app")


class Migration(migrations.Migration):
    dependencies = [
        ("retention_app", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("admin", "0003_logentry_add_action_flag_choices"),
    ]

    operations = [
        migrations.AlterModelTable(name="retentionpolicy", table=None),
        migrations.AlterModelTable(name="retentionrun", table=None),
        migrations.AlterModelTable(name="retentionevent", table=None),
        migrations.RunPython(forwards, backwards),
    ]
