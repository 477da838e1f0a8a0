"""The leave-one-data-set-out protocol (bench/memory_eval.py) end to end on three tiny data sets cut from the
synthetic LoCoMo-layout set, with the hash embedder and a two-point grid, in-process: every figure reported is
the held-out set's, under a configuration its own scores had no say in."""

import json

import pytest
from django.test import Client

from memory_app.models import Record
from sessions_app.models import Session
from sessions_app.services.apikeys import apikey_create
from tests.support.bench import bench_module

GRID = {"VECTOR_WEIGHT": (0.5,), "NEIGHBOUR_KEYWORD": (0.0, 0.5)}


@pytest.fixture(scope="module")
def memory_eval():
    with bench_module("memory_eval") as module:
        yield module


@pytest.fixture
def datasets(tmp_path, memory_eval):
    """One synthetic sample per data set; the last named as a Chinese set, so it has the issue's target."""
    samples = memory_eval.locomo.load_dataset(memory_eval.locomo.DEFAULT_DATASET)
    paths = []
    for name, sample in zip(("alpha", "beta", "gamma_zh"), samples, strict=True):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps([sample]))
        paths.append(path)
    return paths, {path.stem: len(sample["qa"]) for path, sample in zip(paths, samples, strict=True)}


def test_a_fold_is_chosen_on_the_other_sets_even_when_its_own_best_differs(memory_eval):
    # Config 0 is best on A by far; B and C both prefer config 1, so leaving A out must choose 1.
    objectives = {"A": [0.9, 0.1], "B": [0.2, 0.6], "C": [0.3, 0.5]}

    folds = memory_eval.leave_one_out(objectives)

    assert folds["A"]["chosen"] == 1 and folds["A"]["in_sample_best"] == 0
    assert folds["A"]["others_objective"] == 0.55 and folds["A"]["in_sample_best_objective"] == 0.9
    # Leaving B out: A's 0.9 outweighs C's preference (means 0.6 against 0.3), though B itself prefers 1.
    assert folds["B"]["chosen"] == 0 and folds["B"]["in_sample_best"] == 1
    # Whatever A scores itself, A's fold does not move.
    for own in ([1.0, 0.0], [0.0, 1.0], [0.5, 0.5]):
        assert memory_eval.leave_one_out({**objectives, "A": own})["A"]["chosen"] == 1
    with pytest.raises(ValueError):
        memory_eval.leave_one_out({"A": [0.5]})


def test_a_configuration_that_shows_more_than_the_budget_is_never_chosen(memory_eval):
    # Config 1 is best everywhere, but shows more turns for ten hits than the budget on average over the sets
    # that choose for A and for B (32.5), and for C (40).
    objectives = {"A": [0.5, 0.9], "B": [0.4, 0.8], "C": [0.3, 0.7]}
    shown = {"A": [25.0, 40.0], "B": [28.0, 40.0], "C": [20.0, 25.0]}

    folds = memory_eval.leave_one_out(objectives, shown, budget=30.0)

    assert folds["A"]["chosen"] == 0 and folds["B"]["chosen"] == 0 and folds["C"]["chosen"] == 0
    assert folds["C"]["in_sample_best"] == 1  # within the budget on C itself
    assert memory_eval.leave_one_out(objectives)["A"]["chosen"] == 1  # without the turns, the best is chosen
    with pytest.raises(ValueError, match="at most 10"):
        memory_eval.leave_one_out(objectives, shown, budget=10.0)


def test_the_protocol_end_to_end(db, memory_eval, datasets, tmp_path, monkeypatch, capsys):
    paths, questions = datasets
    key = apikey_create(tenant_name="memory-eval-ci").plain_key
    monkeypatch.setattr(memory_eval.benchlib, "RESULTS_DIR", tmp_path / "results")

    report = memory_eval.evaluate(
        memory_eval.locomo.DjangoApi(key, Client()), paths, grid=GRID, progress=lambda *args: None
    )
    memory_eval.print_report(report)
    written = json.loads(memory_eval.write_report(report, "ci").read_text())
    out = capsys.readouterr().out

    assert report["embedder"].startswith("hash") and report["configurations"] == 2
    sets = written["datasets"]
    assert list(sets) == ["alpha", "beta", "gamma_zh"]
    # Each set under its own user prefix: no set's recall can reach another's turns.
    users = set(Session.objects.filter(tenant__name="memory-eval-ci").values_list("user_id", flat=True))
    assert {user.split("/")[0] for user in users} == set(sets) and len(users) == 3

    in_sample = {name: [row["objective"] for row in data["in_sample"]] for name, data in sets.items()}
    points = memory_eval.locomo.grid_points(GRID)
    for name, data in sets.items():
        held_out = data["held_out"]["overall"]
        assert data["questions"] == held_out["questions"] == questions[name]
        assert 0 <= held_out["own@10"] <= held_out["with-context@10"] <= 1
        # Ten hits show at least ten turns (these users have 50+) and at most thirty (each with two neighbours).
        assert 10 <= held_out["turns_shown"] <= 30
        assert data["held_out"]["latency"]["runs"] == questions[name] and data["held_out"]["latency"]["p95_ms"] > 0
        assert data["held_out"]["degraded_answers"] == data["held_out"]["incomplete_answers"] == 0
        assert sum(c["questions"] for c in data["held_out"]["by_category"].values()) == questions[name]
        # The fold's choice is the best mean over the OTHER sets; the set's own scores have no say.
        others = [scores for other, scores in in_sample.items() if other != name]
        means = [sum(scores[i] for scores in others) / len(others) for i in range(len(points))]
        assert data["fold"]["chosen"] == points[max(range(len(points)), key=lambda i: (means[i], -i))]
        best_elsewhere = 1 - points.index(data["fold"]["chosen"])
        rigged = {**in_sample, name: [1.0 if i == best_elsewhere else 0.0 for i in range(len(points))]}
        assert points[memory_eval.leave_one_out(rigged)[name]["chosen"]] == data["fold"]["chosen"]
        # The API's answers under the chosen constants are the gathered scoring's: the harness measures one thing.
        assert data["gathered_check"]["agrees_with_api"]
        assert held_out["own@10"] == data["in_sample"][points.index(data["fold"]["chosen"])]["own@10"]

    # Only the Chinese set (and every set's p95) has a target here; each verdict is the figure against it.
    assert [t["target"] for t in sets["gamma_zh"]["targets"]] == ["with-context@10 >= 0.75", "p95 < 50 ms"]
    assert [t["target"] for t in sets["alpha"]["targets"]] == ["p95 < 50 ms"]
    verdict = sets["gamma_zh"]["targets"][0]
    assert verdict["met"] == (sets["gamma_zh"]["held_out"]["overall"]["with-context@10"] >= 0.75)

    # Beside each set, the same run's yardstick on the same questions: plain BM25 over its conversation's turns.
    for name, data in sets.items():
        yardstick = data["baseline"]
        assert yardstick["questions"] == questions[name]
        assert 0 <= yardstick["own@10"] <= yardstick["with-context@10"] <= 1 and yardstick["turns_shown"] <= 30
    assert sets["alpha"]["baseline"]["tokenizer"] == "words"
    assert set(sets["gamma_zh"]["baseline"]["tokenizers"]) == {"jieba", "pairs"}
    assert "plain BM25, same run" in out

    # And what a deployment of this embedder should run: the best mean over every set, as the setting to copy.
    over_all = report["over_all_sets"]
    means = [sum(scores[i] for scores in in_sample.values()) / len(in_sample) for i in range(len(points))]
    assert over_all["config"] == points[max(range(len(points)), key=lambda i: (means[i], -i))]
    setting = json.loads(over_all["setting"].split("=", 1)[1].strip("'"))
    assert setting == {name: over_all["config"][name] for name in GRID}
    assert over_all["setting"] in out and "not a held-out figure" in out

    # One table row per data set, and the folds and in-sample bests printed apart.
    main_table = out.split("Held-out figures")[1].split("\n\n")[0].splitlines()[3:]
    assert [row.split()[0] for row in main_table] == ["alpha", "beta", "gamma_zh"]
    assert "Per category (held out)" in out and "IN-SAMPLE best (not a result)" in out
    assert "WARNING" not in out


def test_a_sets_observations_become_records_that_cite_their_turns(db, memory_eval):
    """--observations: LoCoMo's per-person observations (an LLM's, each citing its turns) are loaded as the user's
    records through the API, recall finds one by its own words and counts its cited turn as the hit's own; a
    second load keeps them, a load without the flag takes them away."""
    locomo = memory_eval.locomo
    sample = dict(locomo.load_dataset(locomo.DEFAULT_DATASET)[0])
    sample["observation"] = {
        "session_1_observation": {
            "Maya": [
                ["Maya adopted a beagle mix called Biscuit, a rescue with a light brown coat.", "D1:3"],
                ["Maya and Tom walk Biscuit along the canal every morning.", ["D1:1", "D1:3"]],
                ["Maya's sister keeps parrots.", "D99:1"],  # no such turn: nothing to cite, not loaded
            ]
        }
    }
    api = locomo.DjangoApi(apikey_create(tenant_name="memory-eval-observations").plain_key, Client())

    def load(observations: bool) -> dict:
        return locomo.load_samples(
            api,
            [sample],
            dataset_name="obs.json",
            user_prefix="obs/",
            reuse=True,
            observations=observations,
            progress=lambda *args: None,
        )

    loaded = load(observations=True)
    info = loaded["loaded"][str(sample["sample_id"])]
    assert info["observations"] == 2

    def records():
        return Record.objects.filter(tenant__name="memory-eval-observations", user_id=f"obs/{sample['sample_id']}")

    cited = {r.content: sorted(m.external_id for m in r.source_messages.all()) for r in records()}
    assert cited == {
        "Maya adopted a beagle mix called Biscuit, a rescue with a light brown coat.": ["D1:3"],
        "Maya and Tom walk Biscuit along the canal every morning.": ["D1:1", "D1:3"],
    }
    assert {r.strategy for r in records()} == {locomo.OBSERVATION_STRATEGY}
    assert all(r.embedding_key for r in records())  # in the vector space recall searches

    hits, _, _ = locomo.Asker(api).ask("hybrid", "Which canal does Maya walk along?", f"obs/{sample['sample_id']}")
    record_hits = [h for h in hits if h[0] == ["D1:1", "D1:3"] and not h[1]]
    assert record_hits, hits  # the observation is a hit, its cited turns its own
    assert locomo.recall_at(hits[:1], ["D1:1"], 10, context=False) == 1.0

    assert load(observations=True)["loaded"][str(sample["sample_id"])]["observations"] == 2  # kept, not doubled
    assert records().count() == 2
    # A load interrupted after its first observation is finished by the next one, not taken as complete.
    records().filter(content__startswith="Maya and Tom").delete()
    assert load(observations=True)["loaded"][str(sample["sample_id"])]["observations"] == 2
    assert sorted(records().values_list("content", flat=True)) == sorted(cited)
    load(observations=False)
    assert not records().exists()


def test_constants_that_cannot_change_a_sets_scores_are_scored_once(memory_eval):
    """A set without Chinese questions is not weighed by CJK_VECTOR_WEIGHT, nor a set without records by
    VECTOR_FLOOR: configurations differing only in those are scored once (the grid's size, not its figures)."""
    from types import SimpleNamespace

    from memory_app.embedders.local import LocalEmbedder
    from memory_app.selectors.recall import _Candidate

    grid = {"VECTOR_WEIGHT": (0.5,), "CJK_VECTOR_WEIGHT": (None, 0.1), "VECTOR_FLOOR": ("weakest", "full")}
    message = _Candidate(kind="message", pk="m", place=("s", 1), cosine=0.4)
    record = _Candidate(kind="record", pk="r", cosine=0.2)
    keyword_only_record = _Candidate(kind="record", pk="k")

    def gathered(questions, *candidates):
        return SimpleNamespace(
            questions=questions,
            embedder=LocalEmbedder(),  # the bundled English-only model (not loaded: it only says what it reads)
            candidates=[({f"{c.kind[0]}:{c.pk}": c for c in candidates}, {})],
        )

    english = gathered(["Where does Bart live?"], message, keyword_only_record)
    assert memory_eval.idle_constants(grid, english) == {"CJK_VECTOR_WEIGHT", "VECTOR_FLOOR"}
    chinese_with_records = gathered(["Where does Bart live?", "我住的小区叫什么名字？"], message, record)
    assert memory_eval.idle_constants(grid, chinese_with_records) == set()
    assert memory_eval.idle_constants({"VECTOR_WEIGHT": (0.5,)}, english) == set()  # only what the grid tries


def test_the_yardstick_is_plain_bm25_over_the_turns_with_their_session_neighbours(memory_eval):
    """The baseline every figure is printed beside: the question's best-matching turns by BM25, each with the turn
    before and after it in its own session (never one from the next session), stemmed English words."""
    sample = {
        "sample_id": "s",
        "conversation": {
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Morning! Coffee first."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "We adopted two kittens yesterday."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "What colour are they?"},
            ],
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "Grey, both of them, and very loud."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "I am painting my kitchen this weekend."},
            ],
        },
    }
    question = {"sample_id": "s", "question": "When did Bo adopt a kitten?", "evidence": ["D1:2"], "category": "1"}
    colour = {**question, "question": "What colour are the kittens?", "evidence": ["D2:1"]}
    tokenize = memory_eval.baseline_tokenizers(chinese=False)["words"]

    assert tokenize("Adopted kittens, yesterday!") == ["adopt", "kitten", "yesterday"]
    one = memory_eval.bm25_baseline([sample], [question], tokenize, k=1)
    assert one["own@10"] == 1.0 and one["turns_shown"] == 3  # the hit and both of its session neighbours
    last = memory_eval.bm25_baseline([sample], [colour], tokenize, k=1)
    # The best turn is D1:3 ("colour", the shortest); D2:1, the answer, comes right after it but in the next
    # session, so it is not shown with it.
    assert last["own@10"] == 0.0 and last["with-context@10"] == 0.0
    assert memory_eval.bm25_baseline([sample], [], tokenize)["questions"] == 0

    chinese = memory_eval.baseline_tokenizers(chinese=True)
    assert chinese["pairs"]("我喜欢猫 and cats") == ["我喜", "喜欢", "欢猫", "and", "cats"]
    assert "喜欢" in chinese["jieba"]("我喜欢猫")
