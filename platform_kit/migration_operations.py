"""Migration operations the apps share: a CHECK for tables too big to lock while they are scanned, and the move of
models' content types from one app to another."""

from django.db.migrations.operations import AddConstraint, RunPython


class AddCheckConstraintValidatedLater(AddConstraint):
    """AddConstraint for a CHECK on a big table, in a non-atomic migration: the constraint is added NOT VALID (a
    moment's lock; new rows are checked from then on), `fix_sql` corrects the rows already there, and VALIDATE
    then scans the table while writers go on (it takes a SHARE UPDATE EXCLUSIVE lock, not an exclusive one)."""

    def __init__(self, model_name, constraint, fix_sql: str = ""):
        super().__init__(model_name, constraint)
        self.fix_sql = fix_sql

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        if self.fix_sql:
            kwargs["fix_sql"] = self.fix_sql
        return name, args, kwargs

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        table = schema_editor.quote_name(model._meta.db_table)
        name = schema_editor.quote_name(self.constraint.name)
        check = self.constraint._get_check_sql(model, schema_editor)
        schema_editor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({check}) NOT VALID")
        if self.fix_sql:
            schema_editor.execute(self.fix_sql)
        schema_editor.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def _content_types_move(apps, schema_editor, source: str, target: str, models: tuple[str, ...]) -> None:
    """Give the models' content types of app `source` the label `target`, ids kept, so the permissions granted on
    them and the admin log about them stay attached. A database created after the move has none (post_migrate
    makes them at the end of `migrate`). One that also has the target's (post_migrate after a `migrate` that stopped
    between the two apps' migrations) keeps the source's, which the grants and the log point to: the other's log
    entries and grants move to it, and the other goes."""
    db = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    LogEntry = apps.get_model("admin", "LogEntry")
    for model in models:
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


# What a migration that moves content types needs in its state (its `dependencies` list them).
CONTENT_TYPES_MOVE_DEPENDENCIES = [
    ("contenttypes", "0002_remove_content_type_name"),
    ("auth", "0012_alter_user_first_name_max_length"),
    ("admin", "0003_logentry_add_action_flag_choices"),
]


class ContentTypesMove(RunPython):
    """The content types of `models` (model names, lower case) move from app `source` to app `target` (and back when
    the migration is reversed): the permissions, grants and admin log of models moved between apps follow them."""

    def __init__(self, source: str, target: str, models: tuple[str, ...]):
        self.source, self.target, self.models = source, target, tuple(models)
        super().__init__(
            lambda apps, editor: _content_types_move(apps, editor, source, target, self.models),
            lambda apps, editor: _content_types_move(apps, editor, target, source, self.models),
        )

    def deconstruct(self):
        return self.__class__.__qualname__, [self.source, self.target, self.models], {}

    def describe(self):
        return f"Move the content types of {', '.join(self.models)} from {self.source} to {self.target}"
