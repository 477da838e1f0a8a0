from django.core.management.base import BaseCommand
from django.db import connection

from platform_kit.distribution import REFERENCE_TABLES, citus_keys_sql, distributed_tables

ANCHOR = "sessions_app_session"  # every distributed table is co-located with the sessions


class Command(BaseCommand):
    help = (
        "Print the SQL that moves this database onto Citus, distributed by tenant (docs/scaling.md): the keys that "
        "gain tenant_id, then the reference and distributed tables. Prints only; an operator runs it, stage by stage."
    )

    def handle(self, *args, **options):
        with connection.cursor() as cursor:
            build, swap, validate = citus_keys_sql(cursor)
            distributed = distributed_tables(cursor)
            cursor.execute(
                "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text, c.conname FROM pg_constraint c"
                " WHERE c.contype = 'f' AND c.conrelid <> c.confrelid"
            )
            foreign_keys = cursor.fetchall()
        parents = {}
        for table, referenced, _ in foreign_keys:
            parents.setdefault(table, set()).add(referenced)
        order = _parents_first(distributed, parents)
        # A foreign key to a table distributed later (the session's current conversation) is dropped for the copy and
        # added again after it, as step 2 made it.
        later = [
            (table, name)
            for table, referenced, name in foreign_keys
            if table in distributed and referenced in distributed and order.index(referenced) > order.index(table)
        ]
        added = {statement.split()[5]: statement for statement in swap if " ADD CONSTRAINT " in statement}
        write = self.stdout.write
        write("-- 1. The new keys' indexes, one at a time (CONCURRENTLY: writers go on).")
        write("\n".join(f"{statement};" for statement in build))
        write("\n-- 2. The keys swapped, in one short transaction.")
        write("BEGIN;\n" + "\n".join(f"{statement};" for statement in swap) + "\nCOMMIT;")
        write("\n-- 3. The foreign keys validated, one at a time (no long lock).")
        write("\n".join(f"{statement};" for statement in validate))
        write("\n-- 4. Reference tables (copied to every node).")
        write("\n".join(f"SELECT create_reference_table('{table}');" for table in sorted(REFERENCE_TABLES)))
        write("\n-- 5. Distributed tables, by tenant_id, parents before children, co-located with the sessions.")
        for table, name in later:
            write(f"ALTER TABLE {table} DROP CONSTRAINT {name};")
        for table in order:
            colocate = "" if table == ANCHOR else f", colocate_with => '{ANCHOR}'"
            write(f"SELECT create_distributed_table_concurrently('{table}', 'tenant_id'{colocate});")
        for table, name in later:
            write(f"{added[name]};\nALTER TABLE {table} VALIDATE CONSTRAINT {name};")


def _parents_first(tables: set[str], parents: dict[str, set[str]]) -> list[str]:
    """The anchor first (every other table is co-located with it), then each table after the tables it points at."""
    ordered, placed = [ANCHOR], {ANCHOR}
    pending = sorted(tables - placed)
    while pending:
        ready = [table for table in pending if not (parents.get(table, set()) & tables) - placed - {table}]
        for table in ready or pending[:1]:  # a cycle, if one ever appears: its first table goes, the rest follow
            ordered.append(table)
            placed.add(table)
            pending.remove(table)
    return ordered
