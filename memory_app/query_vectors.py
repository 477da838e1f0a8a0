"""The vectors of recall queries, embedded once per process and kept in a bounded LRU as pgvector's text.

A chat app asks the same question again (a retry, a context refresh, the same opening line of many sessions),
and embedding it is most of a recall's CPU. The cache is keyed by the embedder's key (its vector space: a
changed model or dimension never gets another space's vector) and the query with its whitespace collapsed;
that collapsed text is what gets embedded, so a cached vector is exactly the embedding of its key.

Per process: no cache is shared between processes here (Django's default cache is per process too), and a
shared one would add a network round trip to every recall to save one embedding per web process per question.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


def vector_literal(values) -> str:
    """A vector in pgvector's text form."""
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


def normalized_query(query: str) -> str:
    """The query as embedded and cached: runs of whitespace made one space, none at the ends. Tokenisers split
    on whitespace, so this changes no word."""
    return " ".join(query.split())


class QueryVectorCache:
    def __init__(self, size: int):
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, embedder, query: str) -> str:
        text = normalized_query(query)
        key = (embedder.key, text)
        with self._lock:
            if key in self._vectors:
                self._vectors.move_to_end(key)
                return self._vectors[key]
        vector = vector_literal(embedder.embed_query(text))
        with self._lock:
            self._vectors[key] = vector
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def __len__(self) -> int:
        return len(self._vectors)


# 2,048 questions of 384 dimensions: ~16 MB per process as SQL text.
query_vectors = QueryVectorCache(size=2048)


def query_vector(embedder, query: str) -> str:
    """The query's vector in the embedder's space, in pgvector's text form (what recall's SQL takes), from this
    process's cache when it was asked before."""
    return query_vectors.get(embedder, query)
