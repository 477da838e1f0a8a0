"""The fact rules: what a user asks to be remembered, and the events, lessons and procedures they report."""

from __future__ import annotations

import re

from platform_kit.redaction import mentions_secret
from strategies_app.extractors.base import Candidate, SourceMessage

from .speaker import attribute, stands_alone
from .text import (
    EN_FILLER_TAIL,
    EN_OBJ_CUT,
    HYPOTHETICAL_EN,
    SPACES,
    ZH_BAD_START,
    ZH_LEAD,
    ZH_TAIL,
    Keywords,
    clauses,
    combine,
    has_cjk,
    norm_key,
    normalise_text,
    sentences,
    swap_pronouns,
    upper_first,
)

_I = re.IGNORECASE

_RE_EN_REMEMBER = re.compile(
    r"^(?P<pre>.{0,40}?)\b(?P<kw>remember|note|keep\s+in\s+mind|don't\s+forget|do\s+not\s+forget|make\s+a\s+note"
    r"|take\s+a\s+note|note\s+down|write\s+down|for\s+the\s+record|fyi|note\s+to\s+self)\b\s*(?P<link>that\b|this\b|:"
    r"|,|-|of\s+this\s*:)?\s*(?P<x>.+)$",
    _I,
)
_EN_REMEMBER_PRE = re.compile(
    r"^(?:[\s,]*(?:hey|hi|ok|okay|so|also|and|oh|btw|by\s+the\s+way|one\s+more\s+thing|please|pls|can\s+you"
    r"|could\s+you|would\s+you|will\s+you|you\s+should|just|important|for\s+later)\b)*[\s,:!-]*$",
    _I,
)
_EN_REMEMBER_BAD = re.compile(
    r"^(?:when|how|what|why|where|who|which|whether|if|me|us|him|her|them|the\s+time|that\s+time|it\b|this\b|that\b\s*[?.!]*$)",
    _I,
)
_EN_ASKING = re.compile(r"\b(?:can|could|would|will)\s+you\b", _I)
_EN_FACT_TAIL = re.compile(
    r"(?:[\s,]+(?:please|pls|thanks|thank\s+you|thx|ok|okay|for\s+me|for\s+later|for\s+next\s+time|going\s+forward"
    r"|from\s+now\s+on)|[\s,.!~])+$",
    _I,
)
_RE_ZH_REMEMBER = re.compile(
    r"^(?P<pre>[^，。]{0,8}?)(?P<kw>帮我记一下|帮我记住|帮我记下|记一下|记住|记下来|记下|记着|别忘了|不要忘了|不要忘记|别忘记|备忘一下|备忘"
    r"|请记录|记录一下)[:：，,\s]*(?P<x>.+)$"
)
_ZH_REMEMBER_PRE = re.compile(
    "^(?:请|麻烦|麻烦你|你|你要|一定要|务必|还有|另外|对了|顺便|好的|嗯|那|帮我|请你|你帮我|也|要|一定)*$"
)
_ZH_FACT_TAIL = re.compile("(?:好吗|可以吗|行吗|好不好|谢谢|哦|啊|呀|哈|吧|啦|。|！|!|~)+$")
_RE_EN_LESSON = re.compile(
    r"\b(?P<kw>lessons?\s+learned|the\s+lesson(?:\s+here)?\s+is|lesson\s*:|key\s+takeaway|takeaway\s*:"
    r"|the\s+takeaway\s+is|note\s+to\s+self|til|today\s+i\s+learned|i(?:'ve|\s+have)?\s+learn(?:ed|t)\s+(?:that"
    r"|the\s+hard\s+way\s+that)|it\s+turned\s+out(?:\s+that)?|turns\s+out(?:\s+that)?|in\s+hindsight|in\s+retrospect"
    r"|next\s+time,?\s+(?:i|we)\s+(?:should|will|must|need\s+to|have\s+to|ought\s+to)|next\s+time,?\s+(?:i'll|we'll)"
    r"|i\s+should\s+have)\s*[:,-]?\s*(?P<x>.+)",
    _I,
)
_EN_LESSON_LABEL = (
    ("lesson", "Lesson learned: ", "lesson"),
    ("takeaway", "Lesson learned: ", "lesson"),
    ("note to self", "Note to self: ", "note"),
    ("learn", "Learned that ", "knowledge"),
    ("til", "Learned that ", "knowledge"),
    ("turn", "It turned out that ", "lesson"),
    ("hindsight", "In hindsight, ", "lesson"),
    ("retrospect", "In hindsight, ", "lesson"),
    ("next time", "Next time: ", "lesson"),
    ("should have", "Should have ", "lesson"),
)
_RE_ZH_LESSON = re.compile(
    r"(?P<kw>经验教训|经验|教训|心得|总结一下|结论)(?:是|就是|：|:)[：:，,\s]*(?P<x>.{2,})"
    r"|(?P<kw2>下次)(?P<ctx>[^，。]{0,8}?)(?P<mod>一定要|要|得|记得|应该|别|不要|注意|必须)(?P<x2>.{2,})"
    r"|(?P<kw3>事实证明|结果发现|后来发现|后来才知道|才知道|学到了|原来)[，,\s]*(?P<x3>.{4,})"
)
_TIME_EN = (
    r"\b(?:yesterday|last\s+(?:night|week|weekend|month|year|summer|winter|spring|fall|autumn|time|monday|tuesday"
    r"|wednesday|thursday|friday|saturday|sunday)|this\s+(?:morning|week|weekend|month|year|past\s+week|summer)"
    r"|(?:a|one|two|three|four|five|six|few|several|\d+)\s+(?:days?|weeks?|months?|years?)\s+ago|earlier\s+today"
    r"|(?:back\s+)?in\s+(?:19|20)\d\d|in\s+(?:january|february|march|april|may|june|july|august|september|october"
    r"|november|december)|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|over\s+the\s+(?:weekend"
    r"|holidays|summer)|recently|the\s+other\s+day)\b"
)
_RE_EN_TIME = re.compile(_TIME_EN, _I)
_RE_EN_EVENT = re.compile(
    r"\bi\s+(?:just\s+|recently\s+|finally\s+|also\s+|once\s+)?(?P<verb>went\s+to|went\s+on|visited|travel(?:l)?ed\s+to"
    r"|flew\s+to|drove\s+to|took\s+a\s+trip\s+to|attended|got\s+back\s+from|came\s+back\s+from|returned\s+from"
    r"|spent\s+(?:a|the|two|three|four|five|\d+|a\s+few|several)\s+(?:days?|weeks?|months?|nights?|weekend|years?)\s+in"
    r"|stayed\s+in|hiked|climbed|ran\s+(?:a|my\s+first)\s+(?:marathon|half\s+marathon|race|10k|5k)|graduated\s+from"
    r"|got\s+married|started\s+a\s+new\s+job|moved\s+to)\b\s*(?P<x>.*)",
    _I,
)
_TIME_ZH = (
    r"(?:上周末?|上个?星期|上个月|上次|去年|前年|昨天|前天|今天早上|今天|今年|最近|前几天|前段时间|\d{4}年|\d{1,2}月份?|春节|国庆|暑假"
    r"|寒假|五一|元旦|周末)"
)
_RE_ZH_EVENT = re.compile(
    rf"{ZH_LEAD}(?P<t1>{_TIME_ZH})?[，,]?我(?P<t2>{_TIME_ZH})?(?:也|刚|刚刚|终于|已经|曾经)?"
    r"(?P<verb>去了|去过|到过|游览了|参观了|参加了|逛了|玩了|回了一趟|回了|爬了)(?P<x>[^，。]{1,20})$"
)
_RE_EN_PROCEDURE = re.compile(
    r"^(?:the\s+)?(?:(?:best|right|only|easiest|quickest|correct)\s+)?(?:way|trick|steps?|procedure|process|recipe"
    r"|method)\s+(?:to|for)\s+(?P<x>.{3,80}?)\s+(?:is|are)\s*(?:to\s+|:\s*)?(?P<y>.{3,})$"
    r"|^how\s+to\s+(?P<x2>[^:]{3,80})\s*:\s*(?P<y2>.{3,})$"
    r"|^to\s+(?P<x3>[^,]{3,80}),\s*(?P<y3>(?:first|just|simply|you\s+(?:need|have|must|should)|start\s+by"
    r"|begin\s+by)\b.{3,})$",
    _I,
)
_RE_ZH_PROCEDURE = re.compile(
    r"^(?P<x>[^，。]{2,20}?)的(?:步骤|方法|流程|办法|做法|诀窍|窍门|技巧)(?:是|：|:)[：:\s]*(?P<y>.{2,})$"
    r"|^(?:要|想要|如果要|想)?(?P<x2>[^，。]{2,20})[，,]\s*(?:就)?(?:要)?(?P<y2>(?:先|首先).*(?:然后|再|接着|之后).*)$"
)


_EN_VAGUE_PLACE = re.compile(
    r"^(?:(?:an?|the|some)\s+(?:event|thing|place|trip)|somewhere|there|here|it|this|that|a|an|the"
    r"|a\s+few\s+\w+\s+ago)?$",
    _I,
)


def _fact_candidate(type_: str, content: str, kind: str, confidence: float, reason: str, **extra) -> Candidate | None:
    content = content.strip()
    key = norm_key(content)
    if len(key) < 3:
        return None
    return Candidate(
        type=type_,
        content=content,
        slot=f"fact:{key}",
        value=key,
        exclusive=False,
        fields={"kind": kind, **extra},
        confidence=confidence,
        reason=f"rule {reason}",
    )


def _sentence_candidates(sentence: str, question: bool, type_: str) -> list[Candidate]:
    out = []
    zh = has_cjk(sentence)
    if zh:
        m = _RE_ZH_REMEMBER.match(sentence)
        if m and _ZH_REMEMBER_PRE.match(m.group("pre")):
            text = _ZH_FACT_TAIL.sub("", m.group("x")).strip("，, ")
            if len(text) >= 2 and not text.startswith(("了", "吗")):
                found = _fact_candidate(type_, text, "remember", 0.95, "zh.remember")
                return [found] if found else []
    else:
        m = _RE_EN_REMEMBER.match(sentence)
        if m and _EN_REMEMBER_PRE.match(m.group("pre")) and (not question or _EN_ASKING.search(m.group("pre"))):
            kw = SPACES.sub(" ", m.group("kw").lower())
            text = _EN_FACT_TAIL.sub("", m.group("x")).strip()
            needs_link = kw in ("note", "write down", "note down")
            if text and not _EN_REMEMBER_BAD.match(text) and (m.group("link") or not needs_link):
                if kw == "note to self":
                    text = f"Note to self: {text}"
                elif text.lower().startswith("to "):
                    text = f"Remember {text}"
                found = _fact_candidate(type_, upper_first(text), "remember", 0.95, "en.remember")
                return [found] if found else []
    if question:
        return out
    if zh:
        m = _RE_ZH_LESSON.search(sentence)
        if m:
            if m.group("kw"):
                label = "教训：" if "教训" in m.group("kw") else "经验："
                text = label + _ZH_FACT_TAIL.sub("", m.group("x"))
            elif m.group("kw2"):
                text = "下次" + (m.group("ctx") or "") + m.group("mod") + _ZH_FACT_TAIL.sub("", m.group("x2"))
            else:
                text = m.group("kw3") + _ZH_FACT_TAIL.sub("", m.group("x3"))
            found = _fact_candidate(type_, text, "lesson", 0.85, "zh.lesson")
            if found:
                out.append(found)
        m = _RE_ZH_PROCEDURE.match(sentence)
        if m:
            if m.group("x"):
                text = f"{m.group('x')}的步骤：{_ZH_FACT_TAIL.sub('', m.group('y'))}"
                goal, steps = m.group("x"), m.group("y")
            else:
                text = f"{m.group('x2')}：{_ZH_FACT_TAIL.sub('', m.group('y2'))}"
                goal, steps = m.group("x2"), m.group("y2")
            found = _fact_candidate(
                type_, text, "procedure", 0.8, "zh.procedure", goal=goal, steps=_ZH_FACT_TAIL.sub("", steps)
            )
            if found:
                out.append(found)
        for clause in clauses(sentence):
            m = _RE_ZH_EVENT.match(clause)
            if m and (
                m.group("t1") or m.group("t2") or m.group("verb") in ("去过", "到过", "游览了", "参观了", "参加了")
            ):
                place = ZH_TAIL.sub("", m.group("x"))
                if place and not ZH_BAD_START.match(place):
                    when = m.group("t1") or m.group("t2") or ""
                    found = _fact_candidate(
                        type_, f"{when}{m.group('verb')}{place}", "event", 0.8, "zh.event", when=when
                    )
                    if found:
                        out.append(found)
        return out
    m = _RE_EN_LESSON.search(sentence)
    if m and not HYPOTHETICAL_EN.search(sentence, 0, m.start()):
        kw = SPACES.sub(" ", m.group("kw").lower())
        text = _EN_FACT_TAIL.sub("", m.group("x")).strip()
        if text and text.split()[0].lower() not in ("it", "that", "this") or len(text.split()) > 3:
            label, kind = next(((label, kind) for key, label, kind in _EN_LESSON_LABEL if key in kw))
            found = _fact_candidate(type_, label + swap_pronouns(text), kind, 0.85, "en.lesson")
            if found:
                out.append(found)
    m = _RE_EN_PROCEDURE.match(sentence)
    if m:
        goal = m.group("x") or m.group("x2") or m.group("x3")
        steps = _EN_FACT_TAIL.sub("", m.group("y") or m.group("y2") or m.group("y3"))
        found = _fact_candidate(type_, f"To {goal}: {steps}", "procedure", 0.8, "en.procedure", goal=goal, steps=steps)
        if found:
            out.append(found)
    for clause in clauses(sentence):
        m = _RE_EN_EVENT.search(clause)
        if not m or HYPOTHETICAL_EN.search(clause, 0, m.start()):
            continue
        when = _RE_EN_TIME.search(clause)
        rest = EN_FILLER_TAIL.sub("", EN_OBJ_CUT.sub("", m.group("x"))).strip(" ,.!")
        if _EN_VAGUE_PLACE.match(_RE_EN_TIME.sub("", rest).strip(" ,.")):
            continue  # "I went to a few weeks ago", "I went to an event": where?
        capitalised = any(word[:1].isupper() for word in rest.split()[:3])
        if not (when or capitalised) or (not rest and "married" not in m.group("verb").lower()):
            continue
        verb = SPACES.sub(" ", m.group("verb"))
        text = upper_first(f"{verb} {swap_pronouns(rest)}".strip())
        found = _fact_candidate(
            type_, text, "event", 0.8 if when else 0.7, "en.event", when=when.group(0) if when else ""
        )
        if found:
            out.append(found)
    return out


# In a chat between people, "remember to …", "don't forget to …", "记得…" address the other person.
_TO_SOMEONE = re.compile(r"^(?:remember\s+to|to\s|you\b|your\b|yourself\b|记得|你|要|别|不要)", _I)


# -- Keyword filter: which messages the fact rules read -----------------------------------------------------
_EN_FACT_KEYWORDS = [
    *"remember|note|keep in mind|forget|write down|for the record|fyi|lesson|takeaway|today i learned|learned|learnt"
    "|turned out|turns out|hindsight|retrospect|next time|should have|went to|went on|visited|travel|flew to"
    "|drove to|trip to|attended|got back|came back|returned from|spent|stayed in|hiked|climbed|ran a|ran my"
    "|graduated|married|new job|moved to|how to|, first|, just|, simply|, you need|, you have|, you must"
    "|, you should|, start by|, begin by".split("|"),
    *combine("way |trick |step |steps |procedure |process |recipe |method ", "to|for"),
]
_ZH_FACT_KEYWORDS = (
    "记一下|记住|记下|记着|别忘|不要忘|备忘|记录|经验|教训|心得|总结|结论|下次|事实证明|发现|才知道|学到了|原来|去了|去过|到过|游览|参观|参加|逛了|玩了|回了"
    "|爬了|步骤|方法|流程|办法|做法|诀窍|窍门|技巧|先".split("|")
)
_FACT_KEYS = Keywords(_EN_FACT_KEYWORDS, _ZH_FACT_KEYWORDS)


def fact_candidates(messages: list[SourceMessage], type_: str) -> tuple[list[Candidate], int]:
    """The candidates of the user messages, typed ``type_``, and how many messages passed the keyword filter."""
    out, scanned = [], 0
    for message in messages:
        if message.role != "user" and not (message.speaker and message.role == "assistant"):
            continue
        text = normalise_text(message.content)
        if not _FACT_KEYS(" " + text.lower()):
            continue
        scanned += 1
        for sentence, question in sentences(text):
            if mentions_secret(sentence):
                continue  # "remember my password is …": never a memory, whatever else the sentence says
            for candidate in _sentence_candidates(sentence, question, type_):
                if (
                    message.speaker
                    and candidate.fields.get("kind") == "remember"
                    and _TO_SOMEONE.match(candidate.content)
                ):
                    continue  # "Remember to take some nice pictures": said to the other person, not to be kept
                if not stands_alone(candidate, message.speaker):
                    continue
                candidate.source_message_ids = [message.id]
                out.append(attribute(candidate, message.speaker))
    return out, scanned
