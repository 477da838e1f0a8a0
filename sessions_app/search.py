"""Keyword search over message content that works for English and Chinese alike.

The stored vector (`ace_tsvector`, migration 0001) uses the English configuration with every CJK
character as its own token; a query keeps English words as they are (websearch syntax: quotes, OR, -)
and turns each CJK run into a quoted phrase, so "查看天气" matches exactly those four characters in order.
"""

import json
import re

from django.contrib.postgres.search import SearchQuery
from django.db import connection, connections, transaction

from platform_kit.db import within_time
from platform_kit.tasks import enqueue_or_leave_to_sweep

# A message of up to INLINE_CHARS characters gets its search vector as it is written (the trigger of
# migration 0008, which holds the same number); a longer one right after its commit, from a task. Only
# the first INDEX_MAX_CHARS characters of a very long message are indexed: a tsvector holds at most 1 MB,
# and 200,000 characters cannot make more than about half of that, whatever the text.
INLINE_CHARS = 2000
INDEX_MAX_CHARS = 200_000
INDEX_BATCH = 200

CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
SEARCH_CONFIG = "english"


def websearch_text(query: str) -> str:
    def phrase(match):
        return ' "' + " ".join(match.group(0)) + '" '

    return CJK_RUN.sub(phrase, query.replace('"', " ") if CJK_RUN.search(query) else query).strip()


def keyword_query(query: str) -> SearchQuery:
    return SearchQuery(websearch_text(query), search_type="websearch", config=SEARCH_CONFIG)


# Searches PostgreSQL expects to match fewer rows than this go through the GIN index first; so do those
# that then really have at most RARE_HITS hits. See keyword_filter.
RARE_ESTIMATE = 20_000
RARE_HITS = 2000
PROBE_MS = 40


def _estimated_rows(queryset) -> int:
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


def keyword_filter(queryset, query: str):
    """`queryset` narrowed to messages matching `query`, fast whether the words are rare or common.

    Lists are newest first, and PostgreSQL answers "the newest 100 matching" by walking the created_at
    index and testing each row's vector when it expects many hits: quick for a common word, but for a
    word it wrongly thinks common, a scan of most of the table. So when the planner expects few hits, they
    are first read through the GIN index alone (at most RARE_HITS of them) and the page is those rows,
    sorted; when there are more, or the planner expects many, the index walk finds a page of them at once.
    """
    matching = queryset.filter(search_vector=keyword_query(query))
    if _estimated_rows(matching) > RARE_ESTIMATE:
        return matching
    probe = matching.order_by().values_list("pk", flat=True)[: RARE_HITS + 1]
    hits = within_time(
        lambda: list(probe),
        milliseconds=PROBE_MS,
        using=queryset.db,
        # Read hits from the GIN index only, never by scanning the table.
        planner={"enable_seqscan": "off", "enable_indexscan": "off"},
    )
    if hits is not None and len(hits) <= RARE_HITS:
        return queryset.filter(pk__in=hits)
    return matching  # many hits after all (or too many to gather quickly): the index walk finds a page fast


# -- indexing long messages after their write ------------------------------------------------------------
def needs_index(content: str | None) -> bool:
    return content is not None and len(content) > INLINE_CHARS


def messages_index(ids) -> int:
    """Give the listed messages that still lack one their search vector; how many were indexed. Safe to run
    twice, or beside the sweep: rows already indexed are skipped (and a row being indexed is waited for)."""
    ids = list(ids)
    done = 0
    with connection.cursor() as cursor:
        for start in range(0, len(ids), INDEX_BATCH):
            cursor.execute(
                "UPDATE sessions_app_message SET search_vector = ace_tsvector(left(content, %s)) "
                "WHERE id = ANY(%s) AND search_vector IS NULL",
                [INDEX_MAX_CHARS, ids[start : start + INDEX_BATCH]],
            )
            done += cursor.rowcount
    return done


def messages_unindexed(limit: int) -> list:
    """Ids of long messages still waiting for their search vector, oldest write first (partial index)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM sessions_app_message WHERE search_vector IS NULL ORDER BY received_at LIMIT %s", [limit]
        )
        return [row[0] for row in cursor.fetchall()]


def index_after_commit(ids) -> None:
    """Queue the indexing of these (long) messages once the current transaction commits. Never fails the
    write: the periodic sweep (tasks.index_pending_messages) catches up with anything not queued."""
    ids = [str(pk) for pk in ids]
    if not ids:
        return

    def enqueue():
        enqueue_or_leave_to_sweep(
            "sessions_app.tasks.index_messages",
            ids,
            what=f"indexing of {len(ids)} messages",
            sweep="index_pending_messages",
        )

    transaction.on_commit(enqueue)
