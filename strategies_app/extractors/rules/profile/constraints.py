"""The constraint rules: a budget or spending limit, allergies, and diet (what the user does not eat or drink, a diet
such as vegetarian or halal)."""

from __future__ import annotations

import re

from strategies_app.extractors.base import Candidate

from ..text import (
    CURRENCY_AMOUNT,
    EN_ARTICLE,
    EN_BAD_FIRST_WORDS,
    EN_FILLER_TAIL,
    EN_OBJ_CUT,
    HYPOTHETICAL_EN,
    HYPOTHETICAL_ZH,
    NUM,
    SPACES,
    ZH_BAD_START,
    ZH_CORE_TAIL,
    ZH_LEAD,
    ZH_TAIL,
    amount_value,
    norm_key,
    parse_amount,
)
from .common import ZH_ADV, ZH_SUBJ, en_asserted, profile_candidate, zh_asserted

_I = re.IGNORECASE

_RE_EN_BUDGET = re.compile(
    rf"\bbudget\b(?P<gap>[^.?!\d]{{0,40}}?)(?P<amount>{CURRENCY_AMOUNT})"
    rf"|\bbudget\s*(?:is|of|:|=|around|about|is\s+around|is\s+about|is\s+roughly)?\s*(?P<bare>(?:{NUM})\s?(?:k\b)?)",
    _I,
)
_RE_EN_LIMIT = re.compile(
    r"\b(?:(?:spend|pay|cost|costs|afford|price)\b[^.?!\d]{0,30}?\b(?P<lim>no\s+more\s+than|not\s+more\s+than"
    r"|at\s+most|up\s+to|under|less\s+than|max(?:imum)?(?:\s+of)?|below)|(?P<lim2>no\s+more\s+than|not\s+more\s+than"
    rf"|at\s+most))\s+(?P<amount>{CURRENCY_AMOUNT})",
    _I,
)
_EN_MAX_WORDS = re.compile(r"under|below|at most|no more than|not more than|less than|up to|max", _I)
_EN_APPROX_WORDS = re.compile(r"around|about|roughly|approximately|~", _I)
_RE_ZH_BUDGET = re.compile(
    rf"预算(?P<gap>[^，。？?\d零一二三四五六七八九十两]{{0,8}}?)(?P<amount>{CURRENCY_AMOUNT}|(?:{NUM})\s?[kKwW]?)(?P<tail>左右|以内|以下|之内|上下)?"
    rf"|(?P<lim>不超过|不要超过|别超过|不能超过|最多|顶多|控制在|不高于)(?P<amount2>{CURRENCY_AMOUNT})(?P<tail2>以内|以下|之内|左右)?"
)
_RE_EN_ALLERGY = re.compile(
    r"\bi(?:'m|\s+am)\s+(?:(?:very|severely|highly|deathly|a\s+bit|a\s+little|slightly|mildly|also|quite)\s+)*"
    r"allergic\s+to\s+(?P<x>.+)|\bi\s+have\s+(?:an?\s+)?(?:(?:severe|mild|bad)\s+)?(?P<x2>[\w\s-]{2,30}?)\s+allerg(?:y|ies)\b"
    r"|\bmy\s+allerg(?:y|ies)\s+(?:is|are|to|:|include)\s+(?P<x3>.+)",
    _I,
)
_RE_EN_DIET = re.compile(
    r"\bi\s+(?:(?:really|just|also|absolutely|generally)\s+)*(?P<verb>can't|cannot|can\s+not|don't|do\s+not|never"
    r"|no\s+longer|won't)\s+(?P<what>eat|drink|have)\s+(?P<x>.+)",
    _I,
)
_RE_EN_DIET_KIND = re.compile(
    r"\bi(?:'m|\s+am)\s+(?:a\s+)?(?:(?:strict|full|total|mostly|now)\s+)?(?P<diet>vegetarian|vegan|pescatarian"
    r"|lactose[- ]intolerant|gluten[- ]intolerant|gluten[- ]free|diabetic|celiac|coeliac|halal|kosher"
    r"|on\s+a\s+(?:keto|low[- ]carb|paleo)\s+diet)\b",
    _I,
)
_EN_DIET_VERBS = {"can't": "Can't", "cannot": "Can't", "can not": "Can't", "don't": "Doesn't", "do not": "Doesn't"}
_EN_DIET_VERBS |= {"never": "Never", "no longer": "No longer", "won't": "Won't"}
_ITEM_SPLIT = re.compile(r"\s*(?:,|\band\b|\bor\b|/|、|和|跟|与|还有|以及|或者)\s*", _I)
_EN_FOOD = re.compile(
    r"\b(?:dairy|gluten|wheat|lactose|milk|cheese|butter|cream|eggs?|meat|red meat|pork|beef|chicken|fish|seafood"
    r"|shellfish|shrimp|nuts?|peanuts?|soy|sugar|sweets?|salt|spicy|spice|alcohol|beer|wine|caffeine|coffee|carbs?"
    r"|fried|garlic|onions?|sesame|corn|rice|bread|pasta|chocolate|juice|soda)\b",
    _I,
)
_EN_NOT_FOOD = frozenset("anything that this it now much more late right today tonight before after any".split())
_RE_ZH_ALLERGY = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}(?:也|还|都|有点|比较)?对(?P<x>[^，。]{{1,12}}?)(?:严重|有点|有些|比较|非常|很|也|都)*过敏"
    rf"|{ZH_LEAD}我(?:有)?(?P<x2>[^，。对]{{1,8}}?)过敏(?:症)?"
)
_RE_ZH_DIET = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}{ZH_ADV}(?P<verb>不吃|不能吃|吃不了|不敢吃|不喝|不能喝|喝不了|忌口|戒了)(?P<x>[^，。]{{1,12}})$"
)
_RE_ZH_DIET_KIND = re.compile(
    rf"{ZH_LEAD}{ZH_SUBJ}{ZH_ADV}(?:是)?(?:一个|个|一名)?(?P<diet>吃素|素食者|素食主义者|全素|纯素|清真|乳糖不耐受?|糖尿病人?|有糖尿病)"
)
_ZH_DIETS = {"吃素": "vegetarian", "素食者": "vegetarian", "素食主义者": "vegetarian", "全素": "vegan", "纯素": "vegan"}
_ZH_DIETS |= {"清真": "halal", "乳糖不耐": "lactose intolerant", "乳糖不耐受": "lactose intolerant"}
_ZH_DIETS |= {"糖尿病": "diabetic", "糖尿病人": "diabetic", "有糖尿病": "diabetic"}


_BUDGET_PERIOD = re.compile(
    r"\s*(?:per|a|an|each|/)\s*(?P<en>night|day|month|week|year|person|head)\b|\s*(?:每|一|/)\s*(?P<zh>晚|天|月|周|年|人)",
    _I,
)
_PERIODS = {"晚": "night", "天": "day", "月": "month", "周": "week", "年": "year", "人": "person", "head": "person"}


def _budget_candidate(shown: str, limit: str, zh: bool, reason: str, after: str = "") -> Candidate:
    shown = SPACES.sub(" ", shown).strip()
    period = _BUDGET_PERIOD.match(after)  # "$200 per night", "500元/晚"
    if period:
        shown += f" {period.group(0).strip()}" if period.group("en") else period.group(0).strip()
    amount, currency = parse_amount(shown)
    currency = currency or ("CNY" if zh else "")  # "预算1.5万": yuan unless said otherwise
    value, parsed = amount_value(amount, currency, shown)
    fields = {"kind": "budget", **parsed}
    if limit:
        fields["limit"] = limit
    if period:
        unit = period.group("en") or period.group("zh")
        fields["per"] = _PERIODS.get(unit.lower(), unit.lower())
    if zh:
        content = {"max": f"预算不超过{shown}", "approx": f"预算{shown}左右"}.get(limit, f"预算{shown}")
    else:
        content = {"max": f"Budget: at most {shown}", "approx": f"Budget: about {shown}"}.get(limit, f"Budget: {shown}")
    return profile_candidate(content, "budget", value, True, fields, 0.9, reason)


def en_constraints(clause: str) -> list[Candidate]:
    out = []
    m = _RE_EN_BUDGET.search(clause) or _RE_EN_LIMIT.search(clause)
    if m and en_asserted(clause, m) or m and m.re is _RE_EN_LIMIT:
        if m.re is _RE_EN_BUDGET:
            gap = m.group("gap") or ""
            shown = m.group("amount") or m.group("bare")
            limit = "max" if _EN_MAX_WORDS.search(gap) else "approx" if _EN_APPROX_WORDS.search(gap) else ""
        else:
            shown, limit = m.group("amount"), "max"
        out.append(_budget_candidate(shown, limit, False, "en.budget", clause[m.end() :]))
    m = _RE_EN_ALLERGY.search(clause)
    if m and en_asserted(clause, m):
        raw = m.group("x") or m.group("x2") or m.group("x3")
        for item in _ITEM_SPLIT.split(EN_FILLER_TAIL.sub("", EN_OBJ_CUT.sub("", raw))):
            key = norm_key(EN_ARTICLE.sub("", item))
            if key and key.split()[0] not in EN_BAD_FIRST_WORDS and len(key.split()) <= 4:
                fields = {"kind": "allergy", "allergen": key}
                out.append(
                    profile_candidate(
                        f"Allergic to {item.strip()}", f"allergy:{key}", "allergic", True, fields, 0.95, "en.allergy"
                    )
                )
    m = _RE_EN_DIET.search(clause)
    if m and not HYPOTHETICAL_EN.search(clause, 0, m.start()):
        verb = SPACES.sub(" ", m.group("verb").lower())
        what = m.group("what").lower()
        for item in _ITEM_SPLIT.split(EN_FILLER_TAIL.sub("", EN_OBJ_CUT.sub("", m.group("x")))):
            key = norm_key(EN_ARTICLE.sub("", item))
            if (
                not key
                or key.split()[0] in _EN_NOT_FOOD
                or key.split()[0] in EN_BAD_FIRST_WORDS
                or len(key.split()) > 4
            ):
                continue
            if what == "have" and not _EN_FOOD.search(key):
                continue  # "I don't have a recipe" says nothing of a diet
            phrase = _EN_DIET_VERBS[verb]
            verb_form = what if phrase in ("Can't", "Won't", "Doesn't") else what + "s"
            fields = {"kind": "diet", "avoid": key}
            out.append(
                profile_candidate(
                    f"{phrase} {verb_form} {item.strip()}", f"diet:{key}", "avoid", True, fields, 0.85, "en.diet"
                )
            )
    m = _RE_EN_DIET_KIND.search(clause)
    if m and en_asserted(clause, m):
        diet = SPACES.sub(" ", m.group("diet").lower()).replace("-", " ")
        out.append(
            profile_candidate(
                f"Is {diet}", f"diet:{diet}", "yes", True, {"kind": "diet", "diet": diet}, 0.9, "en.diet_kind"
            )
        )
    return out


def zh_constraints(clause: str) -> list[Candidate]:
    out = []
    m = _RE_ZH_BUDGET.search(clause)
    if m and not HYPOTHETICAL_ZH.search(clause, 0, m.start()):
        shown = m.group("amount") or m.group("amount2")
        tail = m.group("tail") or m.group("tail2") or ""
        gap = m.group("gap") or ""
        if m.group("lim") or tail in ("以内", "以下", "之内") or re.search("不超过|最多|以内|控制在", gap):
            limit = "max"
        elif tail in ("左右", "上下") or re.search("大概|大约|差不多|约", gap):
            limit = "approx"
        else:
            limit = ""
        after = clause[m.end() :]
        if not _BUDGET_PERIOD.match(after):
            per = re.search("每[晚天月周年人]", gap)  # "预算每晚500元"
            after = per.group(0) if per else after
        out.append(_budget_candidate(shown, limit, True, "zh.budget", after))
    m = _RE_ZH_ALLERGY.match(clause)
    if m and zh_asserted(m):
        for item in _ITEM_SPLIT.split(m.group("x") or m.group("x2")):
            item = ZH_TAIL.sub("", item).strip()
            if item and not ZH_BAD_START.match(item) and item not in ("点", "些", "有点", "一点"):
                fields = {"kind": "allergy", "allergen": item}
                out.append(
                    profile_candidate(
                        f"对{item}过敏", f"allergy:{norm_key(item)}", "allergic", True, fields, 0.95, "zh.allergy"
                    )
                )
    m = _RE_ZH_DIET.match(clause)
    if m and zh_asserted(m):
        verb = m.group("verb")
        for item in _ITEM_SPLIT.split(m.group("x")):
            item = ZH_CORE_TAIL.sub("", ZH_TAIL.sub("", item)).strip()
            if item and not ZH_BAD_START.match(item):
                fields = {"kind": "diet", "avoid": item}
                out.append(
                    profile_candidate(f"{verb}{item}", f"diet:{norm_key(item)}", "avoid", True, fields, 0.85, "zh.diet")
                )
    m = _RE_ZH_DIET_KIND.match(clause)
    if m and zh_asserted(m):
        diet = _ZH_DIETS.get(m.group("diet"), m.group("diet"))
        fields = {"kind": "diet", "diet": diet}
        out.append(profile_candidate(m.group("diet"), f"diet:{diet}", "yes", True, fields, 0.9, "zh.diet_kind"))
    return out
