"""A BERT sentence-transformers model written straight to ONNX from its weights: no torch, no transformers.

``build(source)`` reads the folder's ``config.json``, ``modules.json`` (with the pooling module's config) and
``model.safetensors`` (with ``safetensors.numpy``) and writes the graph that ``SentenceTransformer.encode``
computes, with the ``onnx`` package's helper API:

    token ids, attention mask, token types
      -> embeddings (word + token type + absolute position, LayerNorm)
      -> N encoder layers (multi-head self-attention, residual + LayerNorm, feed-forward with the configured
         activation, residual + LayerNorm)
      -> pooling (mean, CLS or max over the unmasked tokens, as 1_Pooling/config.json says)
      -> optional Dense layers (safetensors weights, identity or tanh)
      -> L2 normalisation (when modules.json lists Normalize)
    = sentence_embedding

Every size (layers, hidden size, heads, vocabulary, positions, LayerNorm epsilon) comes from ``config.json``, so
any BERT-architecture sentence-transformers folder builds, not only all-MiniLM-L6-v2. What it cannot build (another
architecture, relative positions, weights only in ``pytorch_model.bin``, an unknown activation or module) raises
``Unsupported`` naming it; ``onnx_export`` then uses PyTorch if the torch runtime is installed
(``requirements-torch.txt``) and otherwise says to install it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

OPSET = 17  # LayerNormalization is an ONNX op from 17 on
OUTPUT = "sentence_embedding"
INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]


class Unsupported(ValueError):
    """The folder holds a model this builder does not write (the message names what)."""


def build(source: Path):
    """The ONNX ``ModelProto`` of the sentence-transformers folder ``source`` and what the runtime needs to know
    about it (``input_names``, ``dimensions``, ``max_seq_length``, ``pad_id``)."""
    config = _read_json(source / "config.json", "config.json")
    architectures = config.get("architectures") or []
    model_type = str(config.get("model_type") or "")
    if model_type != "bert":
        named = f"is a {model_type!r} model" if model_type else "names no model_type"
        if architectures:
            named += f" ({', '.join(map(str, architectures))})"
        raise Unsupported(f"{source}/config.json {named}; the torch-free export builds BERT models only")
    position_type = str(config.get("position_embedding_type") or "absolute")
    if position_type != "absolute":
        raise Unsupported(f"{source} uses {position_type} position embeddings; the torch-free export builds absolute")
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise Unsupported(f"{source} is a BERT decoder; the torch-free export builds encoders only")
    modules = _modules(source)
    weights = _weights(source)
    builder = _Graph()
    hidden = _encoder(builder, config, weights)
    dimensions = int(config["hidden_size"])
    for kind, folder in modules[1:]:
        if kind == "Pooling":
            hidden = _pooling(builder, folder, hidden, dimensions)
        elif kind == "Dense":
            hidden, dimensions = _dense(builder, folder, hidden, dimensions)
        elif kind == "Normalize":
            hidden = _normalise(builder, hidden)
        else:
            raise Unsupported(f"{source}'s modules.json has a {kind} module; the torch-free export does not build it")
    if not any(kind == "Pooling" for kind, _ in modules):
        raise Unsupported(f"{source}'s modules.json has no Pooling module: token vectors, not a sentence embedding")
    model = builder.model(hidden)
    meta = {
        "input_names": list(INPUT_NAMES),
        "dimensions": dimensions,
        "max_seq_length": _max_seq_length(source, config),
        "pad_id": int(config.get("pad_token_id") or 0),
    }
    return model, meta


# -- reading the folder ---------------------------------------------------------------------------------------------


def _read_json(path: Path, what: str) -> dict | list:
    try:
        return json.loads(path.read_text())
    except OSError:
        raise Unsupported(f"{path.parent} has no {what}") from None
    except ValueError as exc:
        raise Unsupported(f"{path} is not valid JSON: {exc}") from None


def _modules(source: Path) -> list[tuple[str, Path]]:
    """(kind, folder) per module in modules.json, the first a Transformer; a folder without modules.json is a bare
    transformer, pooled by its mean (as sentence-transformers does with such a folder)."""
    if not (source / "modules.json").is_file():
        return [("Transformer", source), ("Pooling", source / "__mean__")]
    modules = []
    for module in _read_json(source / "modules.json", "modules.json"):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        modules.append((kind, source / str(module.get("path", ""))))
    if not modules or modules[0][0] != "Transformer":
        first = modules[0][0] if modules else "nothing"
        raise Unsupported(f"{source}'s modules.json starts with {first}; the torch-free export needs a Transformer")
    return modules


def _weights(source: Path) -> dict[str, np.ndarray]:
    path = source / "model.safetensors"
    if not path.is_file():
        found = "pytorch_model.bin" if (source / "pytorch_model.bin").is_file() else "no model.safetensors"
        raise Unsupported(f"{source} has {found}; the torch-free export reads model.safetensors only")
    from safetensors.numpy import load_file

    weights = load_file(str(path))
    # A checkpoint saved from BertFor<Task> prefixes the encoder's names with "bert.".
    if not any(name.startswith("embeddings.") for name in weights):
        weights = {name.removeprefix("bert."): value for name, value in weights.items()}
    return weights


def _max_seq_length(source: Path, config: dict) -> int:
    limit = int(config.get("max_position_embeddings") or 512)
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        try:
            value = json.loads((source / name).read_text()).get(key)
        except (OSError, ValueError):
            continue
        if isinstance(value, int) and 0 < value:
            return min(value, limit)
    return limit


# -- the graph ------------------------------------------------------------------------------------------------------


class _Graph:
    """Nodes and initializers, with fresh names."""

    def __init__(self):
        from onnx import TensorProto, helper

        self.helper = helper
        self.TensorProto = TensorProto
        self.nodes = []
        self.initializers = []
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, hint: str, value) -> str:
        from onnx import numpy_helper

        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str = "", **attributes) -> str:
        output = self.name(hint or op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output

    def model(self, output: str):
        helper = self.helper
        int64 = self.TensorProto.INT64
        inputs = [helper.make_tensor_value_info(name, int64, ["batch", "tokens"]) for name in INPUT_NAMES]
        self.nodes.append(helper.make_node("Identity", [output], [OUTPUT], name=OUTPUT))
        outputs = [helper.make_tensor_value_info(OUTPUT, self.TensorProto.FLOAT, ["batch", None])]
        graph = helper.make_graph(self.nodes, "sentence_transformer", inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="open-ace")
        model.ir_version = 8  # what onnxruntime of any recent release reads
        return model


def _weight(weights: dict[str, np.ndarray], name: str) -> np.ndarray:
    try:
        return weights[name].astype(np.float32)
    except KeyError:
        raise Unsupported(f"model.safetensors has no {name}: not the BERT layout the torch-free export reads") from None


def _linear(g: _Graph, weights: dict, prefix: str, x: str) -> str:
    """x @ W.T + b, W stored as torch's Linear keeps it ([out, in]); the graph holds W.T for MatMul."""
    w = g.const(prefix + ".weight", _weight(weights, prefix + ".weight").T)
    b = g.const(prefix + ".bias", _weight(weights, prefix + ".bias"))
    return g.op("Add", [g.op("MatMul", [x, w]), b])


def _layer_norm(g: _Graph, weights: dict, prefix: str, x: str, eps: float) -> str:
    scale = g.const(prefix + ".weight", _weight(weights, prefix + ".weight"))
    bias = g.const(prefix + ".bias", _weight(weights, prefix + ".bias"))
    return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def _activation(g: _Graph, name: str, x: str) -> str:
    if name == "gelu":  # the exact GELU: x * (1 + erf(x / sqrt 2)) / 2
        erf = g.op("Erf", [g.op("Div", [x, g.const("sqrt2", np.array(math.sqrt(2.0), np.float32))])])
        one = g.const("one", np.array(1.0, np.float32))
        half = g.const("half", np.array(0.5, np.float32))
        return g.op("Mul", [g.op("Mul", [x, g.op("Add", [erf, one])]), half])
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):  # the tanh approximation
        cube = g.op("Mul", [g.op("Mul", [x, x]), x])
        inner = g.op("Add", [x, g.op("Mul", [cube, g.const("c", np.array(0.044715, np.float32))])])
        tanh = g.op("Tanh", [g.op("Mul", [inner, g.const("k", np.array(math.sqrt(2.0 / math.pi), np.float32))])])
        one = g.const("one", np.array(1.0, np.float32))
        return g.op("Mul", [g.op("Mul", [x, g.op("Add", [tanh, one])]), g.const("half", np.array(0.5, np.float32))])
    if name == "relu":
        return g.op("Relu", [x])
    raise Unsupported(f"the activation {name!r}; the torch-free export builds gelu, gelu_new and relu")


def _encoder(g: _Graph, config: dict, weights: dict) -> str:
    """Token vectors [batch, tokens, hidden] of BertModel (its pooler unused, as sentence-transformers does)."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    if hidden % heads:
        raise Unsupported(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    head_size = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    activation = str(config.get("hidden_act", "gelu"))

    ids, mask, types = INPUT_NAMES
    # Embeddings: (word + token type) + position [0, tokens), then LayerNorm, in BertEmbeddings' order.
    words = g.op("Gather", [g.const("word_embeddings", _weight(weights, "embeddings.word_embeddings.weight")), ids])
    type_table = g.const("token_type_embeddings", _weight(weights, "embeddings.token_type_embeddings.weight"))
    summed = g.op("Add", [words, g.op("Gather", [type_table, types])])
    # Positions 0..tokens-1 gathered from the table, as BertEmbeddings does (the quantiser quantises that Gather
    # as it did in the torch export, so int8 vectors stay what they were).
    tokens = g.op("Shape", [ids], start=1, end=2)  # [tokens]
    all_positions = np.arange(int(config["max_position_embeddings"]), dtype=np.int64)[None, :]
    positions = g.op(
        "Slice",
        [
            g.const("position_ids", all_positions),
            g.const("zero", np.array([0], np.int64)),
            tokens,
            g.const("axis", np.array([1], np.int64)),
        ],
    )  # [1, tokens]
    position_table = g.const("position_embeddings", _weight(weights, "embeddings.position_embeddings.weight"))
    summed = g.op("Add", [summed, g.op("Gather", [position_table, positions])])
    x = _layer_norm(g, weights, "embeddings.LayerNorm", summed, eps)

    # Padding masked out of attention: 0 where a token is, the float32 minimum where padding is; [batch, 1, 1, tokens].
    mask_float = g.op("Cast", [mask], to=g.TensorProto.FLOAT)
    inverted = g.op("Sub", [g.const("one", np.array(1.0, np.float32)), mask_float])
    bias = g.op("Mul", [inverted, g.const("min", np.array(np.finfo(np.float32).min, np.float32))])
    bias = g.op("Unsqueeze", [bias, g.const("axes", np.array([1, 2], np.int64))])

    split_shape = g.const("split_heads", np.array([0, 0, heads, head_size], np.int64))
    merge_shape = g.const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(1.0 / math.sqrt(head_size), np.float32))
    layers = int(config["num_hidden_layers"])
    for index in range(layers):
        prefix = f"encoder.layer.{index}."

        def heads_of(name: str, perm: list[int], x: str, prefix: str = prefix) -> str:
            projected = _linear(g, weights, prefix + "attention.self." + name, x)
            return g.op("Transpose", [g.op("Reshape", [projected, split_shape])], perm=perm)

        query = heads_of("query", [0, 2, 1, 3], x)  # [batch, heads, tokens, head]
        key = heads_of("key", [0, 2, 3, 1], x)  # [batch, heads, head, tokens]
        value = heads_of("value", [0, 2, 1, 3], x)
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [query, key]), scale]), bias])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), value])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_shape])
        attended = _linear(g, weights, prefix + "attention.output.dense", context)
        x = _layer_norm(g, weights, prefix + "attention.output.LayerNorm", g.op("Add", [attended, x]), eps)
        inner = _activation(g, activation, _linear(g, weights, prefix + "intermediate.dense", x))
        out = _linear(g, weights, prefix + "output.dense", inner)
        x = _layer_norm(g, weights, prefix + "output.LayerNorm", g.op("Add", [out, x]), eps)
    if f"encoder.layer.{layers}.attention.self.query.weight" in weights:
        raise Unsupported(f"model.safetensors has more encoder layers than config.json's num_hidden_layers {layers}")
    return x


def _pooling(g: _Graph, folder: Path, tokens: str, dimensions: int) -> str:
    if folder.name == "__mean__":
        modes = {"pooling_mode_mean_tokens": True}
    else:
        modes = _read_json(folder / "config.json", "config.json (pooling)")
    chosen = [
        name.removeprefix("pooling_mode_") for name, on in modes.items() if name.startswith("pooling_mode_") and on
    ]
    if len(chosen) != 1 or chosen[0] not in ("mean_tokens", "cls_token", "max_tokens"):
        raise Unsupported(
            f"pooling {', '.join(chosen) or 'none'}; the torch-free export builds mean, cls or max pooling"
        )
    if chosen[0] == "cls_token":
        return g.op("Gather", [tokens, g.const("first", np.array(0, np.int64))], axis=1)
    mask = g.op("Cast", [INPUT_NAMES[1]], to=g.TensorProto.FLOAT)
    mask = g.op("Unsqueeze", [mask, g.const("axis", np.array([2], np.int64))])  # [batch, tokens, 1]
    if chosen[0] == "max_tokens":  # padding set to a large negative number first, as Pooling does
        inverted = g.op("Sub", [g.const("one", np.array(1.0, np.float32)), mask])
        padding = g.op("Mul", [inverted, g.const("neg", np.array(-1e9, np.float32))])
        masked = g.op("Add", [g.op("Mul", [tokens, mask]), padding])
        return g.op("ReduceMax", [masked], axes=[1], keepdims=0)
    # Mean: the sum of the unmasked token vectors over their count (at least 1e-9, as Pooling clamps it).
    axis = g.const("axis", np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [tokens, mask]), axis], keepdims=0)
    count = g.op("ReduceSum", [mask, axis], keepdims=0)
    count = g.op("Max", [count, g.const("tiny", np.array(1e-9, np.float32))])
    return g.op("Div", [summed, count])


def _dense(g: _Graph, folder: Path, x: str, dimensions: int) -> tuple[str, int]:
    config = _read_json(folder / "config.json", "config.json (dense)")
    activation = str(config.get("activation_function", "torch.nn.modules.linear.Identity")).rsplit(".", 1)[-1]
    if activation not in ("Identity", "Tanh"):
        raise Unsupported(f"a Dense layer with {activation}; the torch-free export builds Identity and Tanh")
    weights = _weights(folder)
    out = g.op("MatMul", [x, g.const("dense.weight", _weight(weights, "linear.weight").T)])
    if config.get("bias", True):
        out = g.op("Add", [out, g.const("dense.bias", _weight(weights, "linear.bias"))])
    if activation == "Tanh":
        out = g.op("Tanh", [out])
    return out, int(config["out_features"])


def _normalise(g: _Graph, x: str) -> str:
    """x / max(||x||, 1e-12), as torch.nn.functional.normalize."""
    norm = g.op("ReduceL2", [x], axes=[-1], keepdims=1)
    return g.op("Div", [x, g.op("Max", [norm, g.const("eps", np.array(1e-12, np.float32))])])
