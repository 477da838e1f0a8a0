"""The profile rules: what a user says about themselves — preferences, habits and traits, identity,
relations, and constraints (budgets, allergies, diet) — in English and Chinese.

The rules live in ``preferences``, ``identity``, ``relations`` and ``constraints`` (what they share in ``common``);
this module holds the keyword filters that decide which messages and clauses they read, and runs them:
``profile_candidates(messages)``."""

from __future__ import annotations

import re

from strategies_app.extractors.base import Candidate, SourceMessage

from ..speaker import attribute, stands_alone
from ..text import LATIN_LETTERS, Keywords, clauses, combine, is_zh, normalise_text, sentences
from .constraints import en_constraints, zh_constraints
from .identity import en_identity, zh_identity
from .preferences import en_preference, zh_preference
from .relations import EN_RELATIONS, ZH_RELATIONS, en_relations, zh_relations

# -- Keyword filters: which messages and clauses the profile rules read -------------------------------------
_EN_PROFILE_KEYWORDS = [
    *"like|love|enjoy|adore|prefer|rather|switched to|changed to|lean toward|hate|dislike|detest|loathe|stand|bear"
    "|avoid|fan of|fond of|into|crazy about|obsessed|passionate|keen on|big on|favorite|favourite|fave|preference"
    "|usually|always|often|normally|typically|generally|tend to|never|rarely|regularly|mostly|habitually|person"
    "|introvert|extrovert|ambivert|night owl|early bird|early riser|perfectionist|minimalist|foodie|homebody"
    "|workaholic|neat freak|procrastinator|sleeper|picky eater|learner|my name|name's|go by|call me|called|named"
    "|living|based|staying|located|live|reside|moved|relocated|retired|turned|years old|year old|yrs|y/o|budget|spend"
    "|pay|cost|afford|price|no more than|not more than|at most|allergic|allerg|vegetarian|vegan|pescatarian"
    "|intolerant|gluten|diabetic|celiac|coeliac|halal|kosher|diet|gone off|lost interest|stopped|sick of|tired of"
    "|done with|interested|anymore|any more|these days|nowadays".split("|"),
    *combine("i'm |i am ", "a|an|from|called|now|currently|originally|1|2|3|4|5|6|7|8|9|not|into|turning|almost"),
    *combine("hi|hello|hey", ", i'm| i'm|, i am| i am|, this is| this is"),
    *combine("work ", "as|at|for|in"),
    *combine("can't |cannot |can not |don't |do not |never |no longer |won't ", "eat|drink|have"),
    *combine("my ", "|".join(k.replace(r"\s+", " ") for k in EN_RELATIONS)),
    *combine("my ", "older|elder|big|younger|little|baby|oldest|youngest|eldest|new|1|2|3|4|5|6|7|8|9"),
]
_ZH_PROFILE_KEYWORDS = [
    *"喜欢|爱|偏好|倾向|宁愿|宁可|讨厌|受不了|反感|厌恶|接受不了|不能接受|不想要|以后|今后|往后|从现在起|从今以后|习惯|一般|通常|平时|平常|总是|经常"
    "|老是|每天|每周|每晚|向来|一向|从不|从来不|很少|急性子|慢性子|夜猫子|完美主义|吃货|宅男|宅女|社恐|i人|e人|路痴|工作狂|起床困难户|拖延|的人|叫|名字"
    "|姓名|住在|定居|生活|居住|常住|搬|家在|来自|我是|我在|工作|上班|任职|实习|退休|岁|预算|不超过|不要超过|别超过|不能超过|最多|顶多|控制在|不高于|过敏"
    "|老家|不吃|不能吃|吃不了|不敢吃|不喝|不能喝|喝不了|忌口|戒了|吃素|素食|全素|纯素|清真|乳糖|糖尿病|兴趣|更想|更愿意|比较想|不再|再也不"
    "|腻了|厌倦".split("|"),
    *combine("我|我的|我家|我家的", "|".join(ZH_RELATIONS)),
]
_PROFILE_EN_KEYS = Keywords(_EN_PROFILE_KEYWORDS)
_PROFILE_ZH_KEYS = Keywords(_ZH_PROFILE_KEYWORDS)
_PROFILE_KEYS = Keywords(_EN_PROFILE_KEYWORDS, _ZH_PROFILE_KEYWORDS)


# "Maybe I'd like jazz", "I think I might enjoy hiking", "我可能喜欢爵士": a guess, not a statement about oneself.
_EN_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|might|probably|possibly|not\s+sure|unsure|i\s+guess|i\s+wonder|wondering|considering"
    r"|thinking\s+(?:about|of)|would\s+love\s+to|i'd\s+love\s+to|hoping|hope\s+to|wish)\b",
    re.IGNORECASE,
)
_ZH_HEDGE = re.compile("可能|也许|或许|说不定|好像|似乎|不确定|不一定|考虑|想试试|希望|要是|如果")


def _clause_candidates(clause: str) -> list[Candidate]:
    out = []
    if _EN_HEDGE.search(clause) or _ZH_HEDGE.search(clause):
        return out
    padded = " " + clause.lower()
    if not padded.isascii() and _PROFILE_ZH_KEYS(padded):
        found = zh_preference(clause)
        if found:
            out.append(found)
        out += zh_identity(clause) + zh_relations(clause) + zh_constraints(clause)
    if (len(clause) < 40 or _PROFILE_EN_KEYS(padded)) and LATIN_LETTERS.search(clause) and not is_zh(clause):
        found = en_preference(clause)
        if found:
            out.append(found)
        out += en_identity(clause) + en_relations(clause) + en_constraints(clause)
    return out


def profile_candidates(messages: list[SourceMessage]) -> tuple[list[Candidate], int]:
    """The candidates of the user messages, in order, and how many messages passed the keyword filter."""
    out, scanned = [], 0
    for message in messages:
        if message.role != "user" and not (message.speaker and message.role == "assistant"):
            continue  # an assistant's words are no profile of the user, but a named person's are theirs
        text = normalise_text(message.content)
        if len(text) > 40 and not _PROFILE_KEYS(" " + text.lower()):
            continue
        scanned += 1
        for sentence, question in sentences(text):
            if question:
                continue
            for clause in clauses(sentence):
                for candidate in _clause_candidates(clause):
                    if not stands_alone(candidate, message.speaker):
                        continue
                    candidate.source_message_ids = [message.id]
                    out.append(attribute(candidate, message.speaker))
    return out, scanned
