"""The identity rules: the user's name, where they live and come from, their job, employer, industry and age."""

from __future__ import annotations

import re

from strategies_app.extractors.base import Candidate

from ..text import (
    EN_ARTICLE,
    EN_BAD_FIRST_WORDS,
    EN_FILLER_TAIL,
    SPACES,
    ZH_BAD_START,
    ZH_LEAD,
    ZH_TAIL,
    has_cjk,
    parse_number,
)
from .common import ZH_JOB_SUFFIX, ZH_SUBJ, ZH_SUBJ2, en_asserted, profile_candidate, zh_asserted

_I = re.IGNORECASE

EN_NAME = r"(?P<name>[^\W\d_][\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2})"
EN_CAPITALISED_NAME = r"(?P<name>(?-i:[A-Z])[\w'-]+(?:\s+(?-i:[A-Z])[\w'-]+)?)"
_EN_NOT_NAMES = frozenset(
    "not back later when if tomorrow now at on maybe please anytime soon a an the tired fine ok okay good here there "
    "sorry done busy ready sure going just also still really so very in out up from with home new glad happy i "
    "chinese japanese american british english french german korean indian italian spanish canadian australian "
    "russian mexican brazilian dutch swiss swedish irish scottish vietnamese thai asian european african "
    "christian muslim jewish buddhist catholic married single divorced retired pregnant".split()
)
_RE_EN_NAME = re.compile(rf"\b(?:my\s+name\s+is|my\s+name's|the\s+name's|i\s+go\s+by)\s+{EN_NAME}", _I)
_RE_EN_CALLED = re.compile(
    rf"\b(?:i'm\s+called|i\s+am\s+called|(?:you\s+can\s+|please\s+|just\s+)?call\s+me|people\s+call\s+me)\s+"
    rf"{EN_CAPITALISED_NAME}",
    _I,
)
_RE_EN_INTRO = re.compile(
    rf"^(?:(?:hi|hello|hey)(?:\s+there)?[\s,!]*)?(?:i'm|i\s+am|this\s+is)\s+{EN_CAPITALISED_NAME}\s*[.!]*$"
    r"|^(?:hi|hello|hey)(?:\s+there)?[\s,!]+(?:i'm|i\s+am|this\s+is)\s+"
    rf"{EN_CAPITALISED_NAME.replace('name', 'name2')}\b",
    _I,
)
_EN_PLACE = r"(?P<place>(?:the\s+)?[\w'.-]+(?:(?:\s+|,\s*)[\w'.-]+){0,4})"
_EN_PLACE_CUT = re.compile(
    r"(?:\s+|,\s*)(?:with|for|since|because|and|but|now|right|at|currently|these|last|this|near|which|where|when|so"
    r"|as|in\s+(?:a|an|the|my)|ago|years?|months?|weeks?|days?|until|till|though)\b.*$|,\s*(?-i:[a-z]).*$",
    _I,
)
_RE_EN_LIVE = re.compile(
    r"\b(?:i(?:'m|\s+am)\s+(?:currently\s+|now\s+)?(?:living|based|staying|located)|i\s+(?:currently\s+|now\s+|still\s+"
    r"|actually\s+|also\s+)?(?:live|reside)|i(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated))"
    rf"\s+(?:in|to|at|near|out\s+in)\s+{_EN_PLACE}",
    _I,
)
_RE_EN_FROM = re.compile(rf"\bi(?:'m|\s+am)\s+(?:originally\s+)?from\s+{_EN_PLACE}", _I)
PROFESSIONS = (
    r"engineer|developer|programmer|coder|designer|teacher|professor|lecturer|tutor|student|doctor|physician|surgeon"
    r"|nurse|dentist|pharmacist|lawyer|attorney|paralegal|accountant|consultant|manager|director|analyst|scientist"
    r"|researcher|writer|author|journalist|editor|artist|musician|photographer|chef|cook|baker|farmer|pilot|driver"
    r"|architect|entrepreneur|founder|co-founder|ceo|cto|cfo|freelancer|salesman|saleswoman|salesperson|marketer"
    r"|translator|interpreter|librarian|mechanic|electrician|plumber|carpenter|firefighter|police\s+officer|officer"
    r"|soldier|therapist|psychologist|psychiatrist|counsel+or|veterinarian|vet|intern|barista|waiter|waitress"
    r"|bartender|cashier|banker|trader|investor|economist|biologist|chemist|physicist|mathematician|statistician"
    r"|administrator|sysadmin|tester|clerk|secretary|receptionist|homemaker|housewife|postdoc|technician|paramedic"
    r"|social\s+worker|civil\s+servant|agent|broker|coach|trainer|athlete|actor|actress|singer|dancer|streamer"
    r"|youtuber|blogger|influencer|undergrad|undergraduate|retiree|pensioner|nanny|caregiver|product\s+owner"
    r"|scrum\s+master|stay-at-home\s+(?:mom|dad|parent)"
)
_RE_EN_JOB = re.compile(
    rf"\bi(?:'m|\s+am)\s+(?:now\s+|currently\s+)?(?:an?\s+)(?P<job>(?:[\w-]+\s+){{0,2}}?(?:{PROFESSIONS}))s?\b"
    r"(?:\s+(?:at|for|with)\s+(?P<org>(?-i:[A-Z])[\w&.'-]*(?:\s+(?-i:[A-Z])[\w&.'-]*){0,3}))?"
    r"|\bi\s+(?:currently\s+|now\s+|still\s+)?work\s+as\s+(?:an?\s+)?(?P<job2>(?:[\w-]+\s+){0,3}?[\w-]+)"
    r"(?=\s+(?:at|for|in|and|but|since)\b|\s*$|\s*[,.])",
    _I,
)
_RE_EN_EMPLOYER = re.compile(
    r"\bi\s+(?:currently\s+|now\s+|still\s+)?work\s+(?:at|for)\s+(?P<org>(?:the\s+)?[\w&.'-]+(?:\s+[\w&.'-]+){0,3})",
    _I,
)
_EN_NOT_EMPLOYERS = frozenset("home night a myself free nothing it that this them money hours".split())
_RE_EN_RETIRED = re.compile(
    r"\bi(?:'m|\s+am)\s+(?:now\s+|already\s+)?retired\b|\bi\s+(?:just\s+|have\s+)?retired\b", _I
)
_RE_EN_INDUSTRY = re.compile(
    r"\bi\s+(?:currently\s+|now\s+)?work\s+in\s+(?P<field>finance|tech|it|marketing|sales|healthcare|education|retail"
    r"|consulting|hospitality|government|research|academia|media|advertising|insurance|banking|real\s+estate"
    r"|construction|manufacturing|logistics|law|engineering|design|hr|human\s+resources|software|gaming|fashion"
    r"|biotech|pharma)\b",
    _I,
)
_RE_EN_AGE = re.compile(
    r"\bi(?:'m|\s+am)\s+(?:now\s+|turning\s+|almost\s+|nearly\s+)?(?P<age>\d{1,3})(?:\s*(?:years?|yrs?)(?:\s+old)?"
    r"|\s*y/?o)\b|\bi\s+(?:just\s+)?turned\s+(?P<age2>\d{1,3})\b|^i(?:'m|\s+am)\s+(?P<age3>\d{1,3})\s*(?:now)?$",
    _I,
)

ZH_NAME_TAIL = re.compile("(?:就行|就好|就可以|就可以了|就行了|吧|哈|啊|呀|哦|嘛)+$")
_ZH_NOT_NAMES = re.compile("[了吗呢什么你他她起去来吃喝做看车过]|^(?:外卖|一声|醒)")
_RE_ZH_NAME = re.compile(
    rf"{ZH_LEAD}(?:我的?(?:名字|姓名)(?:叫做?|是)|我(?:叫做?|名叫)|(?:你|大家|你们)?(?:可以)?叫我)(?P<name>.+)$"
)
_RE_ZH_LIVE = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}(?:现在|目前|一直|已经|也)?(?:住在|定居在?|生活在|常住在?|搬到了?|搬去了?|搬家到了?|家在)"
    r"(?P<place>[^，。]{1,12})$"
    rf"|{ZH_LEAD}{ZH_SUBJ2}(?:现在|目前|一直|也)?在(?P<place2>[^，。在]{{2,10}}?)(?:生活|居住|定居|住)(?:了)?$"
)
_ZH_PLACE_TAIL = re.compile("(?:了|啦|呢|这边|那边|附近|一带|生活|居住|住)+$")
_RE_ZH_FROM = re.compile(
    rf"{ZH_LEAD}我(?:是|老家是|来自)(?P<place>[^，。一个好坏这那本外]{{1}}[^，。]{{1,6}}?)(?:人|的)?$"
)
_RE_ZH_JOB = re.compile(
    rf"{ZH_LEAD}我(?:现在|目前|也)?是(?:一名|一个|一位|名|个|位)?(?P<job>[^，。]{{1,12}})$"
    rf"|{ZH_LEAD}我(?:现在|目前)?(?:是做|做)(?P<job2>[^，。]{{1,10}}?)的$"
    rf"|{ZH_LEAD}我(?:现在|目前)?在(?P<org>[^，。]{{2,15}}?)(?:做|当|担任)(?P<job3>[^，。]{{1,10}})$"
)
_RE_ZH_EMPLOYER = re.compile(rf"{ZH_LEAD}我(?:现在|目前|也)?在(?P<org>[^，。]{{2,15}}?)(?:工作|上班|任职|实习)(?:了)?$")
_ZH_NOT_EMPLOYERS = frozenset(["家里", "家", "公司", "单位", "这里", "那里", "外地", "这边", "那边", "家中"])
_RE_ZH_RETIRED = re.compile(rf"{ZH_LEAD}我(?:已经|早就|刚)?退休了?$")
_RE_ZH_AGE = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}(?:今年|现在|已经|快|马上|刚)?(?P<age>\d{{1,3}}|[一二三四五六七八九十两]{{1,3}})周?岁(?:了|啦|啊)?$"
)


def valid_name(name: str) -> bool:
    if not name or name.split()[0].lower() in _EN_NOT_NAMES:
        return False
    if has_cjk(name):
        return 1 <= len(name) <= 5 and not _ZH_NOT_NAMES.search(name)
    return len(name.split()) <= 3


def _identity_candidate(attribute: str, value: str, content: str, confidence: float, reason: str, **extra) -> Candidate:
    fields = {"kind": "identity", "attribute": attribute, "value": value, **extra}
    return profile_candidate(content, f"identity:{attribute}", value.lower(), True, fields, confidence, reason)


def _en_place(raw: str, clause: str) -> str | None:
    place = _EN_PLACE_CUT.sub("", raw).strip(" ,.!")
    if not place:
        return None
    words = place.split()
    first = words[1] if words[0].lower() == "the" and len(words) > 1 else words[0]
    if first.lower() in EN_BAD_FIRST_WORDS or first.lower() in ("a", "an", "my", "our", "his", "her"):
        return None
    if not first[0].isupper() and clause != clause.lower():  # a typed place name is capitalised
        return None
    return place


def en_identity(clause: str) -> list[Candidate]:
    out = []
    m = _RE_EN_NAME.search(clause) or _RE_EN_CALLED.search(clause) or _RE_EN_INTRO.search(clause)
    if m and en_asserted(clause, m):
        name = m.group("name") or (m.group("name2") if m.re is _RE_EN_INTRO else "") or ""
        name = EN_FILLER_TAIL.sub("", name).strip()
        if valid_name(name):
            confidence = {_RE_EN_NAME: 0.95, _RE_EN_CALLED: 0.85}.get(m.re, 0.7)
            reason = {_RE_EN_NAME: "en.name", _RE_EN_CALLED: "en.call_me"}.get(m.re, "en.intro")
            out.append(_identity_candidate("name", name, f"Name is {name}", confidence, reason))
    m = _RE_EN_LIVE.search(clause)
    if m and en_asserted(clause, m):
        place = _en_place(m.group("place"), clause)
        if place:
            moved = "moved" in m.group(0).lower() or "relocated" in m.group(0).lower()
            out.append(
                _identity_candidate("location", place, f"Lives in {place}", 0.85 if moved else 0.9, "en.location")
            )
    m = _RE_EN_FROM.search(clause)
    if m and en_asserted(clause, m):
        place = _en_place(m.group("place"), clause)
        if place:
            out.append(_identity_candidate("hometown", place, f"Is from {place}", 0.85, "en.hometown"))
    m = _RE_EN_JOB.search(clause)
    if m and en_asserted(clause, m):
        job = SPACES.sub(" ", (m.group("job") or m.group("job2") or "")).strip()
        if job and job.split()[0].lower() not in EN_BAD_FIRST_WORDS:
            article = "an" if job[0].lower() in "aeiou" else "a"
            verb = "Works as" if m.group("job2") else "Is"
            out.append(_identity_candidate("job", job, f"{verb} {article} {job}", 0.85, "en.job"))
            if m.group("org"):
                org = m.group("org")
                out.append(_identity_candidate("employer", org, f"Works at {org}", 0.85, "en.employer"))
    m = _RE_EN_EMPLOYER.search(clause)
    if m and en_asserted(clause, m):
        org = _EN_PLACE_CUT.sub("", m.group("org")).strip(" ,.!")
        org = EN_ARTICLE.sub("", org) if org.lower().startswith(("a ", "an ")) else org
        if org and org.split()[0].lower() not in _EN_NOT_EMPLOYERS and (org[0].isupper() or clause == clause.lower()):
            out.append(_identity_candidate("employer", org, f"Works at {org}", 0.85, "en.employer"))
    m = _RE_EN_RETIRED.search(clause)
    if m and en_asserted(clause, m):
        out.append(_identity_candidate("job", "retired", "Is retired", 0.85, "en.retired"))
    m = _RE_EN_INDUSTRY.search(clause)
    if m and en_asserted(clause, m):
        field_ = m.group("field")
        out.append(_identity_candidate("industry", field_, f"Works in {field_}", 0.8, "en.industry"))
    m = _RE_EN_AGE.search(clause)
    if m and en_asserted(clause, m):
        age = int(m.group("age") or m.group("age2") or m.group("age3"))
        if 1 <= age <= 120:
            out.append(_identity_candidate("age", str(age), f"Is {age} years old", 0.85, "en.age", age=age))
    return out


def zh_identity(clause: str) -> list[Candidate]:
    out = []
    m = _RE_ZH_NAME.match(clause)
    if m:
        name = ZH_NAME_TAIL.sub("", ZH_TAIL.sub("", m.group("name"))).strip()
        if valid_name(name):
            out.append(_identity_candidate("name", name, f"名字叫{name}", 0.9, "zh.name"))
    m = _RE_ZH_LIVE.match(clause)
    if m and zh_asserted(m):
        place = _ZH_PLACE_TAIL.sub("", ZH_TAIL.sub("", m.group("place") or m.group("place2") or ""))
        if len(place) >= 2 and not ZH_BAD_START.match(place):
            out.append(_identity_candidate("location", place, f"住在{place}", 0.9, "zh.location"))
    m = _RE_ZH_FROM.match(clause)
    if m and clause.endswith("人") or m and "老家" in clause or m and "来自" in clause:
        place = ZH_TAIL.sub("", m.group("place"))
        if len(place) >= 2 and not ZH_JOB_SUFFIX.search(place):
            out.append(_identity_candidate("hometown", place, f"来自{place}", 0.85, "zh.hometown"))
    m = _RE_ZH_JOB.match(clause)
    if m:
        job = ZH_TAIL.sub("", m.group("job") or m.group("job2") or m.group("job3") or "")
        doing = bool(m.group("job2"))
        if m.group("job") and job.startswith("做") and job.endswith("的") and len(job) > 2:
            job, doing = job[1:-1], True  # "我是做设计的"
        if doing:
            out.append(_identity_candidate("job", job, f"是做{job}的", 0.8, "zh.job"))
        elif job and ZH_JOB_SUFFIX.search(job) and not ZH_BAD_START.match(job):
            out.append(_identity_candidate("job", job, f"是{job}", 0.85, "zh.job"))
        if m.group("org") and job:
            out.append(_identity_candidate("employer", m.group("org"), f"在{m.group('org')}工作", 0.85, "zh.employer"))
    m = _RE_ZH_EMPLOYER.match(clause)
    if m and m.group("org") not in _ZH_NOT_EMPLOYERS and not ZH_BAD_START.match(m.group("org")):
        org = m.group("org")
        out.append(_identity_candidate("employer", org, f"在{org}工作", 0.85, "zh.employer"))
    if _RE_ZH_RETIRED.match(clause):
        out.append(_identity_candidate("job", "retired", "已退休", 0.85, "zh.retired"))
    m = _RE_ZH_AGE.match(clause)
    if m and zh_asserted(m):
        age = parse_number(m.group("age"))
        if age and 1 <= age <= 120:
            out.append(_identity_candidate("age", str(age), f"今年{age}岁", 0.85, "zh.age", age=age))
    return out
