"""Migration operations for tables too big to lock while they are scanned."""

from django.db.migrations.operations import AddConstraint


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
