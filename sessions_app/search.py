"""Keyword search over message content that works for English and Chinese alike.

The stored vector (`ace_tsvector`, migration 0001) uses the English configuration with every CJK
character as its own token; a query keeps English words as they are (websearch syntax: quotes, OR, -)
and turns each CJK run into a quoted phrase, so "查看天气" matches exactly those four characters in order.
"""

import re

from django.contrib.postgres.search import SearchQuery
from django.db import connections, transaction

CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
SEARCH_CONFIG = "english"


def websearch_text(query: str) -> str:
    def phrase(match):
        return ' "' + " ".join(match.group(0)) + '" '

    return CJK_RUN.sub(phrase, query.replace('"', " ") if CJK_RUN.search(query) else query).strip()


def keyword_query(query: str) -> SearchQuery:
    return SearchQuery(websearch_text(query), search_type="websearch", config=SEARCH_CONFIG)


# A search with at most this many hits is resolved through the GIN index first; see keyword_filter.
RARE_HITS = 2000


def keyword_filter(queryset, query: str):
    """`queryset` narrowed to messages matching `query`, fast whether the words are rare or common.

    Lists are ordered newest first, and PostgreSQL tends to answer "newest 100 matching" by walking the
    created_at index and testing every row's vector: quick for a common word, a scan of most of the table
    for a rare one (it cannot tell the two apart well). So the hits are first looked up through the GIN
    index alone, up to RARE_HITS of them: when that is all there are, the list is those rows, sorted;
    when there are more, the words are common and the index walk finds a page of them at once.
    """
    matching = queryset.filter(search_vector=keyword_query(query))
    probe = matching.order_by().values_list("pk", flat=True)[: RARE_HITS + 1]
    with transaction.atomic(using=queryset.db):
        with connections[queryset.db].cursor() as cursor:
            # Only for this probe: read hits from the GIN index, never by scanning the table.
            cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off")
        hits = list(probe)
    if len(hits) <= RARE_HITS:
        return queryset.filter(pk__in=hits)
    return matching
