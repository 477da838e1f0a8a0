"""The local model as ONNX: exported once from the sentence-transformers folder on disk, kept in a cache folder.

``prepared(source, cache_dir)`` returns the folder that holds the export of ``source``, making it if needed:

    <cache_dir>/<model name>-<fingerprint>/
        model.onnx        the whole sentence-transformers pipeline (transformer, pooling, dense, normalise) in fp32:
                          token ids in, the sentence embedding out, what SentenceTransformer.encode computes (to ~1e-6)
        model-int8.onnx   the same, its MatMul weights dynamically quantised to int8 per channel (onnxruntime)
        tokenizer.json    the model's fast tokenizer (the ``tokenizers`` library reads it without transformers)
        meta.json         input names, max_seq_length, dimension, pad id, what it was made from, and with what

The fingerprint covers the source folder's files (names, sizes, modification times) and ``FORMAT``, so a changed
model or a new export format makes a new folder, never a stale one.

A BERT model is written straight from its weights by ``onnx_graph`` (no torch); another architecture is traced
with PyTorch when the torch runtime is installed (``requirements-torch.txt``). Either way the export runs in a child
process (``python -m memory_app.embedders.onnx_export SOURCE DEST``), so the process that serves vectors never holds
the exporter's memory (nor torch). Processes that start together (web and Celery workers) take an exclusive file
lock (``<folder>.lock``) before exporting; the export is written to a temporary folder and renamed into place, so a
reader sees a complete folder or none, and one that died half-way leaves only a temporary folder (removed by the
next export).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMAT = "st-onnx-2"  # change when what the export writes changes: a new folder is made (2: built without torch)
FP32 = "model.onnx"
INT8 = "model-int8.onnx"
# The least cosine between the int8 and fp32 vectors of CHECK_TEXTS an export may have (see _check).
INT8_FLOOR = 0.93
META = "meta.json"
EXPORT_TIMEOUT = 600  # seconds: generous; MiniLM takes seconds


class ExportError(RuntimeError):
    """The model could not be exported (message says why)."""


def fingerprint(source: Path) -> str:
    """A short digest of the source folder's files (relative name, size, mtime) and of the export format."""
    digest = hashlib.sha256(FORMAT.encode())
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        if any(part.startswith(".") for part in path.relative_to(source).parts):
            continue  # .cache/, .gitattributes: not the model
        stat = path.stat()
        digest.update(f"{path.relative_to(source)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def export_folder(source: Path, cache_dir: Path, name: str = "") -> Path:
    """Where the export of ``source`` (called ``name``, by default its folder's name) lives, made or not."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in (name or source.name)) or "model"
    return cache_dir / f"{name}-{fingerprint(source)}"


def is_complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in (FP32, INT8, "tokenizer.json", META))


def prepared(source: Path, cache_dir: Path, *, name: str = "", log=None) -> Path:
    """The export folder of ``source`` under ``cache_dir``, exported first if missing (once, under a file lock)."""
    folder = export_folder(source, cache_dir, name)
    if is_complete(folder):
        return folder
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _locked(folder.with_name(folder.name + ".lock")):
        if is_complete(folder):  # another process exported it while this one waited
            return folder
        for stale in cache_dir.glob(f".{folder.name}.*"):  # left by an export that died
            shutil.rmtree(stale, ignore_errors=True)
        if folder.exists():  # incomplete: never renamed into place by us, but be safe
            shutil.rmtree(folder, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=cache_dir))
        started = time.monotonic()
        if log:
            log(f"Exporting {source} to ONNX in {folder} (once, about 10 s)")
        try:
            work.chmod(0o755)  # mkdtemp made it private; the export is no secret and other users may serve it
            _run_export(source, work)
            os.replace(work, folder)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        if log:
            log(f"Exported {name or source.name} to ONNX in {time.monotonic() - started:.1f} s")
    return folder


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_export(source: Path, dest: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    project = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = project + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memory_app.embedders.onnx_export", str(source), str(dest)],
            env=env,
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise ExportError(f"Exporting {source} to ONNX took more than {EXPORT_TIMEOUT} s") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        raise ExportError(f"Exporting {source} to ONNX failed: {lines[-1] if lines else 'no output'}")


# -- the export itself (the child process) ----------------------------------------------------------------------


def export(source: Path, dest: Path) -> dict:
    """Export the sentence-transformers folder ``source`` into ``dest`` (which exists): fp32, int8, tokenizer, meta.

    A BERT model (all-MiniLM-L6-v2 and most sentence-transformers models) is written straight from its weights
    (``onnx_graph``: needs onnx, safetensors and onnxruntime, not torch). Any other is traced with PyTorch when the
    torch runtime is installed (``requirements-torch.txt``); without it, the error names the model's architecture
    and the way out."""
    from . import onnx_graph

    try:
        model, meta = onnx_graph.build(source)
    except onnx_graph.Unsupported as unsupported:
        try:
            import sentence_transformers  # noqa: F401
            import torch  # noqa: F401
        except ImportError:
            raise ExportError(
                f"{unsupported}. Install the torch runtime to export it with PyTorch "
                "(pip install -r requirements-torch.txt), or use a BERT sentence-transformers model"
            ) from None
        return _export_with_torch(source, dest)
    if not (source / "tokenizer.json").is_file():
        raise ExportError(f"{source} has no fast tokenizer (tokenizer.json): the ONNX runtime needs one")
    import onnx

    onnx.save(model, str(dest / FP32))
    shutil.copyfile(source / "tokenizer.json", dest / "tokenizer.json")
    _quantise(dest)
    meta = {"format": FORMAT, "source": str(source), **meta, "built_by": f"onnx {onnx.__version__}"}
    meta["int8_min_cosine"] = _check(dest, meta)
    meta["exported_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (dest / META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


CHECK_TEXTS = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.", "ok", "公园散步", ""]


def _check(dest: Path, meta: dict) -> float:
    """Run both exports on a few texts before anyone uses them: finite unit vectors of the declared size from fp32,
    int8 close to them. The fp32 graph's agreement with sentence-transformers is the tests' business (a stored
    reference, tests/data/minilm_reference.json), since torch is not here to compare with."""
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(dest / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=meta["pad_id"])
    tokenizer.enable_truncation(max_length=meta["max_seq_length"])
    encodings = tokenizer.encode_batch(CHECK_TEXTS)
    arrays = {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }
    inputs = {name: arrays[name] for name in meta["input_names"]}
    vectors = {}
    for weights in (FP32, INT8):
        session = onnxruntime.InferenceSession(str(dest / weights), providers=["CPUExecutionProvider"])
        got = session.run(None, inputs)[0]
        if got.shape != (len(CHECK_TEXTS), meta["dimensions"]) or not np.isfinite(got).all():
            raise ExportError(f"The ONNX export ({weights}) gave vectors of shape {got.shape} or not finite")
        vectors[weights] = got / np.linalg.norm(got, axis=1, keepdims=True)
    agreement = float((vectors[FP32] * vectors[INT8]).sum(axis=1).min())
    # A floor that catches a broken quantisation, not one CPU's int8 arithmetic: with AVX-512 VNNI these texts
    # agree to ~0.99; on a CPU with AVX2 alone (onnxruntime's u8s8 kernels saturate there) the same export gives
    # 0.949 at worst here, and 0.969 at worst, 0.986 on average, against torch's vectors of the reference texts.
    if agreement < INT8_FLOOR:
        raise ExportError(f"The int8 export disagrees with the fp32 one (cosine {agreement:.4f})")
    return round(agreement, 5)


def _quantise(dest: Path) -> None:
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger("root").setLevel(logging.ERROR)  # the quantiser's "consider pre-processing" note
    # Per channel and weights only (MatMulConstBOnly): per-tensor int8 moved MiniLM's vectors to cosine ~0.95 of
    # the fp32 ones; per channel keeps ~0.99.
    quantize_dynamic(
        str(dest / FP32),
        str(dest / INT8),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"MatMulConstBOnly": True},
    )


def _export_with_torch(source: Path, dest: Path) -> dict:
    """The model traced with torch.onnx (any architecture sentence-transformers loads); needs the torch runtime."""
    import logging
    import warnings

    import torch
    from sentence_transformers import SentenceTransformer

    warnings.filterwarnings("ignore")  # the tracer's TracerWarnings: shapes it can't see are dynamic axes here
    logging.getLogger("root").setLevel(logging.ERROR)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    model = SentenceTransformer(str(source), device="cpu", local_files_only=True).eval()
    tokenizer = model.tokenizer
    if not getattr(tokenizer, "is_fast", False):
        raise ExportError(f"{source} has no fast tokenizer (tokenizer.json): the ONNX runtime needs one")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer.model_input_names]
    if "input_ids" not in names or "attention_mask" not in names:
        raise ExportError(f"{source}'s tokenizer gives {tokenizer.model_input_names}; needs input_ids, attention_mask")

    class Pipeline(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

    sample = tokenizer(["An example sentence to trace.", "Another"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    axes["sentence_embedding"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(
            Pipeline(model).eval(),
            tuple(sample[name] for name in names),
            str(dest / FP32),
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    _quantise(dest)
    tokenizer.backend_tokenizer.save(str(dest / "tokenizer.json"))
    meta = {
        "format": FORMAT,
        "source": str(source),
        "input_names": names,
        "max_seq_length": int(model.max_seq_length or tokenizer.model_max_length),
        "dimensions": int(model.get_sentence_embedding_dimension()),
        "pad_id": int(tokenizer.pad_token_id or 0),
        "built_by": f"torch {torch.__version__}",
    }
    # Check the export against the model before anyone uses it.
    import numpy as np
    import onnxruntime

    expected = model.encode(CHECK_TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    session = onnxruntime.InferenceSession(str(dest / FP32), providers=["CPUExecutionProvider"])
    encoded = tokenizer(
        CHECK_TEXTS, padding=True, truncation=True, max_length=meta["max_seq_length"], return_tensors="np"
    )
    got = session.run(None, {name: encoded[name].astype("int64") for name in names})[0]
    got = got / np.linalg.norm(got, axis=1, keepdims=True)
    agreement = float((got * expected).sum(axis=1).min())
    if agreement < 0.9999:
        raise ExportError(f"The ONNX export of {source} disagrees with the model (cosine {agreement:.6f})")
    meta["fp32_min_cosine"] = round(agreement, 7)
    meta["int8_min_cosine"] = _check(dest, meta)
    meta["exported_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (dest / META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m memory_app.embedders.onnx_export SOURCE_MODEL_FOLDER DEST_FOLDER")
    print(json.dumps(export(Path(sys.argv[1]), Path(sys.argv[2]))))
