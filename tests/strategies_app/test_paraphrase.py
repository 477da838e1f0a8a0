"""Issue 17, point 2: extraction that survives paraphrase, in Chinese and English.

End to end through the API with the built-in strategies and their own triggers (a real Celery worker): a
preference stated in one session and changed in the next is replaced — the old record kept for audit with its
reason — and the next session's context no longer recommends it. Then the rules alone: sentences keep file names,
versions, decimals and abbreviations whole; hedges, questions and third persons make no record of the user; in a
chat between people every record names its speaker, small talk makes none, and every record cites its message.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies_app.extractors.base import ExtractionContext, SourceMessage
from strategies_app.extractors.rules import RulesExtractor
from strategies_app.extractors.rules.text import sentences
from tests.strategies_app.test_seed_scenario import context, settled

ROOT = Path(__file__).resolve().parents[2]


def _session(api, user, name):
    response = api.post("/api/v1/sessions/", {"user_id": user, "name": name, "tool": "chat"}, format="json")
    assert response.status_code == 201
    return response.json()["id"]


def _say(api, session, text):
    body = [{"role": "user", "content": text}]
    assert api.post(f"/api/v1/sessions/{session}/messages/", body, format="json").status_code == 201


@pytest.mark.parametrize(
    ("user", "before", "change", "old_word", "new_word", "query"),
    [
        ("xiaohong", "我喜欢逛博物馆", "我现在不喜欢博物馆了，更想去公园散步", "逛博物馆", "公园", "周末去哪里玩"),
        (
            "alice",
            "I love visiting museums",
            "I'm not into museums anymore. These days I'd rather go for a walk in the park.",
            "loves visiting museums",
            "park",
            "where should I go this weekend",
        ),
    ],
)
def test_a_changed_preference_replaces_the_old_one_in_the_next_context(
    api, burst, user, before, change, old_word, new_word, query
):
    first = _session(api, user, "one")
    _say(api, first, before)
    settled(burst, api.tenant)
    records = api.get("/api/v1/records/", {"user_id": user}).json()["results"]
    old = next(r for r in records if old_word in r["content"].lower())
    second = _session(api, user, "two")
    _say(api, second, change)
    settled(burst, api.tenant)
    third = _session(api, user, "three")
    block = context(api, third, query)
    texts = " | ".join(r["text"].lower() for r in block["records"])
    assert old_word not in texts and new_word in texts, texts
    assert old_word not in block["prompt"].lower()
    kept = api.get(f"/api/v1/records/{old['id']}/").json()
    assert kept["valid"] is False, kept
    assert "contradicted by" in (kept.get("invalidated_reason") or ""), kept
    history = api.get(f"/api/v1/records/{old['id']}/history/").json()["results"]
    assert history[0]["change"] == "invalidate"


def test_a_chat_between_people_names_the_speaker_and_keeps_no_small_talk(api, burst):
    session = _session(api, "conv-1", "LoCoMo-like session")
    turns = [
        ("Caroline", "Hey Mel! Good to see you! How have you been?"),
        ("Melanie", "Hey Caroline! I'm swamped with the kids & work. I love painting, it keeps me sane."),
        ("Caroline", "I'm an assistant manager at a bookstore now. I love the smell and taste it adds to dishes."),
        ("Melanie", "Awesome! Remember to take some nice pictures!"),
        ("Caroline", "Do you like jazz?"),
    ]
    body = [
        {
            "role": "user" if who == "Caroline" else "assistant",
            "content": f"{who}: {text}",
            "metadata": {"speaker": who},
        }
        for who, text in turns
    ]
    assert api.post(f"/api/v1/sessions/{session}/messages/", body, format="json").status_code == 201
    settled(burst, api.tenant)
    for strategy in api.get("/api/v1/strategies/").json()["results"]:
        run = api.post(f"/api/v1/strategies/{strategy['id']}/run/", {"session": session}, format="json")
        assert run.status_code == 202, run.content
    settled(burst, api.tenant)
    records = api.get("/api/v1/records/", {"user_id": "conv-1"}).json()["results"]
    contents = [r["content"] for r in records]
    assert any(c.startswith("Melanie") and "painting" in c for c in contents), contents
    assert any(c.startswith("Caroline") and "assistant manager" in c for c in contents), contents
    assert not any("smell and taste" in c for c in contents), contents  # "it" points outside the record
    assert not any("pictures" in c or "Hey" in c or "jazz" in c for c in contents), contents
    assert not any(r["type"] == "task" for r in records), contents
    for record in records:
        assert record["source_message_ids"], record


def _extract(kind, *texts, speaker=""):
    messages = [SourceMessage(str(i), i, "user", text, speaker=speaker) for i, text in enumerate(texts, 1)]
    context = ExtractionContext(strategy_type=kind, prompt="", messages=messages, existing=[], session_id="s")
    return RulesExtractor().extract(context).candidates


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        ("Split auth.py into tokens.py and sessions.py", "Split auth.py into tokens.py and sessions.py"),
        ("Upgrade to v1.2.3 first. Then run the tests", "Upgrade to v1.2.3 first"),
        ("Pi is about 3.14 here", "Pi is about 3.14 here"),
        ("I like fruit, e.g. apples and pears", "I like fruit, e.g. apples and pears"),
        ("Dr. Smith and Mr. Lee moved to the U.S. last year", "Dr. Smith and Mr. Lee moved to the U.S. last year"),
        ("See https://example.com/a.html?x=1 for details", "See https://example.com/a.html?x=1 for details"),
    ],
)
def test_sentences_keep_file_names_versions_decimals_urls_and_abbreviations(text, whole):
    assert sentences(text)[0][0] == whole


def test_sentences_still_end_at_chinese_and_english_marks():
    assert [s for s, _ in sentences("我喜欢猫。你呢？好的！Then we go. OK")] == [
        "我喜欢猫",
        "你呢",
        "好的",
        "Then we go",
        "OK",
    ]


def test_a_task_keeps_file_names_whole():
    [task] = _extract("task", "Split auth.py into tokens.py and sessions.py. Next step is to update the imports.")
    assert "auth.py" in task.content and "tokens.py and sessions.py" in task.content, task.content
    assert "Split auth." not in task.content.replace("auth.py", "")


@pytest.mark.parametrize(
    "text",
    [
        "Maybe I like jazz, not sure yet",
        "I think I might enjoy hiking",
        "我可能会喜欢爵士吧",
        "do you like jazz?",
        "你喜欢爵士吗？",
        "Do you like jazz",
        "My sister loves jazz",
        "我妹妹特别喜欢爵士乐",
        "If I had more time I'd love to paint",
        "要是明天不下雨我们就去爬山",
        "Hey John!",
        "哈哈哈哈笑死我了",
    ],
)
def test_hedges_questions_third_persons_and_small_talk_make_no_record_of_the_user(text):
    assert _extract("profile", text) == [] and _extract("fact", text) == []


@pytest.mark.parametrize(
    ("text", "content", "polarity"),
    [
        ("我现在不喜欢博物馆了", "不喜欢博物馆", "dislike"),
        ("我不再喝咖啡了", "不再喝咖啡", "dislike"),
        ("最近对游戏没什么兴趣了", "对游戏不感兴趣", "dislike"),
        ("这阵子我更想待在家里", "偏好待在家里", "prefer"),
        ("I'm not into museums anymore", "Is not into museums", "dislike"),
        ("I've gone off sushi lately", "Has gone off sushi", "dislike"),
        ("These days I'd rather go for a walk in the park", "Would rather go for a walk in the park", "prefer"),
    ],
)
def test_preference_changes_are_understood(text, content, polarity):
    [found] = _extract("profile", text)
    assert found.content == content and found.fields["polarity"] == polarity


def test_speaker_prefix_names_the_record_and_its_slot():
    [job] = _extract("profile", "Caroline: I'm an assistant manager at a bookstore.")
    assert job.content == "Caroline is an assistant manager" and job.slot.startswith("speaker:caroline|")
    [pref] = _extract("profile", "I love painting, it keeps me sane.", speaker="Melanie")
    assert pref.content == "Melanie loves painting"
    assert _extract("profile", "Audrey: I love the smell and taste it adds to dishes.") == []
    assert _extract("fact", "Audrey: Don't forget to take some nice pictures!") == []
    assert _extract("task", "Tim: Hey John. We connected over our shared love for basketball.") == []


def test_the_evaluation_set_stays_above_the_targets():
    """bench/extraction_eval.py on bench/data/extraction_eval.jsonl: precision ≥ 0.9 and recall ≥ 0.8 overall,
    on the dev and the held-out split alike."""
    out = ROOT / ".ace" / "extraction_eval.json"
    out.parent.mkdir(exist_ok=True)
    subprocess.run([sys.executable, str(ROOT / "bench" / "extraction_eval.py"), "--json", str(out)], check=True)
    figures = json.loads(out.read_text())
    for split in ("dev", "holdout", "all"):
        row = figures[f"{split}/all/all"]
        assert row["precision"] >= 0.9 and row["recall"] >= 0.8, (split, row)
    items = [json.loads(line) for line in (ROOT / "bench" / "data" / "extraction_eval.jsonl").read_text().splitlines()]
    assert len(items) >= 300
    langs = {lang: sum(1 for i in items if i["lang"] == lang) for lang in ("en", "zh")}
    assert min(langs.values()) >= 0.4 * len(items), langs


@pytest.mark.parametrize(
    "clause,phrase",
    [
        ("I'm not fond of horror movies", "Is not fond of horror movies"),
        ("I am not big on crowded beaches", "Is not big on crowded beaches"),
        ("I'm not really a fan of jazz", "Is not a fan of jazz"),
    ],
)
def test_every_dislike_the_pattern_accepts_has_its_wording(clause, phrase):
    """Found on REALTALK: "I'm not fond of …" matched the dislike pattern but had no wording, and the whole
    strategy run failed (StopIteration)."""
    from strategies_app.extractors.rules.profile.preferences import en_preference

    candidate = en_preference(clause)
    assert candidate is not None
    assert phrase.lower() in str(candidate).lower()


_CHAT_WORDS = (
    "I i'm I'm not no longer don't like love hate fond of big on into fan prefer rather would"
    " 我 不 喜欢 不再 更想 现在 了 博物馆 museums park jazz my sister maybe"
    " ? . 。 ！ , auth.py v1.2 3.14 Dr. e.g. Caroline: Hey"
).split()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(st.one_of(st.sampled_from(_CHAT_WORDS), st.text(max_size=12)), max_size=30),
    kind=st.sampled_from(["profile", "fact", "task"]),
    speaker=st.sampled_from(["", "Caroline"]),
)
def test_the_rules_never_fail_on_any_text(words, kind, speaker):
    """A fuzzer over chat-like word soup and arbitrary text: the rules may find nothing, never raise (a raise
    fails the whole strategy run, as "I'm not fond of …" did)."""
    for candidate in _extract(kind, " ".join(words), speaker=speaker):
        assert candidate.content.strip()
