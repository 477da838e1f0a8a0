"""Whose statement a record is: the speaker of a chat between people, and records worded around them.

In a chat between two (or more) people — LoCoMo, a group chat, a transcript — a message names its speaker in
``metadata.speaker`` or opens with "Name: ". Both sides are people then, so the profile and fact rules read every
message whatever its role, and each record says whose it is ("Caroline is an assistant manager", not "Is an
assistant manager"); its slot is the speaker's own, so two people's preferences never replace each other. A
conversation between people has no agent task: the task rules skip such messages.
"""

from __future__ import annotations

import dataclasses
import re

from strategies_app.extractors.base import Candidate, SourceMessage

from .text import CJK, is_zh

# "Caroline: ...", "Dr. Li: ...", "小王：..." — but not "Note: ...", "Error: ...", "TODO: ...".
_EN_PREFIX = re.compile(r"^(?P<name>[A-Z][\w'’-]{0,24}(?:\s[A-Z][\w'’-]{0,24}){0,2})\s?:\s+(?=\S)")
_ZH_PREFIX = re.compile(rf"^(?P<name>[{CJK}]{{2,4}})[:：]\s*(?=\S)")
_NOT_NAMES = frozenset(
    "note notes nb ps fyi todo to-do task tasks goal goals next done error errors warning warnings problem issue "
    "issues bug fix update updates status stage step steps summary result results answer question q a re subject "
    "lesson lessons takeaway reminder remember important tip tips hint example output input user assistant system "
    "tool bot ai human me you edit edited update: quote source ref reference title name date time location "
    "context background info information reason cause solution plan idea ideas response reply instruction "
    "instructions prompt code command log logs test tests yes no ok okay well so and but also then".split()
)
_ZH_NOT_NAMES = frozenset(
    "注意 问题 目标 任务 备注 提醒 下一步 结论 经验 教训 错误 报错 待办 进度 阶段 状态 答案 总结 原因 结果 步骤 方法 "
    "记住 重要 说明 "
    "补充 更新 背景 需求 要求 建议 例如 比如 回复 回答 原文 标题 时间 地点 用户 助手 系统 我说 他说 她说 你说".split()
)


def split_speaker(message: SourceMessage) -> tuple[str, str]:
    """(speaker, text without a "Name: " prefix) of a message; speaker is "" when none is named."""
    content = message.content
    speaker = message.speaker.strip()
    if speaker:
        for sep in (":", "：", " :"):
            if content.startswith(speaker + sep):
                return speaker, content[len(speaker) + len(sep) :].lstrip()
        return speaker, content
    m = _EN_PREFIX.match(content)
    if m and m.group("name").split()[0].lower() not in _NOT_NAMES and len(content) > m.end() + 1:
        return m.group("name"), content[m.end() :]
    m = _ZH_PREFIX.match(content)
    if m and m.group("name") not in _ZH_NOT_NAMES:
        return m.group("name"), content[m.end() :]
    return "", content


def with_speakers(messages: list[SourceMessage]) -> list[SourceMessage]:
    """The messages with their speaker set and the "Name: " prefix taken off their text."""
    out = []
    for message in messages:
        speaker, text = split_speaker(message)
        if speaker != message.speaker or text != message.content:
            message = dataclasses.replace(message, speaker=speaker, content=text)
        out.append(message)
    return out


# How an English record opens decides how the speaker's name joins it.
_EN_VERB_START = re.compile(
    r"^(?:is|are|was|has|had|can't|cannot|doesn't|does|did|didn't|won't|never|no\s+longer|usually|always|often"
    r"|normally|typically|generally|rarely|regularly|mostly|habitually|tends|used|went|visited|travel+ed|flew|drove"
    r"|took|attended|got|came|returned|spent|stayed|hiked|climbed|ran|graduated|started|moved|learned|learnt"
    r"|should|works|lives|likes|loves|enjoys|adores|prefers|dislikes|hates|detests|loathes|avoids|wants|plans"
    r"|needs|keeps|makes|takes|goes|does|eats|drinks|plays|reads|watches|writes|owns|[a-z]+(?:s|ed))\b",
    re.IGNORECASE,
)
_EN_LABELS = (
    ("Allergic to ", "{name} is allergic to "),
    ("Budget: ", "{name}'s budget: "),
    ("Favourite: ", "{name}'s favourite: "),
    ("Favourite ", "{name}'s favourite "),
    ("Name is ", "{name}'s name is "),
    ("Lesson learned: ", "{name}'s lesson learned: "),
    ("Note to self: ", "{name}'s note to self: "),
    ("Next time: ", "{name}'s note for next time: "),
    ("It turned out that ", "{name} found out that "),
    ("In hindsight, ", "In hindsight, {name} thinks "),
    ("To ", "{name}'s way to "),
)
_ZH_POSSESSIVE = re.compile(
    "^(?:预算|名字|最喜欢|爱好|老婆|妻子|太太|老公|丈夫|儿子|女儿|孩子|妈妈|爸爸|哥哥|弟弟|姐姐|妹妹|男朋友|女朋友|同事|老板|猫|狗)"
)


def attributed(content: str, name: str) -> str:
    """The record's text saying whose it is: "Is an assistant manager" → "Caroline is an assistant manager"."""
    if not name or content.startswith(name):
        return content
    if is_zh(content):
        if content.startswith(("教训", "经验", "下次")):
            return f"{name}的{content}"
        return f"{name}的{content}" if _ZH_POSSESSIVE.match(content) else f"{name}{content}"
    for label, template in _EN_LABELS:
        if content.startswith(label):
            return template.format(name=name) + content[len(label) :]
    first = content.split(" ", 1)[0]
    if first.endswith("'s"):  # "Wife's name is Anna"
        return f"{name}'s {content[:1].lower()}{content[1:]}"
    if _EN_VERB_START.match(content):
        return f"{name} {content[:1].lower()}{content[1:]}"
    return f"{name}: {content}"


# A record that holds one of these points at something its reader never sees ("worries about them", "hiked this
# last year", "holds it for 30 seconds", "learned that the hard way"); in a chat between people, "you" is the
# other person, unnamed.
_DANGLING = re.compile(
    r"\b(?:it|its|it's|this|these|those|here|he|she|him|her|hers|them)\b"
    r"|\bthat(?=\s*$|\s+(?:the\s+hard\s+way|way|time|one|ones|place|thing|things|day|moment|world|stuff|kind|game"
    r"|book|movie|show|song|guy|girl|idea)\b)",
    re.IGNORECASE,
)
# The words a fact rule puts before what it captured: "It turned out that …" holds no dangling "it".
_LABEL = re.compile(
    r"^(?:it\s+turned\s+out\s+that|in\s+hindsight,|lesson\s+learned:|note\s+to\s+self:)\s*", re.IGNORECASE
)
_YOU = re.compile(r"\b(?:you|your|yours|yourself|ya)\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|myself)\b|我", re.IGNORECASE)


def stands_alone(candidate: Candidate, speaker: str) -> bool:
    """Whether the record means something to a reader who never sees the conversation."""
    kind = candidate.fields.get("kind")
    if candidate.type == "task" or kind == "procedure":
        return True  # a procedure's "unplug it" points at its own goal
    if not speaker and candidate.type != "profile":
        return True  # what the user asked to be remembered, or a lesson, is theirs to word
    content = _LABEL.sub("", candidate.content)
    if _DANGLING.search(content):
        return False
    if speaker:
        if candidate.content.startswith("It turned out that "):
            return False  # chit-chat's "turns out I'm really good" is no lesson worth keeping
        if _YOU.search(content):
            return False
        if kind == "remember" and not _FIRST_PERSON.search(content):
            return False  # "remember, just do it!": advice to the other person
    return True


def attribute(candidate: Candidate, name: str) -> Candidate:
    """The candidate as the named speaker's: its text names them and its slot is theirs."""
    if not name:
        return candidate
    candidate.content = attributed(candidate.content, name)
    candidate.slot = f"speaker:{name.lower()}|{candidate.slot}"
    candidate.fields = {**candidate.fields, "speaker": name}
    return candidate
