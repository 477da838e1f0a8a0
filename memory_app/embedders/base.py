"""The interface every embedder provider implements, its errors, and the helpers the providers share."""

from __future__ import annotations

import abc
import math
import re
import time
from collections.abc import Sequence


class EmbedderError(Exception):
    """Base class of every embedder failure."""


class EmbedderUnavailable(EmbedderError):
    """The embedding service is down, timed out, overloaded or answered 5xx: the caller may retry or degrade."""


class EmbedderMisconfigured(EmbedderError):
    """Wrong dimension returned, bad model path, rejected credentials, unknown provider: retrying won't help."""


class Embedder(abc.ABC):
    """Turns texts into L2-normalised vectors of ``dimensions`` floats in the vector space named by ``key``."""

    key: str
    dimensions: int
    label: str
    provider: str = ""
    # The languages its model was trained on (ISO 639-1 codes), when it is known to be few; None: many, or not
    # known. Recall gives an English-only model's vectors less weight on a question it cannot read
    # (memory_app.selectors.recall.CJK_VECTOR_WEIGHT).
    languages: tuple[str, ...] | None = None
    # Recall's weights chosen with this model (memory_app.selectors.recall constants: VECTOR_WEIGHT, ...) where
    # they differ from the module's, which were chosen with the bundled English model (bench/memory_eval.py).
    recall_weights: dict[str, float] = {}
    loaded: bool = True  # nothing to load unless a provider says otherwise (local: the model)
    load_seconds: float | None = None

    def load(self) -> float:
        """Make the next ``embed()`` fast: load what the provider needs (the local model). Seconds it took."""
        return 0.0

    def status(self) -> dict:
        """What /healthz and the status pages say about the embedder, without loading or calling anything."""
        return {
            "provider": self.provider,
            "key": self.key,
            "label": self.label,
            "loaded": bool(self.loaded),
            "load_seconds": self.load_seconds,
        }

    @abc.abstractmethod
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in the same order; ``[]`` for ``[]``."""

    def embed_one(self, text: str) -> list[float]:
        """The vector of a single text."""
        return self.embed([text])[0]

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search's question, in the space of what ``embed`` stores. The same as ``embed_one``
        unless the model was trained to embed the two sides differently (e5: ``query: `` / ``passage: ``)."""
        return self.embed_one(text)

    def __repr__(self) -> str:
        try:
            key = self.key
        except Exception:  # a remote embedder may not know its dimension yet
            key = "?"
        return f"<{type(self).__name__} {key}>"


class InProcessModel(Embedder):
    """A provider whose model runs in this process (local, e5): loaded once, by the first text to embed or when
    the process starts (``warmup``), with ``ACE_EMBEDDER_THREADS`` threads (0: the runtime's default)."""

    _model = None
    _threads: int | None = None
    loaded_at: float | None = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def threads(self) -> int:
        from django.conf import settings

        value = self._threads if self._threads is not None else getattr(settings, "ACE_EMBEDDER_THREADS", 0)
        return max(0, int(value or 0))

    def load(self) -> float:
        """Load the model now; the seconds loading took."""
        self._load()
        return self.load_seconds or 0.0

    def status(self) -> dict:
        status = super().status()
        loaded_at = None
        if self.loaded_at is not None:
            loaded_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.loaded_at))
        status.update(threads=self.threads or None, loaded_at=loaded_at)
        return status

    def _load(self):
        """The model, loaded once (under the provider's lock) and timed."""
        with self._lock:
            if self._model is None:
                started = time.monotonic()
                model = self._open()
                self.load_seconds = round(time.monotonic() - started, 3)
                self.loaded_at = time.time()
                self._model = model
            return self._model

    @abc.abstractmethod
    def _open(self):
        """Read the model from disk and return it (called once, by _load)."""


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, refusing a bare string (a sequence of characters) and non-strings."""
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a sequence of texts, not a single string: use embed([text])")
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"embed() takes strings, got {type(text).__name__}")
    return texts


def l2_normalise(vector: Sequence[float]) -> list[float]:
    """The vector scaled to unit length. A zero or non-finite vector can't be used for cosine: refused."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbedderMisconfigured("The embedder returned a zero or non-finite vector, which has no direction")
    return [x / norm for x in vector]


_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9:._/@+-]+")


def key_part(name: str) -> str:
    """A model name made safe for an embedder key (letters, digits and :._/@+- only)."""
    return _KEY_UNSAFE.sub("_", name.strip()) or "default"
