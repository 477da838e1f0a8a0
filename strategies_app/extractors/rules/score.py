"""``score(text, role)``: the cheap rating the confidence-threshold trigger runs on every new message."""

from __future__ import annotations

import re

from .text import ACKNOWLEDGEMENT, WORD_START, Keywords, combine

_SCORE_STRONG_WORDS = (
    "remember|don't forget|note that|keep in mind|my name|call me|i prefer|i'd rather|i would rather|favorite"
    "|favourite|allergic|allergy|budget|lesson|next time|vegetarian|vegan|i no longer|i now prefer|years old"
    "|i live in|i moved to|i'm based|i work as|i work at|i work for|i hate|i really hate|i love|i really love"
    "|i dislike|i can't stand".split("|")
)
_SCORE_STRONG_WORDS_ZH = (
    "记住|别忘|记一下|帮我记|我叫|名字|偏好|偏爱|更喜欢|最喜欢|不喜欢|讨厌|过敏|预算|教训|经验|下次要|吃素|住在|我今年"
).split("|")
_SCORE_MEDIUM_WORDS = [
    *combine("i ", "like|really like|also like|enjoy|usually|always|never|avoid"),
    *combine("i'm |i am ", "a |an |from "),
    *combine("my ", "wife|husband|partner|son|daughter|kid|mom|mum|mother|dad|father|brother|sister|boss|dog|cat"),
    *"next step|is done|are done|finished|completed|progress|stage|phase|blocked|stuck|turned out|i went to"
    "|i visited|the way to".split("|"),
]
_SCORE_MEDIUM_WORDS_ZH = (
    "喜欢|习惯|我是|岁|老婆|老公|女儿|儿子|妈妈|爸爸|下一步|完成|搞定|进度|阶段|卡在|原来|去了|步骤|不吃".split("|")
)
_SCORE_STRONG = Keywords(_SCORE_STRONG_WORDS, _SCORE_STRONG_WORDS_ZH)
_SCORE_ANY = Keywords(_SCORE_STRONG_WORDS, _SCORE_STRONG_WORDS_ZH, _SCORE_MEDIUM_WORDS, _SCORE_MEDIUM_WORDS_ZH)
_SCORE_MEDIUM_ASSISTANT = Keywords(_SCORE_MEDIUM_WORDS, _SCORE_MEDIUM_WORDS_ZH)
_SCORE_LETTER = re.compile(r"[^\W\d_]")
_SCORE_FIRST_PERSON = re.compile(WORD_START + r"(?:i|i'm|i've|my|me)\b")


def score(text: str, role: str) -> float:
    """How likely a message holds something worth remembering, from 0 to 1 (a few regex tests, no parsing).

    First-person preferences, identity, budgets, "remember" and lessons score high, task progress medium,
    acknowledgements, greetings and tool output low.
    """
    if not text:
        return 0.0
    if role not in ("user", "assistant"):
        return 0.02
    padded = " " + text[:2000].lower().replace("’", "'")
    if role == "assistant":
        return 0.35 if _SCORE_MEDIUM_ASSISTANT(padded) else 0.05
    if len(padded) < 41 and (ACKNOWLEDGEMENT.match(padded) or not _SCORE_LETTER.search(padded)):
        return 0.02  # "ok thanks", "好的谢谢", "👍"
    if _SCORE_ANY(padded):
        value = 0.9 if _SCORE_STRONG(padded) else 0.65
    elif "我" in padded or _SCORE_FIRST_PERSON.search(padded):
        value = 0.25
    else:
        value = 0.1
    if padded.rstrip().endswith(("?", "？")):
        value *= 0.6
    return value
