"""The preference rules: what the user likes, dislikes, prefers or has as a favourite, their habits and their traits."""

from __future__ import annotations

import re

from strategies_app.extractors.base import Candidate

from ..text import (
    EN_FILLER_TAIL,
    EN_OBJ_CUT,
    SPACES,
    ZH_BAD_START,
    ZH_CORE_TAIL,
    ZH_LEAD,
    ZH_TAIL,
    clean_en_object,
    clean_zh_object,
    en_topic,
    norm_key,
    swap_pronouns,
    upper_first,
    zh_topic,
)
from .common import ZH_ADV, ZH_JOB_SUFFIX, ZH_SUBJ, en_asserted, profile_candidate, zh_asserted

_I = re.IGNORECASE

_EN_ADV = (
    r"(?:(?:now|really|much|still|actually|generally|usually|definitely|mostly|always|personally|strongly|also|kind"
    r" of|sort of|do|just|absolutely|totally|honestly|genuinely|quite|truly|especially|particularly|secretly|so"
    r"|more|even\s+more|mainly"
    r"|super|pretty)\s+)*"
)


# English preference verbs and how the content says them.
_EN_LIKE_VERBS = {
    "like": "Likes",
    "love": "Loves",
    "enjoy": "Enjoys",
    "adore": "Adores",
    "into": "Is into",
    "fan of": "Is a fan of",
    "fond of": "Is fond of",
    "crazy about": "Is crazy about",
    "obsessed with": "Is obsessed with",
    "passionate about": "Is passionate about",
    "keen on": "Is keen on",
    "all about": "Is all about",
    "getting into": "Is into",
    "gotten into": "Is into",
    "got into": "Is into",
    "fan": "Is a fan of",
    "lover": "Loves",
    "enthusiast": "Is an enthusiast of",
    "buff": "Is a fan of",
    "big on": "Is big on",
}
_EN_DISLIKE_VERBS = (
    ("no longer into", "Is no longer into"),
    ("no longer a fan", "Is no longer a fan of"),
    ("no longer interested", "Is no longer interested in"),
    ("no longer", "No longer likes"),
    ("stopped", "No longer likes"),
    ("gone off", "Has gone off"),
    ("lost interest", "Has lost interest in"),
    ("not interested", "Is not interested in"),
    ("done with", "Is done with"),
    ("sick of", "Is sick of"),
    ("tired of", "Is tired of"),
    ("never liked", "Never liked"),
    ("don't", "Doesn't like"),
    ("do not", "Doesn't like"),
    ("dislike", "Dislikes"),
    ("hate", "Hates"),
    ("detest", "Detests"),
    ("loathe", "Loathes"),
    ("stand", "Can't stand"),
    ("bear", "Can't bear"),
    ("avoid", "Avoids"),
    ("fan of", "Is not a fan of"),
    ("into", "Is not into"),
    ("keen on", "Is not keen on"),
    ("fond of", "Is not fond of"),
    ("big on", "Is not big on"),
)
_RE_EN_LIKE = re.compile(
    rf"\bi\s+{_EN_ADV}(?P<verb>like|love|enjoy|adore)\s+(?P<obj>.+)"
    rf"|\bi(?:'ve|\s+have)?\s+(?:been\s+)?(?:really\s+)?(?P<verb3>getting\s+into|gotten\s+into|got\s+into)\s+(?P<obj3>.+)"
    r"|\bi(?:'m|\s+am)\s+(?:an?\s+)(?:(?:big|huge|total|massive|real|true|die-hard|longtime|long-time|avid)\s+)*"
    r"(?P<obj4>(?!(?:big|huge|total|massive|real|true|avid|great|fan)\b)[a-z][\w'-]*(?:\s+[a-z][\w'-]*)?)\s+"
    r"(?P<verb4>fan|lover|enthusiast|buff)\b(?!\s+of)"
    rf"|\bi(?:'m|\s+am)\s+{_EN_ADV}(?:a\s+(?:big\s+|huge\s+|great\s+)?)?(?P<verb2>into|fan\s+of|fond\s+of|all\s+about|crazy\s+about"
    r"|obsessed\s+with|passionate\s+about|keen\s+on|big\s+on)\s+(?P<obj2>.+)",
    _I,
)
_RE_EN_DISLIKE = re.compile(
    rf"\bi(?:'ve|\s+have)?\s+{_EN_ADV}(?P<verb>(?:don't|do\s+not)\s+(?:really\s+|much\s+|particularly\s+|even\s+)?(?:like|love|enjoy"
    r"|care\s+for)|dislike|hate|detest|loathe|(?:can't|cannot|can\s+not)\s+(?:stand|bear)|no\s+longer\s+(?:like|love"
    r"|enjoy)|never\s+liked|(?:try\s+to\s+)?avoid|stopped\s+(?:liking|loving|enjoying)|(?:gone\s+off"
    r"|lost\s+(?:all\s+)?interest\s+in))\s+(?P<obj>.+)"
    rf"|\bi(?:'m|\s+am)\s+{_EN_ADV}(?P<verb2>(?:not|no\s+longer)\s+(?:(?:really|that|so|too|very)\s+)?(?:a\s+(?:big\s+|huge\s+)?fan\s+of"
    r"|into|keen\s+on|fond\s+of|big\s+on|interested\s+in)|(?:kind\s+of\s+|a\s+bit\s+|so\s+|really\s+)?(?:done\s+with"
    r"|sick\s+of|tired\s+of))\s+(?P<obj2>.+)",
    _I,
)
_RE_EN_PREFER = re.compile(
    rf"\bi(?:\s+|'d\s+|'ve\s+){_EN_ADV}(?:would\s+|have\s+)?(?P<verb>prefer|rather|switched\s+to|changed\s+to"
    r"|lean\s+towards?)\s+(?P<obj>.+)"
    r"|\bmy\s+preference\s+is\s+(?:for\s+)?(?P<obj2>.+)",
    _I,
)
_EN_VERB_PHRASE = re.compile(r"\s*(?:to\s|\w+ing\b)", _I)
_EN_TO_ALTERNATIVE = re.compile(r"\s+to\s+(?P<alt>.+)$", _I)
_EN_ALTERNATIVE = re.compile(
    r"\s+(?:over|rather\s+than|instead\s+of|than|more\s+than|compared\s+to)\s+(?P<alt>.+)$", _I
)
_RE_EN_FAVOURITE = re.compile(
    r"\bmy\s+(?:all[- ]time\s+|absolute\s+|personal\s+)?(?:favou?rite|fave)\s+(?P<what>[a-z][\w -]{0,30}?)\s+"
    r"(?:is|are|has\s+to\s+be|would\s+be|=)\s+(?P<obj>.+)"
    r"|^(?P<obj2>[\w][\w '-]{0,40}?)\s+(?:is|are)\s+my\s+(?:all[- ]time\s+)?(?:favou?rite|fave)"
    r"(?:\s+(?P<what2>[a-z][\w -]{0,30}))?$",
    _I,
)
_RE_EN_HABIT = re.compile(
    r"\bi\s+(?P<adv>usually|always|often|normally|typically|generally|tend\s+to|never|rarely|regularly|mostly"
    r"|habitually)\s+(?P<act>.+)",
    _I,
)
_EN_ACT_ADVERBS = re.compile(r"^(?:(?:really|just|even|also|actually|ever|still|quite|so)\s+)+", _I)
_EN_HABIT_BAD_VERBS = frozenset(
    "said say told tell ask asked thought think know knew mean meant get got do did does was were am is are be been "
    "will would can could should must want wanted need needed wonder wondered have had understood understand "
    "imagine imagined expect expected thought believe believed realize realized realise realised "
    "like love prefer enjoy hate eat drink".split()
)
_RE_EN_TRAIT = re.compile(
    r"\bi(?:'m|\s+am)\s+(?:(?:a|an)\s+)?(?:(?:real|total|big|bit\s+of\s+a|true|very|quite|pretty|kind\s+of|sort\s+of"
    r"|such\s+an?)\s+)?(?P<trait>(?:morning|night|evening|people|cat|dog|detail[- ]oriented|outdoors|beach|mountain"
    r"|city|introverted|extroverted|creative|visual|organized|organised|spontaneous)\s+person|introvert|extrovert"
    r"|ambivert|night\s+owl|early\s+bird|early\s+riser|perfectionist|minimalist|foodie|homebody|workaholic"
    r"|neat\s+freak|procrastinator|light\s+sleeper|heavy\s+sleeper|picky\s+eater|visual\s+learner)\b",
    _I,
)

_ZH_LIKE = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}{ZH_ADV}(?P<verb>喜欢|热爱|钟爱|爱吃|爱喝|爱看|爱玩|爱听|迷上了|爱上了|爱(?![人好心情护国]))(?P<obj>.+)$"
)
# "我不再去健身房了", "我对游戏没兴趣了": something the user no longer does or cares for.
_ZH_NO_LONGER = re.compile(rf"{ZH_LEAD}{ZH_SUBJ}{ZH_ADV}(?P<verb>不再|再也不)(?P<obj>[^，。]+)$")
_ZH_NO_INTEREST = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}{ZH_ADV}对(?P<obj>[^，。]{{1,12}}?)(?:已经|早就|也|都)?(?:没兴趣|不感兴趣|没什么兴趣|没有兴趣|不太感兴趣)了?$"
)
_ZH_HOBBY = re.compile(rf"{ZH_LEAD}{ZH_SUBJ}的?(?:爱好|兴趣爱好|兴趣)(?:是|有|：|:)(?P<obj>.+)$")
_ZH_DISLIKE = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}{ZH_ADV}(?P<verb>不喜欢|不太喜欢|不怎么喜欢|不是很喜欢|不再喜欢|没那么喜欢|不那么喜欢|不爱|不太爱|不再爱|讨厌|受不了|忍受不了"
    r"|反感|厌恶|接受不了|不能接受|不想要|腻了|厌倦了?)(?P<obj>.+)$"
)
_ZH_PREFER = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}{ZH_ADV}(?P<verb>偏好|偏爱|更喜欢|更爱|更倾向于?|倾向于|宁愿|宁可|更想要|更想|更愿意|比较想|改成了?|改为|换成了?|改用)(?P<obj>.+)$"
)
_ZH_CHANGE = re.compile(
    rf"{ZH_LEAD}(?P<topic>[^，。把帮请你他她]{{1,8}}?)(?:以后|今后|从现在起|从今以后|往后)(?:都|就|全部|一律)?"
    r"(?:改成|改为|换成|调成|改用|用)(?P<obj>.+)$"
)
_ZH_FAVOURITE = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}(?:最喜欢|最爱)的(?P<what>[^，。是]{{1,8}}?)(?:是|就是)(?P<obj>.+)$"
    rf"|^(?P<obj2>[^，。]{{1,12}}?)是我最(?:喜欢|爱)的(?P<what2>[^，。]{{0,8}})$"
)
_ZH_HABIT = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}(?P<adv>一般|通常|平时|平常|总是|经常|老是|习惯于?|每天|每周|每晚|向来|一向|从不|从来不|很少)"
    r"(?P<act>[^，。]{1,24})$"
)
_ZH_TRAIT = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}(?:有点|有些|比较|挺|很)?(?:是)?(?:一个|个|一位)?(?P<trait>急性子|慢性子|夜猫子|完美主义者|吃货|宅男|宅女|社恐|[iIeE]人|路痴"
    r"|工作狂|起床困难户|拖延症患者?)$"
    rf"|{ZH_LEAD}我是(?:一个|个|一位)?(?P<trait2>[^，。]{{1,10}}?)的人$"
)


_EN_LEADING_QUALIFIER = re.compile(
    r"^(?:(?:actually|but|and|so|well|also|generally|usually|personally),?\s+)*(?P<q>(?:at|in|during|on|for|before"
    r"|after)\s+(?:the\s+)?(?:night|nighttime|mornings?|evenings?|afternoons?|day|daytime|weekends?|weekdays?|home|work"
    r"|office|bed|bedtime|breakfast|lunch|dinner|summer|winter|long\s+flights?|trips?))[,\s]+$",
    _I,
)


# "a job I enjoy every day", "that's what I like to hear": "I" opens a relative clause, not a statement.
_EN_RELATIVE_BEFORE = re.compile(
    r"(?:\b(?:a|an|the|this|that|these|those|my|our|your|his|her|their|some|any|every|each|one)\s+[\w-]+(?:\s+[\w-]+)?"
    r"|\b(?:what|which|whatever|who|whom))\s+$",
    _I,
)


def _relative(clause: str, m: re.Match) -> bool:
    return bool(_EN_RELATIVE_BEFORE.search(clause, 0, m.start()))


def en_preference(clause: str) -> Candidate | None:
    m = _RE_EN_FAVOURITE.search(clause)
    if m and en_asserted(clause, m):
        what = (m.group("what") or m.group("what2") or "").strip()
        cleaned = clean_en_object(m.group("obj") or m.group("obj2"))
        if cleaned:
            shown, core, _ = cleaned
            if what and what.lower().split()[0] in ("one", "thing", "part", "bit"):
                return None  # "my favourite one to jam to is …": one of what?
            if what:
                topic = en_topic(norm_key(what))
                return profile_candidate(
                    f"Favourite {what.lower()} is {shown}",
                    f"prefer:{topic}",
                    core,
                    True,
                    {"kind": "preference", "polarity": "prefer", "object": core, "topic": topic},
                    0.9,
                    "en.favourite",
                )
            return _like_candidate(f"Favourite: {shown}", core, "like", 0.85, "en.favourite")
    m = _RE_EN_DISLIKE.search(clause)
    if m and en_asserted(clause, m) and not _relative(clause, m):
        verb = (m.group("verb") or m.group("verb2")).lower()
        cleaned = clean_en_object(m.group("obj") or m.group("obj2"))
        if cleaned:
            phrase = next((text for key, text in _EN_DISLIKE_VERBS if key in verb), "Doesn't like")
            confidence = 0.9 if "hate" in verb or "stand" in verb or "no longer" in verb else 0.85
            return _like_candidate(f"{phrase} {cleaned[0]}", cleaned[1], "dislike", confidence, "en.dislike")
        return None
    m = _RE_EN_PREFER.search(clause)
    if m and en_asserted(clause, m):
        raw = m.group("obj") or m.group("obj2")
        alternative = ""
        alt = _EN_ALTERNATIVE.search(raw)
        if not alt and (m.group("verb") or "").lower() == "prefer" and not _EN_VERB_PHRASE.match(raw):
            alt = _EN_TO_ALTERNATIVE.search(raw)  # "tea to coffee", but not "to travel" or "going to the beach"
        if alt:
            alternative = EN_OBJ_CUT.sub("", alt.group("alt")).strip(" ,.!")
            raw = raw[: alt.start()]
        cleaned = clean_en_object(raw)
        if cleaned and not cleaned[1].startswith("not "):
            shown, core, qualifier = cleaned
            lead = _EN_LEADING_QUALIFIER.match(clause, 0, m.start())
            if lead and not qualifier:  # "At night I prefer soft lighting" says the same as "... at night"
                qualifier = lead.group("q").lower()
                shown = f"{shown} {qualifier}"
            topic = en_topic(core)
            fields = {"kind": "preference", "polarity": "prefer", "object": core, "topic": topic}
            if qualifier:
                fields["qualifier"] = qualifier
            if alternative:
                fields["over"] = alternative
            verb = SPACES.sub(" ", (m.group("verb") or "prefer").lower())
            if verb == "rather":
                content = f"Would rather {shown}" + (f" than {swap_pronouns(alternative)}" if alternative else "")
            elif verb.endswith(" to"):
                content = f"Has {verb} {shown}"
            else:
                content = f"Prefers {shown}" + (f" over {swap_pronouns(alternative)}" if alternative else "")
            return profile_candidate(content, f"prefer:{topic}", core, True, fields, 0.9, "en.prefer")
        return None
    m = _RE_EN_LIKE.search(clause)
    if m and en_asserted(clause, m) and not _relative(clause, m):
        verb = SPACES.sub(" ", (m.group("verb") or m.group("verb2") or m.group("verb3") or m.group("verb4")).lower())
        cleaned = clean_en_object(m.group("obj") or m.group("obj2") or m.group("obj3") or m.group("obj4"))
        if cleaned:
            confidence = 0.85 if verb in ("love", "adore") else 0.8
            return _like_candidate(f"{_EN_LIKE_VERBS[verb]} {cleaned[0]}", cleaned[1], "like", confidence, "en.like")
        return None
    m = _RE_EN_HABIT.search(clause)
    if m and en_asserted(clause, m) and not _relative(clause, m):
        adverb = SPACES.sub(" ", m.group("adv").lower())
        act = EN_FILLER_TAIL.sub("", EN_OBJ_CUT.sub("", m.group("act"))).strip(" ,.!")
        act = _EN_ACT_ADVERBS.sub("", act)  # "never really asked": the verb is "asked"
        words = act.split()
        if not words or len(words) > 12 or words[0].lower().strip(",.;:!") in _EN_HABIT_BAD_VERBS:
            return None
        if adverb == "tend to":
            content = f"Tends to {swap_pronouns(act)}"
        else:
            content = f"{upper_first(adverb)} {_third_person(act)}"
        key = norm_key(act)
        fields = {"kind": "habit", "frequency": adverb, "activity": key}
        return profile_candidate(content, f"habit:{key}", adverb, False, fields, 0.75, "en.habit")
    m = _RE_EN_TRAIT.search(clause)
    if m and en_asserted(clause, m):
        trait = SPACES.sub(" ", m.group("trait").lower())
        article = "an" if trait[0] in "aeiou" else "a"
        return profile_candidate(
            f"Is {article} {trait}", f"trait:{trait}", trait, False, {"kind": "trait", "trait": trait}, 0.8, "en.trait"
        )
    return None


def _like_candidate(content: str, core: str, polarity: str, confidence: float, reason: str) -> Candidate:
    fields = {"kind": "preference", "polarity": polarity, "object": core}
    return profile_candidate(content, f"like:{core}", polarity, True, fields, confidence, reason)


_EN_THIRD_PERSON = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is"}
_EN_MODALS = frozenset("can could will would should must may might".split())


def _third_person(phrase: str) -> str:
    """The third person of a verb phrase, pronouns swapped: "take my train" → "takes their train"."""
    first, _, rest = phrase.partition(" ")
    word = first.lower()
    if word in _EN_THIRD_PERSON:
        verb = _EN_THIRD_PERSON[word]
    elif word in _EN_MODALS or word.endswith(("ed", "s")) or not word.isalpha():
        verb = first
    elif word.endswith(("sh", "ch", "x", "z", "o")):
        verb = first + "es"
    elif word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        verb = first[:-1] + "ies"
    else:
        verb = first + "s"
    return f"{verb} {swap_pronouns(rest)}".strip()


def zh_preference(clause: str) -> Candidate | None:
    m = _ZH_FAVOURITE.match(clause)
    if m and zh_asserted(m):
        what = (m.group("what") or m.group("what2") or "").strip()
        cleaned = clean_zh_object(m.group("obj") or m.group("obj2"))
        if cleaned:
            shown, core = cleaned
            if what:
                topic = zh_topic(norm_key(what))
                fields = {"kind": "preference", "polarity": "prefer", "object": core, "topic": topic}
                return profile_candidate(
                    f"最喜欢的{what}是{shown}", f"prefer:{topic}", core, True, fields, 0.9, "zh.favourite"
                )
            return _like_candidate(f"最喜欢{shown}", core, "like", 0.85, "zh.favourite")
    m = _ZH_DISLIKE.match(clause)
    if m and zh_asserted(m):
        cleaned = clean_zh_object(m.group("obj"))
        if cleaned:
            verb = m.group("verb")
            confidence = 0.9 if verb in ("讨厌", "受不了", "不再喜欢", "反感", "厌恶") else 0.85
            return _like_candidate(f"{verb}{cleaned[0]}", cleaned[1], "dislike", confidence, "zh.dislike")
        return None
    m = _ZH_NO_LONGER.match(clause) or _ZH_NO_INTEREST.match(clause)
    if m and zh_asserted(m):
        cleaned = clean_zh_object(m.group("obj"))
        if cleaned:
            shown = f"不再{cleaned[0]}" if m.re is _ZH_NO_LONGER else f"对{cleaned[0]}不感兴趣"
            return _like_candidate(shown, cleaned[1], "dislike", 0.85, "zh.no_longer")
        return None
    m = _ZH_PREFER.match(clause)
    if m and zh_asserted(m):
        return _zh_prefer_candidate(m.group("obj"), "", "zh.prefer")
    m = _ZH_CHANGE.match(clause)
    if m:
        topic = ZH_CORE_TAIL.sub("", m.group("topic").lstrip("我").rstrip("也都就"))
        return _zh_prefer_candidate(m.group("obj"), topic, "zh.change")
    m = _ZH_HOBBY.match(clause)
    if m and zh_asserted(m):
        cleaned = clean_zh_object(m.group("obj"))
        if cleaned:
            return _like_candidate(f"爱好{cleaned[0]}", cleaned[1], "like", 0.85, "zh.hobby")
    m = _ZH_LIKE.match(clause)
    if m and zh_asserted(m):
        cleaned = clean_zh_object(m.group("obj"))
        if cleaned:
            verb = m.group("verb")
            shown = f"{verb}{cleaned[0]}" if verb != "爱" else f"喜欢{cleaned[0]}"
            return _like_candidate(shown, cleaned[1], "like", 0.8, "zh.like")
        return None
    m = _ZH_HABIT.match(clause)
    if m and zh_asserted(m):
        act = ZH_TAIL.sub("", m.group("act"))
        if len(act) < 2 or ZH_BAD_START.match(act):
            return None
        adverb = m.group("adv")
        key = norm_key(act)
        fields = {"kind": "habit", "frequency": adverb, "activity": key}
        return profile_candidate(f"{adverb}{act}", f"habit:{key}", adverb, False, fields, 0.75, "zh.habit")
    m = _ZH_TRAIT.match(clause)
    if m and zh_asserted(m):
        trait = m.group("trait") or m.group("trait2")
        if trait and not ZH_BAD_START.match(trait) and not ZH_JOB_SUFFIX.search(trait):
            content = f"是{trait}" if m.group("trait") else f"是一个{trait}的人"
            return profile_candidate(
                content, f"trait:{norm_key(trait)}", trait, False, {"kind": "trait", "trait": trait}, 0.75, "zh.trait"
            )
    return None


def _zh_prefer_candidate(raw: str, topic_hint: str, reason: str) -> Candidate | None:
    cleaned = clean_zh_object(raw)
    if not cleaned:
        return None
    shown, core = cleaned
    topic = zh_topic(norm_key(topic_hint)) if topic_hint else zh_topic(core)
    fields = {"kind": "preference", "polarity": "prefer", "object": core, "topic": topic}
    content = f"{topic_hint}偏好{shown}" if topic_hint else f"偏好{shown}"
    return profile_candidate(content, f"prefer:{topic}", core, True, fields, 0.9, reason)
