"""Embedder providers: the hash fallback, an OpenAI-compatible endpoint (a fake one on 127.0.0.1), the offline
local model, and the choice by settings. No database needed."""

import json
import math
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memory_app.embedders import (
    Embedder,
    EmbedderError,
    EmbedderMisconfigured,
    EmbedderUnavailable,
    get_embedder,
)
from memory_app.embedders.hash import HashEmbedder, stem
from memory_app.embedders.openai import OpenAIEmbedder
from tests.support.http import FakeServer, Request

ROOT = Path(__file__).resolve().parents[2]


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v):
    return math.sqrt(sum(x * x for x in v))


# -- hash ---------------------------------------------------------------------------------------------------------


def test_hash_key_dimensions_label():
    e = HashEmbedder()
    assert (e.key, e.dimensions) == ("hash-v1:384", 384)
    assert "not semantic" in e.label
    assert HashEmbedder(dimensions=64).key == "hash-v1:64"
    with pytest.raises(EmbedderMisconfigured):
        HashEmbedder(dimensions=1)


def test_hash_vectors_are_normalised_in_order_and_deterministic():
    e = HashEmbedder()
    texts = ["The cat sat on the mat", "我喜欢博物馆", "", "   ", "!!!", "x" * 100_000, "Café ＡＢＣ résumé"]
    vectors = e.embed(texts)
    assert len(vectors) == len(texts)
    for v in vectors:
        assert len(v) == 384
        assert norm(v) == pytest.approx(1.0)
    assert e.embed(list(reversed(texts))) == list(reversed(vectors))
    assert HashEmbedder().embed(texts) == vectors
    assert e.embed([]) == []


def test_hash_is_the_same_in_another_process():
    """No use of Python's randomised hash(): another interpreter with another hash seed gives the same vector."""
    code = (
        "import json; from memory_app.embedders.hash import HashEmbedder; "
        "print(json.dumps(HashEmbedder().embed(['Hangzhou trip plan 杭州三日游'])[0]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == pytest.approx(HashEmbedder().embed(["Hangzhou trip plan 杭州三日游"])[0])


def test_hash_empty_text_is_a_fixed_unit_vector():
    e = HashEmbedder()
    empty, blank, punct, word = e.embed(["", "  \n", "?!…", "museum"])
    assert empty == blank == punct
    assert norm(empty) == pytest.approx(1.0)
    assert empty[-1] == 1.0  # the reserved dimension
    assert cosine(empty, word) == 0.0  # no feature lands on the reserved dimension


def test_hash_similar_english_texts_are_closer_than_unrelated():
    e = HashEmbedder()
    a, b, c = e.embed(
        ["I love visiting art museums on weekends", "She visited the art museum last weekend", "Tomorrow it will rain"]
    )
    assert cosine(a, b) > 0.3
    assert cosine(a, b) > cosine(a, c) + 0.3


def test_hash_similar_chinese_texts_are_closer_than_unrelated():
    e = HashEmbedder()
    a, b, c = e.embed(["我喜欢博物馆", "喜欢逛博物馆", "明天下雨"])
    assert cosine(a, b) > 0.5
    assert cosine(a, b) > cosine(a, c) + 0.5


def test_hash_mixed_script_text_shares_both_kinds_of_features():
    e = HashEmbedder()
    a, b, c = e.embed(["Python教程 for beginners", "python 教程", "Rust编译器"])
    assert cosine(a, b) > cosine(a, c)


def test_hash_light_stemmer():
    assert stem("museums") == stem("museum")
    assert stem("raining") == stem("rained") == stem("rain")
    assert stem("likes") == stem("liked") == stem("liking") == stem("like")
    assert stem("cities") == stem("city")
    assert stem("boxes") == stem("box")
    assert stem("running") == stem("run")
    assert stem("class") == "class"
    assert stem("bus") == "bus"


def test_embed_refuses_a_bare_string():
    with pytest.raises(TypeError):
        HashEmbedder().embed("not a list")
    with pytest.raises(TypeError):
        HashEmbedder().embed([b"bytes"])


# -- openai: a fake OpenAI-compatible server on 127.0.0.1 ----------------------------------------------------------


class FakeEmbeddings(FakeServer):
    """A small OpenAI-compatible /v1/embeddings server. ``script`` holds canned answers (status, body) for the
    next requests; with none left it answers properly, with ``data`` shuffled (clients must sort by index)."""

    def __init__(self, dims=8):
        self.dims = dims
        self.script = []
        self.delay = 0.0
        self.closing = threading.Event()
        super().__init__(self.embed)
        self.base_url = f"{self.url}/v1"

    @property
    def requests(self) -> list[dict]:
        return [{"path": r.path, "headers": r.headers, "body": r.json()} for r in self.received]

    def embed(self, request: Request):
        if self.delay:
            self.closing.wait(self.delay)  # a slow server (the client's timeout is shorter)
        status, answer = self.script.pop(0) if self.script else (200, None)
        if answer is None and status == 200:
            answer = self.answer(request.json())
        return status, answer

    @staticmethod
    def vector_for(text, dims):
        # Not normalised on purpose (the client must normalise); the first component says which text it was.
        return [float(len(text)) + 1.0] + [float(i + 1) for i in range(dims - 1)]

    def answer(self, body):
        dims = body.get("dimensions") or self.dims
        data = [
            {"object": "embedding", "index": i, "embedding": self.vector_for(text, dims)}
            for i, text in enumerate(body["input"])
        ]
        random.Random(len(self.requests)).shuffle(data)
        return {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1}}

    def close(self):
        self.closing.set()
        super().close()


@pytest.fixture
def fake():
    server = FakeEmbeddings()
    yield server
    server.close()


def make(fake, **kwargs):
    options = {"base_url": fake.base_url, "model": "test-embed", "backoff": 0.01, **kwargs}
    return OpenAIEmbedder(**options)


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_request_is_well_formed(fake):
    e = make(fake, api_key="sk-test", dimensions=8)
    vectors = e.embed(["hello", "世界"])
    assert len(fake.requests) == 1
    request = fake.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["body"] == {"model": "test-embed", "input": ["hello", "世界"], "dimensions": 8}
    assert [len(v) for v in vectors] == [8, 8]
    for v in vectors:
        assert norm(v) == pytest.approx(1.0)
    assert (e.key, e.dimensions) == ("openai:test-embed:8", 8)
    assert "test-embed" in e.label


def test_openai_without_key_or_dimensions_sends_neither_and_learns_the_dimension(fake):
    e = make(fake)
    assert e.dimensions == 8  # asked the endpoint once
    assert e.key == "openai:test-embed:8"
    assert "Authorization" not in fake.requests[0]["headers"]
    assert "dimensions" not in fake.requests[0]["body"]
    e.embed(["a"])
    assert len(fake.requests) == 2  # the dimension was remembered


def test_openai_base_url_may_name_the_embeddings_route(fake):
    make(fake, base_url=fake.base_url + "/embeddings/").embed(["x"])
    assert fake.requests[0]["path"] == "/v1/embeddings"


def test_openai_batches_and_keeps_order_when_data_comes_back_shuffled(fake):
    e = make(fake, batch_size=128)
    texts = ["x" * (i + 1) for i in range(300)]  # the first component of each vector encodes the text's length
    vectors = e.embed(texts)
    assert [len(r["body"]["input"]) for r in fake.requests] == [128, 128, 44]
    assert [r["body"]["input"][0] for r in fake.requests] == [texts[0], texts[128], texts[256]]
    expected = [FakeEmbeddings.vector_for(t, 8) for t in texts]
    for got, want in zip(vectors, expected, strict=True):
        assert got == pytest.approx([x / norm(want) for x in want])


def test_openai_empty_input_list_makes_no_request(fake):
    assert make(fake).embed([]) == []
    assert fake.requests == []


def test_openai_empty_text_is_sent_as_a_space(fake):
    make(fake).embed(["", "ok"])
    assert fake.requests[0]["body"]["input"] == [" ", "ok"]


def test_openai_wrong_dimension_is_misconfigured(fake):
    e = make(fake, dimensions=384)
    fake.script.append((200, {"data": [{"index": 0, "embedding": [0.1] * 1536}]}))
    with pytest.raises(EmbedderMisconfigured, match=r"1536-dimensional.*ACE_EMBEDDER_DIMENSIONS=384"):
        e.embed(["hello"])


def test_openai_dimension_change_after_learning_is_misconfigured(fake):
    e = make(fake)
    e.embed(["a"])
    fake.script.append((200, {"data": [{"index": 0, "embedding": [0.1] * 4}]}))
    with pytest.raises(EmbedderMisconfigured, match="4-dimensional"):
        e.embed(["a"])


@pytest.mark.parametrize(
    "answer",
    [
        {"data": []},  # too few
        {"data": [{"index": 0}]},  # no embedding
        {"nothing": True},
        b"<html>not an API</html>",
        {"data": [{"index": 0, "embedding": [0.0] * 8}]},  # zero vector
    ],
)
def test_openai_malformed_answers_are_misconfigured(fake, answer):
    fake.script.append((200, answer))
    with pytest.raises(EmbedderMisconfigured):
        make(fake).embed(["x"])


def test_openai_server_down_is_unavailable_quickly():
    e = OpenAIEmbedder(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", backoff=0.05)
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable, match="could not be reached"):
        e.embed(["hello"])
    assert time.monotonic() - started < 3


def test_openai_default_retries_give_up_within_seconds():
    e = OpenAIEmbedder(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m")
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable, match="after 3 attempts"):
        e.embed(["hello"])
    assert time.monotonic() - started < 5


def test_openai_timeout_is_unavailable(fake):
    fake.delay = 1.0
    e = make(fake, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable, match="did not answer within"):
        e.embed(["slow"])
    assert time.monotonic() - started < 1.0
    assert len(fake.requests) == 1  # not retried: the whole timeout was already spent


def test_openai_500_then_success_is_retried(fake):
    fake.script += [(500, {"error": {"message": "boom"}}), (503, {"error": "busy"})]
    vectors = make(fake).embed(["hello"])
    assert len(vectors) == 1
    assert len(fake.requests) == 3


def test_openai_429_is_retried(fake):
    fake.script.append((429, {"error": {"message": "rate limited"}}))
    make(fake).embed(["hello"])
    assert len(fake.requests) == 2


def test_openai_persistent_5xx_is_unavailable(fake):
    fake.script += [(502, {"error": "bad gateway"})] * 3
    with pytest.raises(EmbedderUnavailable, match="502"):
        make(fake).embed(["hello"])
    assert len(fake.requests) == 3


@pytest.mark.parametrize("status", [401, 403, 404, 400])
def test_openai_client_errors_are_misconfigured_and_not_retried(fake, status):
    fake.script.append((status, {"error": {"message": "Incorrect API key provided"}}))
    with pytest.raises(EmbedderMisconfigured, match=str(status)) as info:
        make(fake, api_key="wrong").embed(["hello"])
    assert len(fake.requests) == 1
    assert "Incorrect API key provided" in str(info.value)
    assert "wrong" not in str(info.value).replace("Incorrect", "")  # the key itself is never echoed


@pytest.mark.parametrize(
    "options",
    [{"base_url": ""}, {"base_url": "ftp://host/v1"}, {"base_url": "localhost:8080"}, {"model": ""}],
)
def test_openai_missing_settings_are_misconfigured(options):
    with pytest.raises(EmbedderMisconfigured):
        OpenAIEmbedder(**{"base_url": "http://127.0.0.1:9/v1", "model": "m", **options})


def test_error_classes():
    assert issubclass(EmbedderUnavailable, EmbedderError)
    assert issubclass(EmbedderMisconfigured, EmbedderError)
    assert not issubclass(EmbedderUnavailable, EmbedderMisconfigured)


# -- local: the offline all-MiniLM-L6-v2 ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_embedder():
    from memory_app.embedders.local import LocalEmbedder

    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    real_connect = socket.socket.connect

    def loopback_only(sock, address):  # any attempt to reach the network fails the test
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (host.startswith("127.") or host in ("::1", "localhost")):
            raise AssertionError(f"the local embedder tried to reach {address}")
        return real_connect(sock, address)

    mp.setattr(socket.socket, "connect", loopback_only)
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    yield embedder
    mp.undo()


def test_local_gives_normalised_384_dim_vectors(local_embedder):
    e = local_embedder
    assert (e.key, e.dimensions) == ("local:all-MiniLM-L6-v2:384", 384)
    vectors = e.embed(["I love visiting museums.", "", "明天下雨"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    for v in vectors:
        assert norm(v) == pytest.approx(1.0, abs=1e-6)
    assert e.embed([]) == []


def test_local_paraphrase_is_closer_than_unrelated(local_embedder):
    a, b, c = local_embedder.embed(
        [
            "I really enjoy going to art museums.",
            "Visiting galleries and museums is something I love.",
            "The quarterly tax report is due on Friday.",
        ]
    )
    assert cosine(a, b) > cosine(a, c) + 0.2


def test_local_batches_keep_order(local_embedder):
    texts = [f"sentence number {i}" for i in range(130)]  # more than one batch of 64
    vectors = local_embedder.embed(texts)
    assert len(vectors) == 130
    assert vectors[129] == pytest.approx(local_embedder.embed([texts[129]])[0], abs=1e-5)


def test_loading_the_local_model_writes_no_progress_bars(local_embedder, capfd):
    from memory_app.embedders.local import LocalEmbedder

    capfd.readouterr()
    again = LocalEmbedder()
    assert again.embed(["hello"])[0] == pytest.approx(local_embedder.embed(["hello"])[0], abs=1e-6)
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out


def test_local_model_path_setting(local_embedder, tmp_path):
    from memory_app.embedders.local import LocalEmbedder

    same = LocalEmbedder(model=str(local_embedder.path))  # a folder path works like the packaged name
    assert same.key == f"local:{local_embedder.path.name}:384"
    assert LocalEmbedder(model="sentence-transformers/all-MiniLM-L6-v2").key == "local:all-MiniLM-L6-v2:384"
    with pytest.raises(EmbedderMisconfigured, match="not a sentence-transformers model folder"):
        LocalEmbedder(model=str(tmp_path / "missing"))
    with pytest.raises(EmbedderMisconfigured, match="384"):
        LocalEmbedder(dimensions=768)


def test_the_bundled_model_says_it_reads_english_only(local_embedder, tmp_path):
    from memory_app.embedders.local import LocalEmbedder

    # Recall weighs its vectors less on a Chinese, Japanese or Korean question (recall.weights).
    assert local_embedder.languages == ("en",)
    assert LocalEmbedder(model="sentence-transformers/all-MiniLM-L6-v2").languages == ("en",)
    own = tmp_path / "paraphrase-multilingual-MiniLM-L12-v2"
    own.symlink_to(local_embedder.path)
    assert LocalEmbedder(model=str(own)).languages is None  # a model folder of the user's: not known to be few


def test_local_broken_model_folder_is_misconfigured(tmp_path):
    from memory_app.embedders.local import LocalEmbedder

    (tmp_path / "config.json").write_text('{"hidden_size": 16}')
    e = LocalEmbedder(model=str(tmp_path))
    assert e.dimensions == 16
    with pytest.raises(EmbedderMisconfigured, match="Could not load"):
        e.embed(["x"])


# -- get_embedder() -------------------------------------------------------------------------------------------------


def test_get_embedder_defaults_to_hash(settings):
    settings.ACE_EMBEDDER = "hash"
    settings.ACE_EMBEDDER_DIMENSIONS = None
    e = get_embedder()
    assert isinstance(e, HashEmbedder) and isinstance(e, Embedder)
    assert e.key == "hash-v1:384"
    assert get_embedder() is e  # cached per process


def test_get_embedder_follows_settings_overrides(settings, fake):
    settings.ACE_EMBEDDER = "hash"
    settings.ACE_EMBEDDER_DIMENSIONS = 64
    small = get_embedder()
    assert small.key == "hash-v1:64"

    settings.ACE_EMBEDDER = "openai"
    settings.ACE_EMBEDDER_BASE_URL = fake.base_url
    settings.ACE_EMBEDDER_MODEL = "test-embed"
    settings.ACE_EMBEDDER_API_KEY = "sk-x"
    settings.ACE_EMBEDDER_DIMENSIONS = 8
    settings.ACE_EMBEDDER_BATCH = 2
    settings.ACE_EMBEDDER_TIMEOUT = 5
    remote = get_embedder()
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.key, remote.batch_size, remote.timeout) == ("openai:test-embed:8", 2, 5.0)
    remote.embed(["a", "b", "c"])
    assert len(fake.requests) == 2
    assert get_embedder() is remote

    settings.ACE_EMBEDDER = "hash"
    settings.ACE_EMBEDDER_DIMENSIONS = 64
    assert get_embedder() is small


def test_get_embedder_local(settings, local_embedder):
    settings.ACE_EMBEDDER = "local"
    settings.ACE_EMBEDDER_MODEL = ""
    settings.ACE_EMBEDDER_DIMENSIONS = None
    e = get_embedder()
    assert e.key == "local:all-MiniLM-L6-v2:384"
    assert get_embedder() is e


@pytest.mark.parametrize(
    "overrides",
    [
        {"ACE_EMBEDDER": "word2vec"},
        {"ACE_EMBEDDER": "openai", "ACE_EMBEDDER_BASE_URL": ""},
        {"ACE_EMBEDDER": "local", "ACE_EMBEDDER_MODEL": "/nonexistent/model"},
        {"ACE_EMBEDDER": "hash", "ACE_EMBEDDER_DIMENSIONS": 1},
    ],
)
def test_get_embedder_misconfigured(settings, overrides):
    for name, value in overrides.items():
        setattr(settings, name, value)
    with pytest.raises(EmbedderMisconfigured):
        get_embedder()


def test_a_web_process_gives_the_local_model_the_threads_it_is_told(local_embedder, settings):
    """The Procfile runs web processes with ACE_EMBEDDER_THREADS=1: a query is one short text, and several
    processes each with a thread per core fight over the cores under load."""
    torch = pytest.importorskip("torch", reason="the PyTorch runtime is an opt-in (requirements-torch.txt)")

    from memory_app.embedders.local import LocalEmbedder

    before = torch.get_num_threads()
    settings.ACE_EMBEDDER_THREADS = 1
    try:
        web = LocalEmbedder(runtime="torch")
        vector = web.embed(["what does the user like for lunch?"])[0]
        assert torch.get_num_threads() == 1
        assert vector == pytest.approx(local_embedder.embed(["what does the user like for lunch?"])[0], abs=1e-5)
    finally:
        torch.set_num_threads(before)


# -- local on ONNX Runtime (ACE_EMBEDDER_RUNTIME) -------------------------------------------------------------------

# Real chat turns (LoCoMo, as bench/locomo.py posts them), a Chinese one, an empty one and one longer than the
# model's 256 tokens (cut, as sentence-transformers cuts it).
CHAT_TURNS = [
    "Jon: Thanks! Appreciate your encouragement - it means a lot! I'm working on my business and some new dance "
    "routines - rehearsing hard for an upcoming show. [shares a photo: a photo of a woman in a gray dress doing a "
    "trick]",
    "Maria: Thanks, John! Your words really mean a lot. It's always nice to know that what I'm doing is making an "
    "impact.",
    "John: Wow, sounds fun! I can't wait to hear more about it. Talk to you soon!",
    "Caroline: Thanks, Melanie. Art gives me a sense of freedom, but so does having supportive people around, "
    "promoting LGBTQ rights and being true to myself. I want to live authentically and help others to do the same.",
    "John: Hey Maria, last week was really eye-opening. I visited a veteran's hospital and met some amazing people.",
    "我现在不喜欢博物馆了，更想去公园散步",
    "",
    "ok",
    " ".join(["Melanie: we camped by the lake and watched the stars all night with the kids."] * 30),
]


@pytest.fixture(scope="module")
def onnx_embedders(local_embedder):
    """The two ONNX runtimes over the same model, sharing the data folder's export."""
    from memory_app.embedders.local import LocalEmbedder

    return LocalEmbedder(runtime="onnx"), LocalEmbedder(runtime="onnx-int8")


# 30 varied texts (English, Chinese, Japanese, Russian, code, SQL, JSON, emoji, empty, blank, longer than the
# model's 256 tokens) and the vectors sentence-transformers on PyTorch gave them (tests/data/make_minilm_reference.py),
# so that the torch-free export is checked against torch where torch is not installed.
REFERENCE = json.loads((ROOT / "tests" / "data" / "minilm_reference.json").read_text())


def test_onnx_gives_torch_vectors_under_the_same_key(onnx_embedders):
    onnx, _int8 = onnx_embedders
    assert onnx.key == "local:all-MiniLM-L6-v2:384"  # what the torch runtime calls the same space
    expected = np.asarray(REFERENCE["vectors"])
    got = np.asarray(onnx.embed(REFERENCE["texts"]))
    assert got.shape == (30, 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-9)
    assert np.abs(got - expected).max() < 1e-5  # each component: torch's, to float precision (stored to 1e-6)
    assert (got * expected).sum(axis=1).min() > 0.99999


def test_onnx_int8_is_its_own_space_close_to_torch(onnx_embedders):
    _onnx, int8 = onnx_embedders
    assert int8.key == "local:all-MiniLM-L6-v2-int8:384"  # never compared with fp32 rows
    expected = np.asarray(REFERENCE["vectors"])
    cosines = (np.asarray(int8.embed(REFERENCE["texts"])) * expected).sum(axis=1)
    # ~0.99 for a sentence; a text of one or two letters ("a", "ok") moves most.
    assert cosines.min() > 0.93 and cosines.mean() > 0.98


def test_the_reference_is_what_the_torch_runtime_gives(local_embedder):
    """tests/data/minilm_reference.json stays honest: the PyTorch runtime, where installed, gives those vectors."""
    pytest.importorskip("sentence_transformers", reason="the PyTorch runtime is an opt-in (requirements-torch.txt)")
    from memory_app.embedders.local import LocalEmbedder

    torch_embedder = LocalEmbedder(runtime="torch")
    assert torch_embedder.key == local_embedder.key
    got = np.asarray(torch_embedder.embed(REFERENCE["texts"]))
    assert np.abs(got - np.asarray(REFERENCE["vectors"])).max() < 1e-5


def test_onnx_batches_by_length_and_keeps_the_callers_order(onnx_embedders):
    onnx, _int8 = onnx_embedders
    texts = [CHAT_TURNS[i % len(CHAT_TURNS)] + f" ({i})" for i in range(150)]  # mixed lengths, several batches
    together = np.asarray(onnx.embed(texts))
    alone = np.asarray([onnx.embed([text])[0] for text in texts[::17]])
    assert np.allclose(together[::17], alone, atol=1e-5)


def test_length_batches_pad_less():
    from memory_app.embedders.local import length_batches

    lengths = np.array([5, 200, 7, 6, 180, 5, 300])
    batches = length_batches(lengths, size=3, max_tokens=600)
    assert sorted(i for batch in batches for i in batch.tolist()) == list(range(7))  # every text once
    assert [lengths[b].tolist() for b in batches] == [[300, 200], [180, 7, 6], [5, 5]]  # longest first, capped


def test_onnx_gives_the_model_the_threads_it_is_told(onnx_embedders, settings):
    from memory_app.embedders.local import LocalEmbedder

    settings.ACE_EMBEDDER_THREADS = 1
    web = LocalEmbedder(runtime="onnx")
    web.load()
    session = web._model[0]
    assert session.get_session_options().intra_op_num_threads == 1
    assert web.status()["threads"] == 1


def test_unknown_runtime_is_misconfigured(settings):
    from memory_app.embedders.local import LocalEmbedder

    with pytest.raises(EmbedderMisconfigured, match="ACE_EMBEDDER_RUNTIME"):
        LocalEmbedder(runtime="tensorflow")


PARALLEL_START = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")
import django
django.setup()
from memory_app.embedders import get_embedder
e = get_embedder()
vector = e.embed(["Caroline: I went to a LGBTQ support group yesterday."])[0]
print(json.dumps({"key": e.key, "folder": str(e.export_folder), "vector": vector[:8],
                  "torch": "torch" in sys.modules, "sentence_transformers": "sentence_transformers" in sys.modules}))
"""


def test_processes_starting_together_export_once_and_never_import_torch(tmp_path):
    """Four processes start at once with an empty cache: one exports (in a child process) while the others wait
    on the lock; all read the same complete export; none of them imports torch."""
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "ACE_EMBEDDER": "local",
        "ACE_EMBEDDER_RUNTIME": "onnx",
        "ACE_EMBEDDER_CACHE_DIR": str(tmp_path / "models"),
    }
    children = [
        subprocess.Popen([sys.executable, "-c", PARALLEL_START], cwd=root, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        assert child.returncode == 0
        outputs.append(json.loads(out.strip().splitlines()[-1]))
    assert {o["key"] for o in outputs} == {"local:all-MiniLM-L6-v2:384"}
    assert len({o["folder"] for o in outputs}) == 1
    assert all(o["vector"] == pytest.approx(outputs[0]["vector"], abs=1e-7) for o in outputs)
    assert not any(o["torch"] or o["sentence_transformers"] for o in outputs)
    folders = sorted(p.name for p in (tmp_path / "models").iterdir() if p.is_dir())
    assert folders == [Path(outputs[0]["folder"]).name]  # no half-written export left beside it
    assert json.loads((Path(outputs[0]["folder"]) / "meta.json").read_text())["built_by"].startswith("onnx ")


# -- the export without torch ---------------------------------------------------------------------------------------

BLOCKED = ("torch", "sentence_transformers", "transformers")


def without_torch(folder: Path) -> dict:
    """Environment for a child process (and its children) in which importing torch, sentence-transformers or
    transformers fails, as in a .venv installed from requirements.txt alone."""
    for name in BLOCKED:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed (blocked)')\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}


def test_prepare_exports_the_model_without_torch_and_it_gives_torchs_vectors(tmp_path):
    """`manage.py ace_embeddings prepare` (what scripts/up runs) with torch unimportable: the export is written
    from the weights, and the served vectors are the ones sentence-transformers on PyTorch gave (stored)."""
    from memory_app.embedders.local import LocalEmbedder

    env = without_torch(tmp_path / "blocked")
    env.update(ACE_EMBEDDER="local", ACE_EMBEDDER_RUNTIME="onnx", ACE_EMBEDDER_CACHE_DIR=str(tmp_path / "models"))
    done = subprocess.run(
        [sys.executable, "manage.py", "ace_embeddings", "prepare"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Loaded in" in done.stdout and "runtime onnx" in done.stdout
    folder = next(p for p in (tmp_path / "models").iterdir() if p.is_dir() and not p.name.startswith("."))
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["built_by"].startswith("onnx ") and (meta["dimensions"], meta["max_seq_length"]) == (384, 256)

    served = LocalEmbedder(runtime="onnx", cache_dir=tmp_path / "models")
    got = np.asarray(served.embed(REFERENCE["texts"]))
    assert served.export_folder == folder  # the export prepare made, not a new one
    assert np.abs(got - np.asarray(REFERENCE["vectors"])).max() < 1e-5
    assert (got * np.asarray(REFERENCE["vectors"])).sum(axis=1).min() > 0.99999


def test_a_model_the_torch_free_export_cannot_build_is_named_with_the_way_out(tmp_path):
    from memory_app.embedders import onnx_graph
    from memory_app.embedders.local import LocalEmbedder

    model = tmp_path / "tiny-roberta"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"model_type": "roberta", "architectures": ["XLMRobertaModel"], "hidden_size": 16})
    )
    (model / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}])
    )
    with pytest.raises(onnx_graph.Unsupported, match="'roberta' model \\(XLMRobertaModel\\).*BERT models only"):
        onnx_graph.build(model)

    # Served without torch (the child process that exports can't import it): the error says what to install.
    env = without_torch(tmp_path / "blocked")
    env["ACE_EMBEDDER_CACHE_DIR"] = str(tmp_path / "models")
    probe = (
        "import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'aceproject.settings'); django.setup()\n"
        "from memory_app.embedders.local import LocalEmbedder\n"
        f"LocalEmbedder(model={str(model)!r}, runtime='onnx').load()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "EmbedderMisconfigured" in last and "'roberta' model" in last
    assert "pip install -r requirements-torch.txt" in last
    assert LocalEmbedder(model=str(model)).dimensions == 16  # known from config.json, without exporting


def test_a_bert_folder_without_safetensors_weights_is_refused_by_name(tmp_path):
    from memory_app.embedders import onnx_graph
    from memory_app.embedders.local import packaged_model_path

    model = tmp_path / "old-bert"
    model.mkdir()
    (model / "config.json").write_text((packaged_model_path() / "config.json").read_text())
    (model / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(onnx_graph.Unsupported, match="has pytorch_model.bin; the torch-free export reads model.safet"):
        onnx_graph.build(model)
