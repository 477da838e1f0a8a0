"""The relation rules: the names and jobs of the user's family, partner, friends, colleagues and pets ("my wife Anna",
"my dog is called Max", "我女儿叫小雨")."""

from __future__ import annotations

import re

from strategies_app.extractors.base import Candidate

from ..text import EN_FILLER_TAIL, SPACES, ZH_BAD_START, ZH_LEAD, ZH_TAIL, has_cjk, upper_first
from .common import ZH_JOB_SUFFIX, en_asserted, profile_candidate
from .identity import EN_CAPITALISED_NAME, EN_NAME, PROFESSIONS, ZH_NAME_TAIL, valid_name

_I = re.IGNORECASE

EN_RELATIONS = {
    **dict.fromkeys(["wife", "husband", "partner", "spouse", "girlfriend", "boyfriend", "son", "daughter"], None),
    **dict.fromkeys(
        ["baby", "uncle", "aunt", "cousin", "boss", "colleague", "roommate", "friend", "best friend"], None
    ),
    **dict.fromkeys(["dog", "cat", "pet", "bird", "rabbit", "hamster", "parrot", "horse", "brother", "sister"], None),
    **dict.fromkeys(
        ["teacher", "doctor", "therapist", "assistant", "neighbour", "neighbor", "fiance", "fiancee"], None
    ),
    "kid": "child",
    "child": "child",
    "mother": "mother",
    "mom": "mother",
    "mum": "mother",
    "father": "father",
    "dad": "father",
    "grandmother": "grandmother",
    "grandma": "grandmother",
    "grandfather": "grandfather",
    "grandpa": "grandfather",
    "manager": "boss",
    "coworker": "colleague",
    "co-worker": "colleague",
    "flatmate": "roommate",
    "puppy": "dog",
    "kitten": "cat",
}
_EN_REL = "|".join(sorted((k.replace(" ", r"\s+") for k in EN_RELATIONS), key=len, reverse=True))
_EN_REL_MOD = r"(?P<mod>(?:older|elder|big|younger|little|baby|oldest|youngest|eldest|new|\d+[- ]year[- ]old)\s+)?"
_RE_EN_RELATION = re.compile(
    rf"\bmy\s+{_EN_REL_MOD}(?P<rel>{_EN_REL})(?:'s\s+name\s+is|\s+is\s+(?:called|named)|'s\s+(?:called|named)"
    rf"|\s+(?:is\s+)?called|\s+named|\s+goes\s+by)\s+{EN_NAME}"
    rf"|\bi\s+have\s+(?:an?|one|two|three|\d+)?\s*{_EN_REL_MOD.replace('mod', 'mod2')}(?P<rel2>{_EN_REL})s?\s+"
    rf"(?:called|named)\s+{EN_NAME.replace('name', 'name2')}",
    _I,
)
_RE_EN_RELATION_BARE = re.compile(
    rf"\bmy\s+{_EN_REL_MOD}(?P<rel>{_EN_REL}),?\s+(?:is\s+)?{EN_CAPITALISED_NAME}\b(?!\s*(?:'s|&|and\b))", _I
)
_RE_EN_RELATION_JOB = re.compile(
    rf"\bmy\s+{_EN_REL_MOD}(?P<rel>{_EN_REL})\s+is\s+(?:an?\s+)(?P<job>(?:[\w-]+\s+){{0,2}}?(?:{PROFESSIONS}))\b", _I
)
ZH_RELATIONS = {
    **dict.fromkeys(["老婆", "妻子", "太太", "媳妇"], "wife"),
    **dict.fromkeys(["爱人", "配偶"], "spouse"),
    **dict.fromkeys(["老公", "丈夫", "先生"], "husband"),
    **dict.fromkeys(["儿子"], "son"),
    **dict.fromkeys(["女儿", "闺女"], "daughter"),
    **dict.fromkeys(["孩子", "小孩"], "child"),
    **dict.fromkeys(["妈妈", "母亲", "老妈", "妈"], "mother"),
    **dict.fromkeys(["爸爸", "父亲", "老爸", "爸"], "father"),
    **dict.fromkeys(["哥哥", "哥"], "older brother"),
    **dict.fromkeys(["弟弟"], "younger brother"),
    **dict.fromkeys(["姐姐", "姐"], "older sister"),
    **dict.fromkeys(["妹妹"], "younger sister"),
    **dict.fromkeys(["爷爷", "外公", "姥爷"], "grandfather"),
    **dict.fromkeys(["奶奶", "外婆", "姥姥"], "grandmother"),
    **dict.fromkeys(["男朋友", "男友"], "boyfriend"),
    **dict.fromkeys(["女朋友", "女友"], "girlfriend"),
    **dict.fromkeys(["对象"], "partner"),
    **dict.fromkeys(["老板", "领导", "上司"], "boss"),
    **dict.fromkeys(["同事"], "colleague"),
    **dict.fromkeys(["室友"], "roommate"),
    **dict.fromkeys(["狗狗", "小狗", "狗"], "dog"),
    **dict.fromkeys(["猫咪", "小猫", "猫"], "cat"),
    **dict.fromkeys(["宠物"], "pet"),
}
_ZH_REL = "|".join(sorted(ZH_RELATIONS, key=len, reverse=True))
_RE_ZH_RELATION = re.compile(
    rf"{ZH_LEAD}我(?:的|家|家的)?(?P<rel>{_ZH_REL})(?:的名字|名字)?(?P<verb>叫做?|名叫|是)(?P<name>[^，。]+)$"
    rf"|{ZH_LEAD}我(?:家)?有(?:一个|一只|一条|一位|个|只|条|位|两个|两只)?(?P<rel2>{_ZH_REL})(?:叫做?|名叫)(?P<name2>[^，。]+)$"
)


def _relation_candidate(relation: str, name: str, content: str, confidence: float, reason: str) -> Candidate:
    fields = {"kind": "relation", "relation": relation, "name": name}
    return profile_candidate(content, f"relation:{relation}", name.lower(), True, fields, confidence, reason)


def _en_relation_key(rel: str, mod: str | None) -> str:
    rel = SPACES.sub(" ", rel.lower())
    key = EN_RELATIONS.get(rel) or rel
    mod = (mod or "").strip().lower()
    if key in ("brother", "sister") and mod:
        key = ("older " if mod in ("older", "elder", "big", "oldest", "eldest") else "younger ") + key
    return key


def en_relations(clause: str) -> list[Candidate]:
    m = _RE_EN_RELATION.search(clause)
    if m and en_asserted(clause, m):
        name = EN_FILLER_TAIL.sub("", m.group("name") or m.group("name2")).strip()
        key = _en_relation_key(m.group("rel") or m.group("rel2"), m.group("mod") or m.group("mod2"))
        if valid_name(name):
            return [_relation_candidate(key, name, f"{upper_first(key)}'s name is {name}", 0.9, "en.relation")]
    m = _RE_EN_RELATION_JOB.search(clause)
    if m and en_asserted(clause, m):
        key = _en_relation_key(m.group("rel"), m.group("mod"))
        job = SPACES.sub(" ", m.group("job"))
        article = "an" if job[0].lower() in "aeiou" else "a"
        fields = {"kind": "relation", "relation": key, "job": job.lower()}
        return [
            profile_candidate(
                f"{upper_first(key)} is {article} {job}",
                f"relation:{key}:job",
                job.lower(),
                True,
                fields,
                0.8,
                "en.relation_job",
            )
        ]
    m = _RE_EN_RELATION_BARE.search(clause)
    if m and en_asserted(clause, m) and clause[m.end() : m.end() + 2] not in ("'s", "’s"):
        name = m.group("name")
        key = _en_relation_key(m.group("rel"), m.group("mod"))
        if valid_name(name) and not name.endswith(("'s", "’s")):  # "my daughter Sara's birthday"
            return [_relation_candidate(key, name, f"{upper_first(key)}'s name is {name}", 0.75, "en.relation")]
    return []


def zh_relations(clause: str) -> list[Candidate]:
    m = _RE_ZH_RELATION.match(clause)
    if not m:
        return []
    word = m.group("rel") or m.group("rel2")
    key = ZH_RELATIONS[word]
    text = ZH_NAME_TAIL.sub("", ZH_TAIL.sub("", m.group("name") or m.group("name2")))
    if m.group("verb") == "是":
        if ZH_JOB_SUFFIX.search(text):
            fields = {"kind": "relation", "relation": key, "job": text}
            return [
                profile_candidate(f"{word}是{text}", f"relation:{key}:job", text, True, fields, 0.8, "zh.relation_job")
            ]
        if not (2 <= len(text) <= 3 and has_cjk(text)) or text.endswith(("人", "的")) or ZH_BAD_START.match(text):
            return []
        confidence = 0.7
    else:
        confidence = 0.9
    if not valid_name(text):
        return []
    return [_relation_candidate(key, text, f"{word}叫{text}", confidence, "zh.relation")]
