"""A paginator for the admin's big tables that never runs `SELECT COUNT(*)`.

Django's changelist asks `paginator.count` on every page, and on a table of millions of messages an exact
count is a full scan. Counting here is bounded instead: up to `exact_limit` primary keys are read (so small
tables and selective filters get the exact number), and past that the number is PostgreSQL's own estimate
(`pg_class.reltuples` for the whole table, the planner's row estimate for a filtered query).

The count is never below `exact_limit + 1` when the real number is larger, so the changelist never takes
a big result for a small one (it would then load the whole queryset without LIMIT for "Show all").
"""

from __future__ import annotations

import json

from django.core.paginator import Paginator
from django.db import connections
from django.utils.functional import cached_property

from platform_kit.db import within_time


class EstimatedCountPaginator(Paginator):
    exact_limit = 1000
    probe_ms = 40

    is_estimate = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        ids = queryset.order_by().values_list("pk", flat=True)[: self.exact_limit + 1]
        # Gathering the ids of a broad full-text search can take longer than the page itself: past
        # `probe_ms` the estimate is used instead.
        probe = within_time(lambda: list(ids), milliseconds=self.probe_ms, using=queryset.db)
        if probe is not None and len(probe) <= self.exact_limit:
            return len(probe)
        self.is_estimate = True
        return max(self.exact_limit + 1, self._estimate(queryset))

    def _estimate(self, queryset) -> int:
        connection = connections[queryset.db]
        if not queryset.query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [queryset.model._meta.db_table]
                )
                row = cursor.fetchone()
            if row and row[0] >= 0:  # -1: never analysed; ask the planner instead
                return int(row[0])
        sql, params = queryset.order_by().query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            plan = cursor.fetchone()[0]
        if isinstance(plan, str):
            plan = json.loads(plan)
        return int(plan[0]["Plan"]["Plan Rows"])
