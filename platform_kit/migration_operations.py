"""Migration operations the apps share: a CHECK for tables too big to lock while they are scanned, a unique
constraint rebuilt on a big table without stopping its writers, tenant_id added to a table that had it only through
its parent, the move of models' content types from one app to another, and a periodic task scheduled."""

from django.db import models, transaction
from django.db.migrations.operations import AddConstraint, AddField, AlterField, RunPython, RunSQL
from django.db.migrations.operations.base import Operation


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


class IntervalTaskScheduled(RunPython):
    """A django-celery-beat periodic task running `task` every `every` `period` (e.g. 1, "hours"), created under
    `name` unless a task of that name exists (an operator's edits are kept), and deleted when the migration is
    reversed. The migration depends on django_celery_beat's."""

    def __init__(self, name: str, task: str, every: int, period: str, description: str):
        self.name, self.task, self.every, self.period, self.description = name, task, every, period, description
        super().__init__(self._create, self._delete)

    def _create(self, apps, schema_editor):
        IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
        PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
        interval, _ = IntervalSchedule.objects.get_or_create(every=self.every, period=self.period)
        PeriodicTask.objects.get_or_create(
            name=self.name,
            defaults={"task": self.task, "interval": interval, "enabled": True, "description": self.description},
        )

    def _delete(self, apps, schema_editor):
        apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=self.name, task=self.task).delete()

    def deconstruct(self):
        return self.__class__.__qualname__, [self.name, self.task, self.every, self.period, self.description], {}

    def describe(self):
        return f"Schedule {self.task} every {self.every} {self.period}"


def tenant_added(model_name: str, *, table: str, parent_table: str, parent_column: str) -> list[Operation]:
    """tenant_id on a table whose rows had their tenant only through a parent (docs/scaling.md): added NULL, filled
    from the parent in one statement, then NOT NULL. The foreign keys are checked at once while it is filled (they
    are deferred by default, and a table with pending checks cannot be altered in the same transaction)."""

    def field(null: bool):
        return models.ForeignKey(
            "sessions_app.tenant",
            on_delete=models.PROTECT,
            related_name="+",
            db_index=False,
            editable=False,
            null=null,
        )

    return [
        AddField(model_name, "tenant", field(True)),
        RunSQL(
            "SET CONSTRAINTS ALL IMMEDIATE;"
            f" UPDATE {table} c SET tenant_id = p.tenant_id FROM {parent_table} p WHERE p.id = c.{parent_column};"
            " SET CONSTRAINTS ALL DEFERRED",
            RunSQL.noop,
        ),
        AlterField(model_name, "tenant", field(False)),
    ]


class UniqueRebuiltConcurrently(Operation):
    """A unique constraint of a big table replaced by another of the same name (new columns), in a non-atomic
    migration: the new index is built CONCURRENTLY under a temporary name while writers go on, then swapped in
    for the old one in a short transaction. Either is always there, so uniqueness holds throughout."""

    reversible = True
    atomic = False

    def __init__(self, model_name: str, old: models.UniqueConstraint, new: models.UniqueConstraint):
        self.model_name, self.old, self.new = model_name, old, new

    def deconstruct(self):
        return self.__class__.__name__, [self.model_name, self.old, self.new], {}

    def state_forwards(self, app_label, state):
        state.remove_constraint(app_label, self.model_name.lower(), self.old.name)
        state.add_constraint(app_label, self.model_name.lower(), self.new)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._swap(app_label, schema_editor, to_state, self.old, self.new)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._swap(app_label, schema_editor, to_state, self.new, self.old)

    def describe(self):
        return f"Rebuild unique {self.new.name} on {self.model_name} concurrently"

    @property
    def migration_name_fragment(self):
        return f"rebuild_{self.new.name.lower()}"

    def _swap(self, app_label, schema_editor, state, old, new):
        model = state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        quote = schema_editor.quote_name
        table = quote(model._meta.db_table)
        columns = ", ".join(quote(model._meta.get_field(name).column) for name in new.fields)
        building = quote(f"{new.name[:50]}_building")
        where = f" WHERE {new._get_condition_sql(model, schema_editor)}" if new.condition is not None else ""
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {building}")  # left by a build that failed
        schema_editor.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {building} ON {table} ({columns}){where}")
        with transaction.atomic(using=schema_editor.connection.alias):
            if old.condition is None:
                schema_editor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {quote(old.name)}")
            else:
                schema_editor.execute(f"DROP INDEX {quote(old.name)}")
            if new.condition is None:
                schema_editor.execute(
                    f"ALTER TABLE {table} ADD CONSTRAINT {quote(new.name)} UNIQUE USING INDEX {building}"
                )
            else:
                schema_editor.execute(f"ALTER INDEX {building} RENAME TO {quote(new.name)}")
