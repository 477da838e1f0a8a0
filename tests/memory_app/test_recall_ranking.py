"""How recall ranks and shows turns: Chinese queries cut into words, the session that answers lifting its other
turns, and the screen a recall fills (each turn once, at most three turns a hit)."""

import pytest

from memory_app.embedders.hash import HashEmbedder
from memory_app.embedders.local import LocalEmbedder
from memory_app.query_vectors import normalized_query, query_vectors
from memory_app.selectors import recall as recall_module
from memory_app.selectors.recall import (
    CANDIDATES,
    _Candidate,
    _floor,
    _pick,
    _score,
    query_terms,
    vector_text,
    weights,
)
from tests.memory_app.test_recall import chat, recall


@pytest.mark.django_db
def test_a_chinese_query_is_cut_into_words_not_every_pair_of_characters():
    terms = query_terms("我住的小区叫绿洲家园")
    assert ("小", "区") in terms and ("绿", "洲") in terms and ("家", "园") in terms
    # A pair across two words ("叫绿": "is called" + "green") is not a term, nor a one-character word ("的").
    assert ("叫", "绿") not in terms and ("的",) not in terms and ("住", "的") not in terms
    assert set(query_terms("Lisbon 的 bakery")) == {("lisbon",), ("bakeri",), ("的",)}  # a lone character stays


def test_a_turn_sharing_only_a_pair_across_words_is_not_a_keyword_match(api):
    stored = chat(api, ["他的外号叫绿茶", "周末我们在绿洲家园散步", "好的"])
    results = recall(api, "我住的小区叫绿洲家园", top_k=3)["results"]
    matched = {r["id"]: r["matched_by"] for r in results}
    assert "keyword" in matched[str(stored[1].pk)]
    assert "keyword" not in matched.get(str(stored[0].pk), [])


def candidate(session, seq, keyword=0.0):
    return _Candidate(kind="message", pk=f"{session}-{seq}", place=(session, seq), keyword=keyword)


def test_the_session_that_answers_lifts_its_other_turns(monkeypatch):
    # Two turns match equally; one's session also holds the best match of all (two turns away, not a neighbour).
    cands = {f"m:{c.pk}": c for c in (candidate("a", 1), candidate("a", 5), candidate("b", 1))}
    keyword = {"m:a-1": 0.9, "m:a-5": 0.4, "m:b-1": 0.4}
    monkeypatch.setattr(recall_module, "SESSION_WEIGHT", 0.0)
    tie = [c.pk for c in _score({k: _Candidate(**vars(c)) for k, c in cands.items()}, keyword)]
    assert tie == ["a-1", "a-5", "b-1"]  # without it, the tie goes by id
    monkeypatch.setattr(recall_module, "SESSION_WEIGHT", 0.5)
    ranked = _score(cands, keyword)
    assert [c.pk for c in ranked] == ["a-1", "a-5", "b-1"] and ranked[1].score > ranked[2].score
    monkeypatch.setattr(recall_module, "SESSION_WEIGHT", 0.5)
    keyword = {"m:a-1": 0.9, "m:a-5": 0.4, "m:b-1": 0.45}
    assert [c.pk for c in _score(cands, keyword)][1] == "a-5"  # a close second in the answering session wins


def test_an_english_only_model_weighs_less_on_a_chinese_question(monkeypatch):
    english_only = LocalEmbedder()  # the bundled all-MiniLM-L6-v2, not loaded: it only says what it reads
    monkeypatch.setattr(recall_module, "VECTOR_WEIGHT", 0.5)
    monkeypatch.setattr(recall_module, "CJK_VECTOR_WEIGHT", 0.1)
    assert weights("我住的小区叫什么名字？", english_only).vector == 0.1
    assert weights("Bart 住在绿洲家园吗", english_only).vector == 0.1  # mostly Chinese
    assert weights("小さな町に住んでいます", english_only).vector == 0.1
    assert weights("Where does Bart live?", english_only).vector == 0.5
    assert weights("Did Bart visit 北京 last summer?", english_only).vector == 0.5  # mostly English
    assert weights("", english_only).vector == 0.5
    assert weights("我住的小区叫什么名字？", HashEmbedder()).vector == 0.5  # not known to read few languages

    # A turn the question's words match, against one the English model only guesses is near.
    def ranked(question):
        cands = {
            "m:a-1": _Candidate(kind="message", pk="a-1", place=("a", 1), cosine=0.3),
            "m:b-1": _Candidate(kind="message", pk="b-1", place=("b", 1), cosine=0.9),
        }
        keyword = {"m:a-1": 0.4, "m:b-1": 0.15}
        return [c.pk for c in _score(cands, keyword, weights(question, english_only))]

    assert ranked("我住的小区叫什么名字？") == ["a-1", "b-1"]
    assert ranked("Where do I live?") == ["b-1", "a-1"]
    monkeypatch.setattr(recall_module, "CJK_VECTOR_WEIGHT", None)  # the rule off: one weight for every question
    assert weights("我住的小区叫什么名字？", english_only).vector == 0.5
    assert ranked("我住的小区叫什么名字？") == ["b-1", "a-1"]


def test_a_handful_of_records_does_not_move_where_not_similar_begins(monkeypatch):
    # A user's hundred nearest messages (cosines 0.30–0.50), a message the question's words match that is not
    # among them, and a few records about something else (the built-in strategies' first records of a user).
    for name, value in (("VECTOR_WEIGHT", 0.5), ("NEIGHBOUR_VECTOR", 0.0), ("SESSION_WEIGHT", 0.0)):
        monkeypatch.setattr(recall_module, name, value)

    def candidates(records: int) -> dict:
        nearest = {
            f"m:n{i}": _Candidate(kind="message", pk=f"n{i}", place=(f"s{i}", 1), cosine=0.30 + 0.2 * i / 99)
            for i in range(CANDIDATES)
        }
        matched = {"m:k": _Candidate(kind="message", pk="k", place=("k", 1))}
        unrelated = {f"r:{i}": _Candidate(kind="record", pk=f"r{i}", cosine=-0.5) for i in range(records)}
        return {**nearest, **matched, **unrelated}

    def best(records: int) -> str:
        return _score(candidates(records), {"m:k": 0.3})[0].pk

    assert best(records=0) == "k"  # the keyword match beats the best cosine, 0.2 above the floor
    assert _floor(candidates(3)) == 0.30 and best(records=3) == "k"  # the records' short list sets no floor
    monkeypatch.setattr(recall_module, "VECTOR_FLOOR", "weakest")  # as it was: the floor of every row
    assert _floor(candidates(3)) == -0.5 and best(records=3) == "n99"
    # A user of few rows: no list comes back full, and the floor is their weakest row, whatever the setting.
    few = {key: c for key, c in candidates(2).items() if key in ("m:n0", "m:n1", "r:0", "r:1")}
    monkeypatch.setattr(recall_module, "VECTOR_FLOOR", "full")
    assert _floor(few) == -0.5 and _floor({}) == 0.0


@pytest.mark.parametrize("mode", ["skip", "promote"])
@pytest.mark.parametrize("width", [1, 2, 3])
def test_each_turn_is_shown_once_and_the_screen_holds_at_most_three_turns_a_hit(monkeypatch, mode, width):
    monkeypatch.setattr(recall_module, "CONTEXT_HITS", mode)
    monkeypatch.setattr(recall_module, "CONTEXT", (width, width))
    ranked = [candidate("s", seq) for seq in (10, 11, 30, 50, 12, 70, 90)]
    picked = _pick(ranked, 5)
    shown = [c.place for c in picked] + [place for c in picked for place in c.around]
    assert len(shown) == len(set(shown))
    for n in range(1, len(picked) + 1):
        assert len({c.place for c in picked[:n]} | {p for c in picked[:n] for p in c.around}) <= 3 * n
    if mode == "promote":  # the best five, even where one is the context of a better one
        assert [c.place[1] for c in picked] == [10, 11, 30, 50, 12]
    else:  # a turn already on screen is passed over
        assert 11 not in [c.place[1] for c in picked]
    for c in picked:
        assert c.around == sorted(c.around, key=lambda place: place[1])
        assert all(abs(seq - c.place[1]) <= width for _, seq in c.around)


def test_weights_set_for_a_model_run_elsewhere_change_the_ranking(settings, monkeypatch):
    """ACE_RECALL_WEIGHTS: a deployment whose model (behind ACE_EMBEDDER=openai) was measured to want other weights
    gets them in every recall; a weight it does not name stays the model's, and the harness's switch turns it off."""
    monkeypatch.setattr(recall_module, "VECTOR_WEIGHT", 0.5)
    behind_http = HashEmbedder()  # any embedder without weights of its own

    # A turn the question's words match, against one the model finds nearer in meaning.
    def ranked():
        cands = {
            "m:a-1": _Candidate(kind="message", pk="a-1", place=("a", 1), cosine=0.3),
            "m:b-1": _Candidate(kind="message", pk="b-1", place=("b", 1), cosine=0.9),
        }
        return [c.pk for c in _score(cands, {"m:a-1": 0.4, "m:b-1": 0.15}, weights("Where do I live?", behind_http))]

    settings.ACE_RECALL_WEIGHTS = {}
    assert ranked() == ["b-1", "a-1"]
    settings.ACE_RECALL_WEIGHTS = {"VECTOR_WEIGHT": 0.1}
    assert ranked() == ["a-1", "b-1"]
    chosen = weights("Where do I live?", behind_http)
    assert (chosen.vector, chosen.neighbour_keyword) == (0.1, recall_module.NEIGHBOUR_KEYWORD)
    monkeypatch.setattr(recall_module, "EMBEDDER_WEIGHTS", False)  # bench/memory_eval.py sets the constants itself
    assert ranked() == ["b-1", "a-1"]


def _settings_process(tmp_path, **env_vars):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "CELERY_BROKER_URL", "DATABASE_URL")}
    env.update(ACE_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="aceproject.settings", **env_vars)
    code = "import django; django.setup()\nfrom django.conf import settings\nprint(settings.ACE_RECALL_WEIGHTS)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_recall_weights_from_the_environment_and_a_bad_one_stops_the_start(tmp_path):
    done = _settings_process(tmp_path, ACE_RECALL_WEIGHTS='{"VECTOR_WEIGHT": 1.0, "SESSION_WEIGHT": 0.5}')
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'VECTOR_WEIGHT': 1.0, 'SESSION_WEIGHT': 0.5}"
    for value, says in (
        ('{"VECTOR_WEIGHTS": 1.0}', "unknown weight 'VECTOR_WEIGHTS'; known: VECTOR_WEIGHT, NEIGHBOUR_KEYWORD"),
        ('{"VECTOR_WEIGHT": -1}', "VECTOR_WEIGHT is -1; a number from 0 to 10 is expected"),
        ('{"VECTOR_WEIGHT": "1"}', "VECTOR_WEIGHT is '1'"),
        ('{"VECTOR_WEIGHT": NaN}', "VECTOR_WEIGHT is nan"),
        ("[1.0]", "a JSON object, e.g."),
        ("VECTOR_WEIGHT=1", "not a JSON object"),
    ):
        bad = _settings_process(tmp_path, ACE_RECALL_WEIGHTS=value)
        assert bad.returncode != 0 and "ImproperlyConfigured" in bad.stderr and says in bad.stderr, (value, bad.stderr)


def test_a_long_question_the_model_cannot_read_is_embedded_from_its_first_characters(monkeypatch):
    """The English model's vector of a Chinese question weighs little (CJK_VECTOR_WEIGHT), and a long one took
    60 ms to embed on one thread: it is computed from its first CJK_VECTOR_CHARS characters instead."""
    monkeypatch.setattr(recall_module, "CJK_VECTOR_WEIGHT", 0.1)
    monkeypatch.setattr(recall_module, "CJK_VECTOR_CHARS", 128)
    english_only = LocalEmbedder()  # the bundled all-MiniLM-L6-v2, not loaded: it only says what it reads
    chinese = "今天天气真好，突然想起小时候跟小伙伴们在田野里奔跑的场景。" * 10  # 290 characters
    english = "Where did we go hiking with the kids last summer, and who drove? " * 5

    assert vector_text(chinese, english_only) == chinese[:128]
    assert vector_text(chinese[:100], english_only) == chinese[:100]  # short enough already
    assert vector_text(english, english_only) == english  # a question it reads is embedded whole
    assert vector_text(chinese, HashEmbedder()) == chinese  # a model not known to read few languages: whole
    monkeypatch.setattr(recall_module, "CJK_VECTOR_WEIGHT", None)  # the rule off: its vector weighs in full
    assert vector_text(chinese, english_only) == chinese
    monkeypatch.setattr(recall_module, "CJK_VECTOR_WEIGHT", 0.1)
    monkeypatch.setattr(recall_module, "CJK_VECTOR_CHARS", None)
    assert vector_text(chinese, english_only) == chinese


def test_recall_embeds_what_vector_text_says(api, monkeypatch):
    """Through the API: the vector recall searches with is the one of the question's first characters."""
    from memory_app.embedders import get_embedder

    embedder = get_embedder()
    monkeypatch.setattr(embedder, "languages", ("en",))  # as the bundled English model says of itself
    chat(api, ["今天天气真好，我们去田野里奔跑吧", "好的"])
    question = "今天天气真好，突然想起小时候跟小伙伴们在田野里奔跑的场景。" * 10
    query_vectors.clear()

    assert recall(api, question, top_k=3)["results"]
    cached = {text for key, text in query_vectors._vectors if key == embedder.key}
    assert cached == {normalized_query(question[: recall_module.CJK_VECTOR_CHARS])}
