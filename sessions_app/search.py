"""Keyword search over message content that works for English and Chinese alike.

The stored vector (`ace_tsvector`, migration 0001) uses the English configuration with every CJK
character as its own token; a query keeps English words as they are (websearch syntax: quotes, OR, -)
and turns each CJK run into a quoted phrase, so "查看天气" matches exactly those four characters in order.
"""

import re

from django.contrib.postgres.search import SearchQuery

CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
SEARCH_CONFIG = "english"


def websearch_text(query: str) -> str:
    def phrase(match):
        return ' "' + " ".join(match.group(0)) + '" '

    return CJK_RUN.sub(phrase, query.replace('"', " ") if CJK_RUN.search(query) else query).strip()


def keyword_query(query: str) -> SearchQuery:
    return SearchQuery(websearch_text(query), search_type="websearch", config=SEARCH_CONFIG)
