"""The built-in ``rules`` extractor: precompiled English and Chinese patterns, no network, no model.

It reads what a user states about themselves (profile), the running state of a session's task (task) and
what a user asks to be remembered or reports as an event, lesson or procedure (fact). Everything is compiled
at import; a message first meets a cheap keyword filter, and only the few that pass are split into
sentences and clauses and run through the rules. ``score()`` is the cheaper still rating the
confidence-threshold trigger runs on every new message. What it recognises, and what it misses:
``docs/rules-extractor.md``.
"""

from __future__ import annotations

import re
import time

from strategies_app.extractors.base import Candidate, Extraction, Extractor, SourceMessage

_I = re.IGNORECASE
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_LATIN_LETTERS = re.compile(r"[A-Za-z]{2,}")

# -- Sentences and clauses ---------------------------------------------------------------------------------
# A sentence ends at . ! ? (full or half width), ; or a new line; a period between two digits does not end it
# (mended after the split: lookarounds in the pattern would cost more than the split itself).
_SENTENCE_SPLIT = re.compile(r"([.!?。！？；;\n…]+)")
# Profile and task rules read clauses: a Chinese comma always starts one; English splits on "but" and on
# "and I ..." / "and hate ..." (so "I like tea but hate coffee" is two statements).
_CLAUSE_SPLIT = re.compile(
    rf"[，,]\s*(?:但是|但|不过|可是|而且|并且|所以)?(?=\s*[{_CJK}])|，|但是|不过|可是"
    r"|\s(?:but|though|although|whereas|however|except\s+that)\s"
    r"|,\s+(?:and|so)\s+(?=(?i:i|i'm|i've|my|also)\b)"
    r"|\sand\s+(?=(?i:i|i'm|i've|my)\s|(?:also\s+|really\s+)?(?:hate|love|like|dislike|prefer|enjoy|can't\s+stand"
    r"|don't|do\s+not|am|usually|always|never)\b)"
)
_EN_FIRST_PERSON_START = re.compile(r"(?:\w+,?\s+){0,2}?i\s", _I)
_EN_DROPPED_SUBJECT = re.compile(
    r"(?:also\s+|really\s+|still\s+)?(?:hate|love|like|dislike|prefer|enjoy|can't stand|cannot stand|don't|do not"
    r"|am|usually|always|never|live|work)\b",
    _I,
)
_TRIM_START = " \t\r\n\"'“”‘’()[]*_~>#•·-"
_TRIM_END = " \t\r\n\"'“”‘’()[]*_~<:：,，"
_EN_QUESTION = re.compile(
    r"^(?:(?:so|and|but|ok|okay|hey|well|also|then),?\s+)?(?:(?:do|does|did|would|could|can|should|will|are|is|am"
    r"|have|has|shall|may)\s+(?:you|i|we|they|he|she|it|there)\b|(?:what|which|who|whom|where|when|why|how)\b(?!\s+i\b))",
    _I,
)
_ZH_QUESTION = re.compile(
    r"[吗么]$|呢$|什么|哪|怎么|为什么|为啥|是否|要不要|是不是|有没有|能不能|可不可以|多少|几[个天岁点]|喜不喜欢|[？?]"
)
_HYPOTHETICAL_EN = re.compile(
    r"\b(?:if|unless|whether|wonder|doubt|not|never|suppose|imagine|pretend|assume|said|says|asked)\b|n't\b", _I
)
_HYPOTHETICAL_ZH = re.compile("如果|假如|要是|假设|万一|倘若|不知道|是否|以为|说|问")


def _sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, is_question) pairs of a message."""
    parts = _SENTENCE_SPLIT.split(text)
    out = []
    pending = ""
    for i in range(0, len(parts), 2):
        piece = pending + parts[i]
        end = parts[i + 1] if i + 1 < len(parts) else ""
        if end == "." and piece[-1:].isdigit() and parts[i + 2][:1].isdigit():
            pending = piece + end  # "3.5", "v2.0": not a sentence end
            continue
        pending = ""
        sentence = piece.strip().lstrip(_TRIM_START).rstrip(_TRIM_END)
        if not sentence:
            continue
        question = "?" in end or "？" in end or bool(_EN_QUESTION.match(sentence))
        if not question and not sentence.isascii() and _CJK_CHAR.search(sentence):
            question = bool(_ZH_QUESTION.search(sentence))
        out.append((sentence, question))
    return out


def _clauses(sentence: str) -> list[str]:
    out = []
    first_person = False
    for part in _CLAUSE_SPLIT.split(sentence):
        clause = part.strip().lstrip(_TRIM_START).rstrip(_TRIM_END)
        if not clause:
            continue
        if first_person and clause[:2].lower() != "i " and _EN_DROPPED_SUBJECT.match(clause):
            clause = "I " + clause  # "I like tea but hate coffee": the second clause keeps its subject
        first_person = bool(_EN_FIRST_PERSON_START.match(clause))
        out.append(clause)
    return out


def _has_cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


def _is_zh(text: str) -> bool:
    """Mostly Chinese: more CJK characters than Latin words."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk > 0 and cjk >= len(_LATIN_LETTERS.findall(text))


# -- Keyword filters ---------------------------------------------------------------------------------------
# Python's regex engine tries every branch of an alternation at every position, so a list of a few hundred
# keywords costs ~100 µs per message. Built as a trie ("l(?:ike|ove|ive)|p(?:refer|...)") behind a class of the
# characters a word follows, the engine skips straight to word starts and tests one branch per first letter:
# a few µs. Keywords are lower-case; matchers read " " + text.lower().
_WORD_START = "[\\s(\\[\"“'‘/*>#-]"


def _trie(words) -> str:
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        if "" in node:  # a shorter keyword already matches; for "is any there?" the longer ones add nothing
            return ""
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(trie)


class _Keywords:
    """Is any of the keywords in a text? Words that start with a Latin letter or digit must start a word;
    the others (Chinese, "%", ", first") may start anywhere."""

    def __init__(self, *word_lists):
        words = {word for words in word_lists for word in words if word}
        at_word_start = sorted(w for w in words if w[0].isascii() and w[0].isalnum())
        anywhere = sorted(words.difference(at_word_start))
        self._word = re.compile(_WORD_START + _trie(at_word_start)).search if at_word_start else None
        self._other = re.compile(_trie(anywhere)).search if anywhere else None

    def __call__(self, padded: str) -> bool:
        """padded: " " + the lower-cased text."""
        return bool(self._word and self._word(padded) or self._other and self._other(padded))


def _combine(*parts: str) -> list[str]:
    """Every concatenation of one word from each part: _combine("can't ", "eat|drink") → ["can't eat", ...]."""
    out = [""]
    for part in parts:
        out = [head + tail for head in out for tail in part.split("|")]
    return out


# -- Normalising what a rule captured -----------------------------------------------------------------------
_EN_OBJ_CUT = re.compile(
    r"(?:\s*[,;:]\s*|\s+)(?:because|cause|cuz|since|as\s+(?:it|they|i|that|long)|so\s+that|so|which|who|but|though"
    r"|although|if|unless|and\s+(?:i|it|that|they|we|my|you|he|she)|whereas|except|lol|haha|hehe)\b.*$"
    r"|\s*[;(\[—–]\s*.*$|\s+-\s+.*$",
    _I,
)
_EN_FILLER_TAIL = re.compile(
    r"(?:[\s,]+(?:please|pls|now|right now|nowadays|these days|anymore|any more|instead|though|too|as well|a lot"
    r"|a bit|so much|very much|really|actually|honestly|lately|for now|in general|generally|overall|most of all"
    r"|the most|more|best|thanks|thank you|thx|lol|haha|to be honest|tbh|i think|i guess|i suppose|personally"
    r"|myself|then|also|either|anyway|:\)|:d)|[\s,.!~]+)+$",
    _I,
)
_EN_QUALIFIER_TAIL = re.compile(
    r"\s+(?P<q>(?:at|in|during|on|for|before|after|around)\s+(?:the\s+)?(?:night|nights|nighttime|night time"
    r"|mornings?|evenings?|afternoons?|day|daytime|weekends?|weekdays?|workdays?|home|work|office|bed|bedtime"
    r"|breakfast|lunch|dinner|summer|winter|spring|autumn|fall|holidays?|trips?|vacations?|(?:long|short|business)?"
    r"\s*(?:flights?|trips?)|car|train)|(?:when|whenever|while)\s+.+)$",
    _I,
)
_EN_ARTICLE = re.compile(r"^(?:the|a|an|some|any|my|our)\s+", _I)
_EN_TO = re.compile(r"^to\s+", _I)
_EN_PREP_CUT = re.compile(r"\s+(?:on|in|at|for|with|during|from|by|to|when|while|than|over|instead|rather)\b.*$", _I)
_EN_VERB_PHRASE = re.compile(r"\s*(?:to\s|\w+ing\b)", _I)
_EN_TO_ALTERNATIVE = re.compile(r"\s+to\s+(?P<alt>.+)$", _I)
_EN_ALTERNATIVE = re.compile(
    r"\s+(?:over|rather\s+than|instead\s+of|than|more\s+than|compared\s+to)\s+(?P<alt>.+)$", _I
)
_EN_BAD_FIRST_WORDS = frozenset(
    "it it's its that that's this these those them they you your yours him her his what how where which who whom "
    "why when everything anything something nothing so too very much yes no not one ones all both either neither "
    "here there doing being".split()
)
_EN_BAD_OBJECT = re.compile(
    r"^(?:the\s+)?(?:idea|plan|suggestion|answer|result|results|option|version|approach|way\s+you|first\s+one"
    r"|second\s+one|last\s+one|other\s+one|new\s+one|one|latter|former|above|previous\s+one|current\s+one)$"
    r"|^the\s+(?:new|old|first|second|third|last|other|current|previous|above|latter|former)\b",
    _I,
)
_EN_ABOUT_YOU = re.compile(r"\b(?:you|your|yours|you're|you've)\b", _I)
_EN_PRONOUN = re.compile(r"\b(?:my|me|mine|myself|i'm|i've|i'd|i'll|i)\b", _I)
_EN_PRONOUN_SWAP = {
    "my": "their",
    "me": "them",
    "mine": "theirs",
    "myself": "themselves",
    "i'm": "they're",
    "i've": "they've",
    "i'd": "they'd",
    "i'll": "they'll",
    "i": "they",
}
_EN_CATEGORY = {
    **dict.fromkeys("tea coffee juice soda beer wine milk water cola latte espresso cappuccino".split(), "drink"),
    **dict.fromkeys("train plane flight flying car driving bus subway metro bike cycling taxi".split(), "transport"),
}
_ZH_OBJ_CUT = re.compile("(?:因为|所以|但是|不过|而且|如果|只要|除非|因此|可是).*$")
_ZH_TAIL = re.compile(r"[了啊呀吧呢哦啦嘛哈呐么噢喔~～\s!！。.,，]+$")
_ZH_CORE_TAIL = re.compile("(?:一点儿?|一些|点儿|的|了|啊|呀|吧|呢|哦|啦|嘛)+$")
_ZH_BAD_START = re.compile("^(?:你|他|她|它|这|那|什么|哪|怎么|谁|为什么|多少|啥)")
# "用第二种方法", "选上面那个": a pick among options just offered, not a lasting preference
_ZH_BAD_OBJECT = re.compile(
    "^(?:用|选|选择)?(?:第[一二三四五六七八九十两\\d]+[个种条项套版]|上面|下面|前者|后者|前一个|后一个|这|那|你)"
)
_ZH_CATEGORY = (
    (re.compile("(?:茶|咖啡|果汁|可乐|啤酒|红酒|白酒|牛奶|拿铁|饮料)$"), "饮品"),
    (re.compile("(?:高铁|火车|飞机|动车|汽车|自驾|地铁|公交|打车|开车|骑车)$"), "出行"),
)
_NON_WORD = re.compile(rf"[^\w{_CJK}]+")
_SPACES = re.compile(r"\s+")


def _swap_pronouns(text: str) -> str:
    return _EN_PRONOUN.sub(lambda m: _EN_PRONOUN_SWAP[m.group(0).lower()], text)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _norm_key(text: str, limit: int = 80) -> str:
    """Lower-case, punctuation-free, single-spaced: the part of a slot that names a thing."""
    return _SPACES.sub(" ", _NON_WORD.sub(" ", text.lower())).strip()[:limit].strip()


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _clean_en_object(raw: str) -> tuple[str, str, str] | None:
    """(text for the content, normalised core, context qualifier) of an English object, or None if it names
    nothing worth remembering ("it", "that", "the idea", a whole story)."""
    text = _EN_OBJ_CUT.sub("", raw)
    qualifiers = []
    for _ in range(3):
        text = _EN_FILLER_TAIL.sub("", text)
        m = _EN_QUALIFIER_TAIL.search(text)
        if not m:
            break
        qualifiers.insert(0, m.group("q"))
        text = text[: m.start()]
    text = text.strip(" ,.!")
    if not text:
        return None
    words = text.split()
    if words[0].lower() in _EN_BAD_FIRST_WORDS or _EN_BAD_OBJECT.search(text) or len(words) > 10:
        return None
    if _EN_ABOUT_YOU.search(text):  # "the way you structured this" is about the conversation, not the user
        return None
    core = _norm_key(_EN_ARTICLE.sub("", text))
    if not core:
        return None
    qualifier = " ".join(qualifiers)
    shown = f"{text} {qualifier}" if qualifier else text
    return _swap_pronouns(shown), core, qualifier


def _en_topic(core: str) -> str:
    """Head noun of an English preference object: "soft lighting at night" → "lighting",
    "window seats on long flights" → "seat", "travelling by train" → "transport"."""
    verb_phrase = core.startswith("to ") or core.split(" ", 1)[0].endswith("ing")
    phrase = _EN_TO.sub("", core) if verb_phrase else _EN_PREP_CUT.sub("", core)
    words = phrase.split()
    if not words:
        return core
    head = _singular(words[-1])
    return _EN_CATEGORY.get(head, head)


def _clean_zh_object(raw: str) -> tuple[str, str] | None:
    """(text for the content, normalised core) of a Chinese object, or None."""
    text = _ZH_TAIL.sub("", _ZH_OBJ_CUT.sub("", raw)).strip()
    if not text or _ZH_BAD_START.match(text) or _ZH_BAD_OBJECT.match(text) or len(text) > 24:
        return None
    core = _ZH_CORE_TAIL.sub("", text)
    if not core:
        return None
    return text, _norm_key(core)


_LATIN_TAIL = re.compile(r"[a-z][a-z0-9+#.\- ]*$")


def _zh_topic(core: str) -> str:
    for pattern, category in _ZH_CATEGORY:
        if pattern.search(core):
            return category
    latin = _LATIN_TAIL.search(core)
    if latin:  # "用python": the thing is the Latin word
        return _en_topic(latin.group(0))
    cjk = "".join(_CJK_CHAR.findall(core))
    if len(cjk) >= 2:
        return cjk[-2:]
    return core if not cjk else cjk


_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}


def _zh_number(text: str) -> int:
    total = section = number = 0
    for ch in text:
        if ch in _ZH_DIGITS:
            number = _ZH_DIGITS[ch]
        elif ch in _ZH_UNITS:
            unit = _ZH_UNITS[ch]
            if unit == 10000:
                total += (section + number) * unit
                section = 0
            else:
                section += (number or 1) * unit
            number = 0
    return total + section + number


def _number(text: str) -> int | None:
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text and all(ch in _ZH_DIGITS or ch in _ZH_UNITS for ch in text):
        return _zh_number(text)
    return None


_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_CURRENCY_AMOUNT = (
    rf"(?:[$€£¥￥]\s?(?:{_NUM})(?:\s?(?:k|m|thousand|grand|million)\b)?(?:\s?(?:usd|eur|gbp|cny|rmb|jpy|aud|cad|hkd"
    rf"|sgd)\b)?|(?:{_NUM})\s?(?:k|thousand|grand|million)?\s?(?:dollars?|bucks|usd|eur|euros?|pounds?|gbp|yuan|rmb"
    rf"|cny|yen|jpy|aud|cad|hkd|sgd)\b|(?:{_NUM})\s?(?:[kw]\s?)?(?:元|块钱?|人民币|美元|美金|欧元|英镑|日元|刀)"
    rf"|(?:{_NUM})\s?[万千]\s?(?:元|块钱?|人民币|美元|美金|欧元|英镑|日元|刀)?"
    r"|[零一二三四五六七八九十两百千万]+\s?(?:元|块钱?|万|千))"
)
_AMOUNT_NUMBER = re.compile(_NUM)
_AMOUNT_MULTIPLIER = re.compile(r"(?<![a-z])(?:k|thousand|grand|千)(?![a-z])|(?P<m>million|m\b)|(?P<w>万|w\b)", _I)
_CURRENCIES = (
    (re.compile(r"aud", _I), "AUD"),
    (re.compile(r"cad", _I), "CAD"),
    (re.compile(r"hkd", _I), "HKD"),
    (re.compile(r"sgd", _I), "SGD"),
    (re.compile(r"yen|jpy|日元", _I), "JPY"),
    (re.compile(r"[$]|dollar|bucks|usd|美元|美金|刀", _I), "USD"),
    (re.compile(r"€|euro|eur|欧元", _I), "EUR"),
    (re.compile(r"£|pound|gbp|英镑", _I), "GBP"),
    (re.compile(r"[¥￥元块]|rmb|yuan|cny|人民币", _I), "CNY"),
)


def _parse_amount(text: str) -> tuple[float | None, str]:
    currency = next((code for pattern, code in _CURRENCIES if pattern.search(text)), "")
    m = _AMOUNT_NUMBER.search(text)
    if m:
        amount = float(m.group(0).replace(",", ""))
    else:
        cjk = "".join(ch for ch in text if ch in _ZH_DIGITS or ch in _ZH_UNITS)
        return (float(_zh_number(cjk)) if cjk else None), currency
    mult = _AMOUNT_MULTIPLIER.search(text[m.end() :])
    if mult:
        amount *= 1_000_000 if mult.group("m") else 10_000 if mult.group("w") else 1000
    return amount, currency


def _amount_value(amount: float | None, currency: str, shown: str) -> tuple[str, dict]:
    if amount is None:
        return _norm_key(shown), {}
    number = int(amount) if amount == int(amount) else amount
    return (f"{number} {currency}".strip(), {"amount": number, "currency": currency})


# -- Profile rules ------------------------------------------------------------------------------------------
# A Chinese clause may drop its subject ("预算5000元，喜欢人文历史"), so Chinese rules are anchored at the clause
# start: an optional connective, then either "我" (after at most a few words such as "晚上") or nothing.
_ZH_LEAD = (
    r"^(?:(?:但是|但|不过|可是|而且|并且|其实|另外|还有|嗯+|哦|噢|对了|好的|好吧|所以|总之|反正|说实话|老实说|说真的|话说)"
    r"[，,\s]*)*"
)
_ZH_SUBJ = r"(?:(?P<pre>[^你他她它們们如假万倘，,。？?]{0,6}?)我|)"
_ZH_SUBJ2 = _ZH_SUBJ.replace("pre", "pre2")
_ZH_ADV = (
    "(?:现在|目前|以后|今后|从现在起|从今以后|往后|其实|还是|一般|平时|通常|真的|真|很|挺|也|都|还|就|特别|非常|比较|最"
    "|更|蛮|超级|超|一直|从小就?|本来就?|向来|一向|确实|倒是|可能|主要|已经)*"
)
_EN_ADV = (
    r"(?:(?:now|really|much|still|actually|generally|usually|definitely|mostly|always|personally|strongly|also|kind"
    r" of|sort of|do|just|absolutely|totally|honestly|genuinely|quite|truly|especially|particularly|secretly|so)\s+)*"
)


def _profile(content: str, slot: str, value: str, exclusive: bool, fields: dict, confidence: float, reason: str):
    return Candidate(
        type="profile",
        content=content,
        slot=slot,
        value=value,
        exclusive=exclusive,
        fields=fields,
        confidence=confidence,
        reason=f"rule {reason}",
    )


def _pre_ok(m: re.Match) -> bool:
    groups = m.groupdict()
    pre = groups.get("pre") or groups.get("pre2")
    return not pre or not _HYPOTHETICAL_ZH.search(pre)


def _en_guard_ok(clause: str, m: re.Match) -> bool:
    return not _HYPOTHETICAL_EN.search(clause, 0, m.start())


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
    "big on": "Is big on",
}
_EN_DISLIKE_VERBS = (
    ("no longer", "No longer likes"),
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
)
_RE_EN_LIKE = re.compile(
    rf"\bi\s+{_EN_ADV}(?P<verb>like|love|enjoy|adore)\s+(?P<obj>.+)"
    rf"|\bi(?:'m|\s+am)\s+{_EN_ADV}(?:a\s+(?:big\s+|huge\s+|great\s+)?)?(?P<verb2>into|fan\s+of|fond\s+of|crazy\s+about"
    r"|obsessed\s+with|passionate\s+about|keen\s+on|big\s+on)\s+(?P<obj2>.+)",
    _I,
)
_RE_EN_DISLIKE = re.compile(
    rf"\bi\s+{_EN_ADV}(?P<verb>(?:don't|do\s+not)\s+(?:really\s+|much\s+|particularly\s+|even\s+)?(?:like|love|enjoy"
    r"|care\s+for)|dislike|hate|detest|loathe|(?:can't|cannot|can\s+not)\s+(?:stand|bear)|no\s+longer\s+(?:like|love"
    r"|enjoy)|never\s+liked|(?:try\s+to\s+)?avoid)\s+(?P<obj>.+)"
    rf"|\bi(?:'m|\s+am)\s+{_EN_ADV}(?P<verb2>not\s+(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into|keen\s+on|fond\s+of"
    r"|big\s+on))\s+(?P<obj2>.+)",
    _I,
)
_RE_EN_PREFER = re.compile(
    rf"\bi(?:\s+|'d\s+|'ve\s+){_EN_ADV}(?:would\s+|have\s+)?(?P<verb>prefer|rather|switched\s+to|changed\s+to"
    r"|lean\s+towards?)\s+(?P<obj>.+)"
    r"|\bmy\s+preference\s+is\s+(?:for\s+)?(?P<obj2>.+)",
    _I,
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
_EN_HABIT_BAD_VERBS = frozenset(
    "said say told tell ask asked thought think know knew mean meant get got do did does was were am is are be been "
    "will would can could should must want wanted need needed wonder wondered have had understood understand "
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
    rf"{_ZH_LEAD}{_ZH_SUBJ}{_ZH_ADV}(?P<verb>喜欢|热爱|钟爱|爱吃|爱喝|爱看|爱玩|爱听|迷上了|爱上了|爱(?![人好心情护国]))(?P<obj>.+)$"
)
_ZH_HOBBY = re.compile(rf"{_ZH_LEAD}{_ZH_SUBJ}的?(?:爱好|兴趣爱好|兴趣)(?:是|有|：|:)(?P<obj>.+)$")
_ZH_DISLIKE = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}{_ZH_ADV}(?P<verb>不喜欢|不太喜欢|不怎么喜欢|不是很喜欢|不再喜欢|不爱|不太爱|讨厌|受不了|忍受不了|反感|厌恶"
    r"|接受不了|不能接受|不想要)(?P<obj>.+)$"
)
_ZH_PREFER = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}{_ZH_ADV}(?P<verb>偏好|偏爱|更喜欢|更爱|更倾向于?|倾向于|宁愿|宁可|更想要|改成了?|改为|换成了?|改用)(?P<obj>.+)$"
)
_ZH_CHANGE = re.compile(
    rf"{_ZH_LEAD}(?P<topic>[^，。把帮请你他她]{{1,8}}?)(?:以后|今后|从现在起|从今以后|往后)(?:都|就|全部|一律)?"
    r"(?:改成|改为|换成|调成|改用|用)(?P<obj>.+)$"
)
_ZH_FAVOURITE = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}(?:最喜欢|最爱)的(?P<what>[^，。是]{{1,8}}?)(?:是|就是)(?P<obj>.+)$"
    rf"|^(?P<obj2>[^，。]{{1,12}}?)是我最(?:喜欢|爱)的(?P<what2>[^，。]{{0,8}})$"
)
_ZH_HABIT = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}(?P<adv>一般|通常|平时|平常|总是|经常|老是|习惯于?|每天|每周|每晚|向来|一向|从不|从来不|很少)"
    r"(?P<act>[^，。]{1,24})$"
)
_ZH_TRAIT = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}(?:是)?(?:一个|个|一位)?(?P<trait>急性子|慢性子|夜猫子|完美主义者|吃货|宅男|宅女|社恐|[iIeE]人|路痴"
    r"|工作狂|起床困难户|拖延症患者?)$"
    rf"|{_ZH_LEAD}我是(?:一个|个|一位)?(?P<trait2>[^，。]{{1,10}}?)的人$"
)


_EN_LEADING_QUALIFIER = re.compile(
    r"^(?:(?:actually|but|and|so|well|also|generally|usually|personally),?\s+)*(?P<q>(?:at|in|during|on|for|before"
    r"|after)\s+(?:the\s+)?(?:night|nighttime|mornings?|evenings?|afternoons?|day|daytime|weekends?|weekdays?|home|work"
    r"|office|bed|bedtime|breakfast|lunch|dinner|summer|winter|long\s+flights?|trips?))[,\s]+$",
    _I,
)


def _en_preference(clause: str) -> Candidate | None:
    m = _RE_EN_FAVOURITE.search(clause)
    if m and _en_guard_ok(clause, m):
        what = (m.group("what") or m.group("what2") or "").strip()
        cleaned = _clean_en_object(m.group("obj") or m.group("obj2"))
        if cleaned:
            shown, core, _ = cleaned
            if what:
                topic = _en_topic(_norm_key(what))
                return _profile(
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
    if m and _en_guard_ok(clause, m):
        verb = (m.group("verb") or m.group("verb2")).lower()
        cleaned = _clean_en_object(m.group("obj") or m.group("obj2"))
        if cleaned:
            phrase = next(text for key, text in _EN_DISLIKE_VERBS if key in verb)
            confidence = 0.9 if "hate" in verb or "stand" in verb or "no longer" in verb else 0.85
            return _like_candidate(f"{phrase} {cleaned[0]}", cleaned[1], "dislike", confidence, "en.dislike")
        return None
    m = _RE_EN_PREFER.search(clause)
    if m and _en_guard_ok(clause, m):
        raw = m.group("obj") or m.group("obj2")
        alternative = ""
        alt = _EN_ALTERNATIVE.search(raw)
        if not alt and (m.group("verb") or "").lower() == "prefer" and not _EN_VERB_PHRASE.match(raw):
            alt = _EN_TO_ALTERNATIVE.search(raw)  # "tea to coffee", but not "to travel" or "going to the beach"
        if alt:
            alternative = _EN_OBJ_CUT.sub("", alt.group("alt")).strip(" ,.!")
            raw = raw[: alt.start()]
        cleaned = _clean_en_object(raw)
        if cleaned and not cleaned[1].startswith("not "):
            shown, core, qualifier = cleaned
            lead = _EN_LEADING_QUALIFIER.match(clause, 0, m.start())
            if lead and not qualifier:  # "At night I prefer soft lighting" says the same as "... at night"
                qualifier = lead.group("q").lower()
                shown = f"{shown} {qualifier}"
            topic = _en_topic(core)
            fields = {"kind": "preference", "polarity": "prefer", "object": core, "topic": topic}
            if qualifier:
                fields["qualifier"] = qualifier
            if alternative:
                fields["over"] = alternative
            verb = _SPACES.sub(" ", (m.group("verb") or "prefer").lower())
            if verb == "rather":
                content = f"Would rather {shown}" + (f" than {_swap_pronouns(alternative)}" if alternative else "")
            elif verb.endswith(" to"):
                content = f"Has {verb} {shown}"
            else:
                content = f"Prefers {shown}" + (f" over {_swap_pronouns(alternative)}" if alternative else "")
            return _profile(content, f"prefer:{topic}", core, True, fields, 0.9, "en.prefer")
        return None
    m = _RE_EN_LIKE.search(clause)
    if m and _en_guard_ok(clause, m):
        verb = _SPACES.sub(" ", (m.group("verb") or m.group("verb2")).lower())
        cleaned = _clean_en_object(m.group("obj") or m.group("obj2"))
        if cleaned:
            confidence = 0.85 if verb in ("love", "adore") else 0.8
            return _like_candidate(f"{_EN_LIKE_VERBS[verb]} {cleaned[0]}", cleaned[1], "like", confidence, "en.like")
        return None
    m = _RE_EN_HABIT.search(clause)
    if m and _en_guard_ok(clause, m):
        adverb = _SPACES.sub(" ", m.group("adv").lower())
        act = _EN_FILLER_TAIL.sub("", _EN_OBJ_CUT.sub("", m.group("act"))).strip(" ,.!")
        words = act.split()
        if not words or len(words) > 12 or words[0].lower() in _EN_HABIT_BAD_VERBS:
            return None
        if adverb == "tend to":
            content = f"Tends to {_swap_pronouns(act)}"
        else:
            content = f"{_cap(adverb)} {_third_person(act)}"
        key = _norm_key(act)
        fields = {"kind": "habit", "frequency": adverb, "activity": key}
        return _profile(content, f"habit:{key}", adverb, False, fields, 0.75, "en.habit")
    m = _RE_EN_TRAIT.search(clause)
    if m and _en_guard_ok(clause, m):
        trait = _SPACES.sub(" ", m.group("trait").lower())
        article = "an" if trait[0] in "aeiou" else "a"
        return _profile(
            f"Is {article} {trait}", f"trait:{trait}", trait, False, {"kind": "trait", "trait": trait}, 0.8, "en.trait"
        )
    return None


def _like_candidate(content: str, core: str, polarity: str, confidence: float, reason: str) -> Candidate:
    fields = {"kind": "preference", "polarity": polarity, "object": core}
    return _profile(content, f"like:{core}", polarity, True, fields, confidence, reason)


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
    return f"{verb} {_swap_pronouns(rest)}".strip()


def _zh_preference(clause: str) -> Candidate | None:
    m = _ZH_FAVOURITE.match(clause)
    if m and _pre_ok(m):
        what = (m.group("what") or m.group("what2") or "").strip()
        cleaned = _clean_zh_object(m.group("obj") or m.group("obj2"))
        if cleaned:
            shown, core = cleaned
            if what:
                topic = _zh_topic(_norm_key(what))
                fields = {"kind": "preference", "polarity": "prefer", "object": core, "topic": topic}
                return _profile(f"最喜欢的{what}是{shown}", f"prefer:{topic}", core, True, fields, 0.9, "zh.favourite")
            return _like_candidate(f"最喜欢{shown}", core, "like", 0.85, "zh.favourite")
    m = _ZH_DISLIKE.match(clause)
    if m and _pre_ok(m):
        cleaned = _clean_zh_object(m.group("obj"))
        if cleaned:
            verb = m.group("verb")
            confidence = 0.9 if verb in ("讨厌", "受不了", "不再喜欢", "反感", "厌恶") else 0.85
            return _like_candidate(f"{verb}{cleaned[0]}", cleaned[1], "dislike", confidence, "zh.dislike")
        return None
    m = _ZH_PREFER.match(clause)
    if m and _pre_ok(m):
        return _zh_prefer_candidate(m.group("obj"), "", "zh.prefer")
    m = _ZH_CHANGE.match(clause)
    if m:
        topic = _ZH_CORE_TAIL.sub("", m.group("topic").lstrip("我").rstrip("也都就"))
        return _zh_prefer_candidate(m.group("obj"), topic, "zh.change")
    m = _ZH_HOBBY.match(clause)
    if m and _pre_ok(m):
        cleaned = _clean_zh_object(m.group("obj"))
        if cleaned:
            return _like_candidate(f"爱好{cleaned[0]}", cleaned[1], "like", 0.85, "zh.hobby")
    m = _ZH_LIKE.match(clause)
    if m and _pre_ok(m):
        cleaned = _clean_zh_object(m.group("obj"))
        if cleaned:
            verb = m.group("verb")
            shown = f"{verb}{cleaned[0]}" if verb != "爱" else f"喜欢{cleaned[0]}"
            return _like_candidate(shown, cleaned[1], "like", 0.8, "zh.like")
        return None
    m = _ZH_HABIT.match(clause)
    if m and _pre_ok(m):
        act = _ZH_TAIL.sub("", m.group("act"))
        if len(act) < 2 or _ZH_BAD_START.match(act):
            return None
        adverb = m.group("adv")
        key = _norm_key(act)
        fields = {"kind": "habit", "frequency": adverb, "activity": key}
        return _profile(f"{adverb}{act}", f"habit:{key}", adverb, False, fields, 0.75, "zh.habit")
    m = _ZH_TRAIT.match(clause)
    if m and _pre_ok(m):
        trait = m.group("trait") or m.group("trait2")
        if trait and not _ZH_BAD_START.match(trait) and not _ZH_JOB_SUFFIX.search(trait):
            content = f"是{trait}" if m.group("trait") else f"是一个{trait}的人"
            return _profile(
                content, f"trait:{_norm_key(trait)}", trait, False, {"kind": "trait", "trait": trait}, 0.75, "zh.trait"
            )
    return None


def _zh_prefer_candidate(raw: str, topic_hint: str, reason: str) -> Candidate | None:
    cleaned = _clean_zh_object(raw)
    if not cleaned:
        return None
    shown, core = cleaned
    topic = _zh_topic(_norm_key(topic_hint)) if topic_hint else _zh_topic(core)
    fields = {"kind": "preference", "polarity": "prefer", "object": core, "topic": topic}
    content = f"{topic_hint}偏好{shown}" if topic_hint else f"偏好{shown}"
    return _profile(content, f"prefer:{topic}", core, True, fields, 0.9, reason)


# Identity: name, location, hometown, job, employer, age.
_EN_NAME = r"(?P<name>[^\W\d_][\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2})"
_EN_CAPITALISED_NAME = r"(?P<name>(?-i:[A-Z])[\w'-]+(?:\s+(?-i:[A-Z])[\w'-]+)?)"
_EN_NOT_NAMES = frozenset(
    "not back later when if tomorrow now at on maybe please anytime soon a an the tired fine ok okay good here there "
    "sorry done busy ready sure going just also still really so very in out up from with home new glad happy i "
    "chinese japanese american british english french german korean indian italian spanish canadian australian "
    "russian mexican brazilian dutch swiss swedish irish scottish vietnamese thai asian european african "
    "christian muslim jewish buddhist catholic married single divorced retired pregnant".split()
)
_RE_EN_NAME = re.compile(rf"\b(?:my\s+name\s+is|my\s+name's|the\s+name's|i\s+go\s+by)\s+{_EN_NAME}", _I)
_RE_EN_CALLED = re.compile(
    rf"\b(?:i'm\s+called|i\s+am\s+called|(?:you\s+can\s+|please\s+|just\s+)?call\s+me|people\s+call\s+me)\s+"
    rf"{_EN_CAPITALISED_NAME}",
    _I,
)
_RE_EN_INTRO = re.compile(
    rf"^(?:(?:hi|hello|hey)(?:\s+there)?[\s,!]*)?(?:i'm|i\s+am|this\s+is)\s+{_EN_CAPITALISED_NAME}\s*[.!]*$"
    r"|^(?:hi|hello|hey)(?:\s+there)?[\s,!]+(?:i'm|i\s+am|this\s+is)\s+"
    rf"{_EN_CAPITALISED_NAME.replace('name', 'name2')}\b",
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
_PROFESSIONS = (
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
    rf"\bi(?:'m|\s+am)\s+(?:now\s+|currently\s+)?(?:an?\s+)(?P<job>(?:[\w-]+\s+){{0,2}}?(?:{_PROFESSIONS}))s?\b"
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

_ZH_NAME_TAIL = re.compile("(?:就行|就好|就可以|就可以了|就行了|吧|哈|啊|呀|哦|嘛)+$")
_ZH_NOT_NAMES = re.compile("[了吗呢什么你他她起去来吃喝做看车过]|^(?:外卖|一声|醒)")
_RE_ZH_NAME = re.compile(
    rf"{_ZH_LEAD}(?:我的?(?:名字|姓名)(?:叫做?|是)|我(?:叫做?|名叫)|(?:你|大家|你们)?(?:可以)?叫我)(?P<name>.+)$"
)
_RE_ZH_LIVE = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}(?:现在|目前|一直|已经|也)?(?:住在|定居在?|生活在|常住在?|搬到了?|搬去了?|搬家到了?|家在)"
    r"(?P<place>[^，。]{1,12})$"
    rf"|{_ZH_LEAD}{_ZH_SUBJ2}(?:现在|目前|一直|也)?在(?P<place2>[^，。在]{{2,10}}?)(?:生活|居住|定居|住)(?:了)?$"
)
_ZH_PLACE_TAIL = re.compile("(?:了|啦|呢|这边|那边|附近|一带|生活|居住|住)+$")
_RE_ZH_FROM = re.compile(rf"{_ZH_LEAD}我(?:是|老家是|来自)(?P<place>[^，。一个好坏这那本外]{{1}}[^，。]{{1,6}}?)人?$")
_ZH_JOB_SUFFIX = re.compile(
    "(?:工程师|程序员|程序猿|码农|设计师|老师|教师|医生|护士|律师|会计|经理|总监|学生|研究生|博士生?|研究员|教授|作家|记者|编辑|厨师"
    "|司机|销售|运营|架构师|分析师|顾问|创业者|老板|主管|公务员|警察|军人|农民|工人|自由职业者?|画家|歌手|演员|摄影师|翻译"
    "|科学家|药剂师|飞行员|建筑师|秘书|助理|实习生|全职妈妈|全职爸爸|家庭主妇|产品经理|测试|店长|导游|主播|博主|UP主|up主)$"
)
_RE_ZH_JOB = re.compile(
    rf"{_ZH_LEAD}我(?:现在|目前|也)?是(?:一名|一个|一位|名|个|位)?(?P<job>[^，。]{{1,12}})$"
    rf"|{_ZH_LEAD}我(?:现在|目前)?(?:是做|做)(?P<job2>[^，。]{{1,10}}?)的$"
    rf"|{_ZH_LEAD}我(?:现在|目前)?在(?P<org>[^，。]{{2,15}}?)(?:做|当|担任)(?P<job3>[^，。]{{1,10}})$"
)
_RE_ZH_EMPLOYER = re.compile(
    rf"{_ZH_LEAD}我(?:现在|目前|也)?在(?P<org>[^，。]{{2,15}}?)(?:工作|上班|任职|实习)(?:了)?$"
)
_ZH_NOT_EMPLOYERS = frozenset(["家里", "家", "公司", "单位", "这里", "那里", "外地", "这边", "那边", "家中"])
_RE_ZH_RETIRED = re.compile(rf"{_ZH_LEAD}我(?:已经|早就|刚)?退休了?$")
_RE_ZH_AGE = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}(?:今年|现在|已经|快|马上|刚)?(?P<age>\d{{1,3}}|[一二三四五六七八九十两]{{1,3}})周?岁(?:了|啦|啊)?$"
)


def _valid_name(name: str) -> bool:
    if not name or name.split()[0].lower() in _EN_NOT_NAMES:
        return False
    if _has_cjk(name):
        return 1 <= len(name) <= 5 and not _ZH_NOT_NAMES.search(name)
    return len(name.split()) <= 3


def _identity(attribute: str, value: str, content: str, confidence: float, reason: str, **extra) -> Candidate:
    fields = {"kind": "identity", "attribute": attribute, "value": value, **extra}
    return _profile(content, f"identity:{attribute}", value.lower(), True, fields, confidence, reason)


def _en_place(raw: str, clause: str) -> str | None:
    place = _EN_PLACE_CUT.sub("", raw).strip(" ,.!")
    if not place:
        return None
    words = place.split()
    first = words[1] if words[0].lower() == "the" and len(words) > 1 else words[0]
    if first.lower() in _EN_BAD_FIRST_WORDS or first.lower() in ("a", "an", "my", "our", "his", "her"):
        return None
    if not first[0].isupper() and clause != clause.lower():  # a typed place name is capitalised
        return None
    return place


def _en_identity(clause: str) -> list[Candidate]:
    out = []
    m = _RE_EN_NAME.search(clause) or _RE_EN_CALLED.search(clause) or _RE_EN_INTRO.search(clause)
    if m and _en_guard_ok(clause, m):
        name = m.group("name") or (m.group("name2") if m.re is _RE_EN_INTRO else "") or ""
        name = _EN_FILLER_TAIL.sub("", name).strip()
        if _valid_name(name):
            confidence = {_RE_EN_NAME: 0.95, _RE_EN_CALLED: 0.85}.get(m.re, 0.7)
            reason = {_RE_EN_NAME: "en.name", _RE_EN_CALLED: "en.call_me"}.get(m.re, "en.intro")
            out.append(_identity("name", name, f"Name is {name}", confidence, reason))
    m = _RE_EN_LIVE.search(clause)
    if m and _en_guard_ok(clause, m):
        place = _en_place(m.group("place"), clause)
        if place:
            moved = "moved" in m.group(0).lower() or "relocated" in m.group(0).lower()
            out.append(_identity("location", place, f"Lives in {place}", 0.85 if moved else 0.9, "en.location"))
    m = _RE_EN_FROM.search(clause)
    if m and _en_guard_ok(clause, m):
        place = _en_place(m.group("place"), clause)
        if place:
            out.append(_identity("hometown", place, f"Is from {place}", 0.85, "en.hometown"))
    m = _RE_EN_JOB.search(clause)
    if m and _en_guard_ok(clause, m):
        job = _SPACES.sub(" ", (m.group("job") or m.group("job2") or "")).strip()
        if job and job.split()[0].lower() not in _EN_BAD_FIRST_WORDS:
            article = "an" if job[0].lower() in "aeiou" else "a"
            verb = "Works as" if m.group("job2") else "Is"
            out.append(_identity("job", job, f"{verb} {article} {job}", 0.85, "en.job"))
            if m.group("org"):
                org = m.group("org")
                out.append(_identity("employer", org, f"Works at {org}", 0.85, "en.employer"))
    m = _RE_EN_EMPLOYER.search(clause)
    if m and _en_guard_ok(clause, m):
        org = _EN_PLACE_CUT.sub("", m.group("org")).strip(" ,.!")
        org = _EN_ARTICLE.sub("", org) if org.lower().startswith(("a ", "an ")) else org
        if org and org.split()[0].lower() not in _EN_NOT_EMPLOYERS and (org[0].isupper() or clause == clause.lower()):
            out.append(_identity("employer", org, f"Works at {org}", 0.85, "en.employer"))
    m = _RE_EN_RETIRED.search(clause)
    if m and _en_guard_ok(clause, m):
        out.append(_identity("job", "retired", "Is retired", 0.85, "en.retired"))
    m = _RE_EN_INDUSTRY.search(clause)
    if m and _en_guard_ok(clause, m):
        field_ = m.group("field")
        out.append(_identity("industry", field_, f"Works in {field_}", 0.8, "en.industry"))
    m = _RE_EN_AGE.search(clause)
    if m and _en_guard_ok(clause, m):
        age = int(m.group("age") or m.group("age2") or m.group("age3"))
        if 1 <= age <= 120:
            out.append(_identity("age", str(age), f"Is {age} years old", 0.85, "en.age", age=age))
    return out


def _zh_identity(clause: str) -> list[Candidate]:
    out = []
    m = _RE_ZH_NAME.match(clause)
    if m:
        name = _ZH_NAME_TAIL.sub("", _ZH_TAIL.sub("", m.group("name"))).strip()
        if _valid_name(name):
            out.append(_identity("name", name, f"名字叫{name}", 0.9, "zh.name"))
    m = _RE_ZH_LIVE.match(clause)
    if m and _pre_ok(m):
        place = _ZH_PLACE_TAIL.sub("", _ZH_TAIL.sub("", m.group("place") or m.group("place2") or ""))
        if len(place) >= 2 and not _ZH_BAD_START.match(place):
            out.append(_identity("location", place, f"住在{place}", 0.9, "zh.location"))
    m = _RE_ZH_FROM.match(clause)
    if m and clause.endswith("人") or m and "老家" in clause or m and "来自" in clause:
        place = _ZH_TAIL.sub("", m.group("place"))
        if len(place) >= 2 and not _ZH_JOB_SUFFIX.search(place):
            out.append(_identity("hometown", place, f"来自{place}", 0.85, "zh.hometown"))
    m = _RE_ZH_JOB.match(clause)
    if m:
        job = _ZH_TAIL.sub("", m.group("job") or m.group("job2") or m.group("job3") or "")
        if m.group("job2"):
            out.append(_identity("job", job, f"是做{job}的", 0.8, "zh.job"))
        elif job and _ZH_JOB_SUFFIX.search(job) and not _ZH_BAD_START.match(job):
            out.append(_identity("job", job, f"是{job}", 0.85, "zh.job"))
        if m.group("org") and job:
            out.append(_identity("employer", m.group("org"), f"在{m.group('org')}工作", 0.85, "zh.employer"))
    m = _RE_ZH_EMPLOYER.match(clause)
    if m and m.group("org") not in _ZH_NOT_EMPLOYERS and not _ZH_BAD_START.match(m.group("org")):
        org = m.group("org")
        out.append(_identity("employer", org, f"在{org}工作", 0.85, "zh.employer"))
    if _RE_ZH_RETIRED.match(clause):
        out.append(_identity("job", "retired", "已退休", 0.85, "zh.retired"))
    m = _RE_ZH_AGE.match(clause)
    if m and _pre_ok(m):
        age = _number(m.group("age"))
        if age and 1 <= age <= 120:
            out.append(_identity("age", str(age), f"今年{age}岁", 0.85, "zh.age", age=age))
    return out


# Relations: "my wife Anna", "my dog is called Max", "我女儿叫小雨".
_EN_RELATIONS = {
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
_EN_REL = "|".join(sorted((k.replace(" ", r"\s+") for k in _EN_RELATIONS), key=len, reverse=True))
_EN_REL_MOD = r"(?P<mod>(?:older|elder|big|younger|little|baby|oldest|youngest|eldest|new|\d+[- ]year[- ]old)\s+)?"
_RE_EN_RELATION = re.compile(
    rf"\bmy\s+{_EN_REL_MOD}(?P<rel>{_EN_REL})(?:'s\s+name\s+is|\s+is\s+(?:called|named)|'s\s+(?:called|named)"
    rf"|\s+(?:is\s+)?called|\s+named|\s+goes\s+by)\s+{_EN_NAME}"
    rf"|\bi\s+have\s+(?:an?|one|two|three|\d+)?\s*{_EN_REL_MOD.replace('mod', 'mod2')}(?P<rel2>{_EN_REL})s?\s+"
    rf"(?:called|named)\s+{_EN_NAME.replace('name', 'name2')}",
    _I,
)
_RE_EN_RELATION_BARE = re.compile(
    rf"\bmy\s+{_EN_REL_MOD}(?P<rel>{_EN_REL}),?\s+(?:is\s+)?{_EN_CAPITALISED_NAME}\b(?!\s*(?:'s|&))", _I
)
_RE_EN_RELATION_JOB = re.compile(
    rf"\bmy\s+{_EN_REL_MOD}(?P<rel>{_EN_REL})\s+is\s+(?:an?\s+)(?P<job>(?:[\w-]+\s+){{0,2}}?(?:{_PROFESSIONS}))\b", _I
)
_ZH_RELATIONS = {
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
_ZH_REL = "|".join(sorted(_ZH_RELATIONS, key=len, reverse=True))
_RE_ZH_RELATION = re.compile(
    rf"{_ZH_LEAD}我(?:的|家|家的)?(?P<rel>{_ZH_REL})(?:的名字|名字)?(?P<verb>叫做?|名叫|是)(?P<name>[^，。]+)$"
    rf"|{_ZH_LEAD}我(?:家)?有(?:一个|一只|一条|一位|个|只|条|位|两个|两只)?(?P<rel2>{_ZH_REL})(?:叫做?|名叫)(?P<name2>[^，。]+)$"
)


def _relation_candidate(relation: str, name: str, content: str, confidence: float, reason: str) -> Candidate:
    fields = {"kind": "relation", "relation": relation, "name": name}
    return _profile(content, f"relation:{relation}", name.lower(), True, fields, confidence, reason)


def _en_relation_key(rel: str, mod: str | None) -> str:
    rel = _SPACES.sub(" ", rel.lower())
    key = _EN_RELATIONS.get(rel) or rel
    mod = (mod or "").strip().lower()
    if key in ("brother", "sister") and mod:
        key = ("older " if mod in ("older", "elder", "big", "oldest", "eldest") else "younger ") + key
    return key


def _en_relations(clause: str) -> list[Candidate]:
    m = _RE_EN_RELATION.search(clause)
    if m and _en_guard_ok(clause, m):
        name = _EN_FILLER_TAIL.sub("", m.group("name") or m.group("name2")).strip()
        key = _en_relation_key(m.group("rel") or m.group("rel2"), m.group("mod") or m.group("mod2"))
        if _valid_name(name):
            return [_relation_candidate(key, name, f"{_cap(key)}'s name is {name}", 0.9, "en.relation")]
    m = _RE_EN_RELATION_JOB.search(clause)
    if m and _en_guard_ok(clause, m):
        key = _en_relation_key(m.group("rel"), m.group("mod"))
        job = _SPACES.sub(" ", m.group("job"))
        article = "an" if job[0].lower() in "aeiou" else "a"
        fields = {"kind": "relation", "relation": key, "job": job.lower()}
        return [
            _profile(
                f"{_cap(key)} is {article} {job}",
                f"relation:{key}:job",
                job.lower(),
                True,
                fields,
                0.8,
                "en.relation_job",
            )
        ]
    m = _RE_EN_RELATION_BARE.search(clause)
    if m and _en_guard_ok(clause, m):
        name = m.group("name")
        key = _en_relation_key(m.group("rel"), m.group("mod"))
        if _valid_name(name):
            return [_relation_candidate(key, name, f"{_cap(key)}'s name is {name}", 0.75, "en.relation")]
    return []


def _zh_relations(clause: str) -> list[Candidate]:
    m = _RE_ZH_RELATION.match(clause)
    if not m:
        return []
    word = m.group("rel") or m.group("rel2")
    key = _ZH_RELATIONS[word]
    text = _ZH_NAME_TAIL.sub("", _ZH_TAIL.sub("", m.group("name") or m.group("name2")))
    if m.group("verb") == "是":
        if _ZH_JOB_SUFFIX.search(text):
            fields = {"kind": "relation", "relation": key, "job": text}
            return [_profile(f"{word}是{text}", f"relation:{key}:job", text, True, fields, 0.8, "zh.relation_job")]
        if not (2 <= len(text) <= 3 and _has_cjk(text)) or text.endswith(("人", "的")) or _ZH_BAD_START.match(text):
            return []
        confidence = 0.7
    else:
        confidence = 0.9
    if not _valid_name(text):
        return []
    return [_relation_candidate(key, text, f"{word}叫{text}", confidence, "zh.relation")]


# Constraints: budget, allergies, diet.
_RE_EN_BUDGET = re.compile(
    rf"\bbudget\b(?P<gap>[^.?!\d]{{0,40}}?)(?P<amount>{_CURRENCY_AMOUNT})"
    rf"|\bbudget\s*(?:is|of|:|=|around|about|is\s+around|is\s+about|is\s+roughly)?\s*(?P<bare>(?:{_NUM})\s?(?:k\b)?)",
    _I,
)
_RE_EN_LIMIT = re.compile(
    r"\b(?:(?:spend|pay|cost|costs|afford|price)\b[^.?!\d]{0,30}?\b(?P<lim>no\s+more\s+than|not\s+more\s+than"
    r"|at\s+most|up\s+to|under|less\s+than|max(?:imum)?(?:\s+of)?|below)|(?P<lim2>no\s+more\s+than|not\s+more\s+than"
    rf"|at\s+most))\s+(?P<amount>{_CURRENCY_AMOUNT})",
    _I,
)
_EN_MAX_WORDS = re.compile(r"under|below|at most|no more than|not more than|less than|up to|max", _I)
_EN_APPROX_WORDS = re.compile(r"around|about|roughly|approximately|~", _I)
_RE_ZH_BUDGET = re.compile(
    rf"预算(?P<gap>[^，。？?\d零一二三四五六七八九十两]{{0,8}}?)(?P<amount>{_CURRENCY_AMOUNT}|(?:{_NUM})\s?[kKwW]?)(?P<tail>左右|以内|以下|之内|上下)?"
    rf"|(?P<lim>不超过|不要超过|别超过|不能超过|最多|顶多|控制在|不高于)(?P<amount2>{_CURRENCY_AMOUNT})(?P<tail2>以内|以下|之内|左右)?"
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
_EN_NOT_FOOD = frozenset("anything that this it now much more late right today tonight before after any".split())
_RE_ZH_ALLERGY = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}(?:也|还|都|有点|比较)?对(?P<x>[^，。]{{1,12}}?)(?:严重|有点|有些|比较|非常|很|也|都)*过敏"
    rf"|{_ZH_LEAD}我(?:有)?(?P<x2>[^，。对]{{1,8}}?)过敏(?:症)?"
)
_RE_ZH_DIET = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}{_ZH_ADV}(?P<verb>不吃|不能吃|吃不了|不敢吃|不喝|不能喝|喝不了|忌口|戒了)(?P<x>[^，。]{{1,12}})$"
)
_RE_ZH_DIET_KIND = re.compile(
    rf"{_ZH_LEAD}{_ZH_SUBJ}{_ZH_ADV}(?:是)?(?:一个|个|一名)?(?P<diet>吃素|素食者|素食主义者|全素|纯素|清真|乳糖不耐受?|糖尿病人?|有糖尿病)"
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
    shown = _SPACES.sub(" ", shown).strip()
    period = _BUDGET_PERIOD.match(after)  # "$200 per night", "500元/晚"
    if period:
        shown += f" {period.group(0).strip()}" if period.group("en") else period.group(0).strip()
    amount, currency = _parse_amount(shown)
    currency = currency or ("CNY" if zh else "")  # "预算1.5万": yuan unless said otherwise
    value, parsed = _amount_value(amount, currency, shown)
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
    return _profile(content, "budget", value, True, fields, 0.9, reason)


def _en_constraints(clause: str) -> list[Candidate]:
    out = []
    m = _RE_EN_BUDGET.search(clause) or _RE_EN_LIMIT.search(clause)
    if m and _en_guard_ok(clause, m) or m and m.re is _RE_EN_LIMIT:
        if m.re is _RE_EN_BUDGET:
            gap = m.group("gap") or ""
            shown = m.group("amount") or m.group("bare")
            limit = "max" if _EN_MAX_WORDS.search(gap) else "approx" if _EN_APPROX_WORDS.search(gap) else ""
        else:
            shown, limit = m.group("amount"), "max"
        out.append(_budget_candidate(shown, limit, False, "en.budget", clause[m.end() :]))
    m = _RE_EN_ALLERGY.search(clause)
    if m and _en_guard_ok(clause, m):
        raw = m.group("x") or m.group("x2") or m.group("x3")
        for item in _ITEM_SPLIT.split(_EN_FILLER_TAIL.sub("", _EN_OBJ_CUT.sub("", raw))):
            key = _norm_key(_EN_ARTICLE.sub("", item))
            if key and key.split()[0] not in _EN_BAD_FIRST_WORDS and len(key.split()) <= 4:
                fields = {"kind": "allergy", "allergen": key}
                out.append(
                    _profile(
                        f"Allergic to {item.strip()}", f"allergy:{key}", "allergic", True, fields, 0.95, "en.allergy"
                    )
                )
    m = _RE_EN_DIET.search(clause)
    if m and not _HYPOTHETICAL_EN.search(clause, 0, m.start()):
        verb = _SPACES.sub(" ", m.group("verb").lower())
        what = m.group("what").lower()
        for item in _ITEM_SPLIT.split(_EN_FILLER_TAIL.sub("", _EN_OBJ_CUT.sub("", m.group("x")))):
            key = _norm_key(_EN_ARTICLE.sub("", item))
            if (
                not key
                or key.split()[0] in _EN_NOT_FOOD
                or key.split()[0] in _EN_BAD_FIRST_WORDS
                or len(key.split()) > 4
            ):
                continue
            phrase = _EN_DIET_VERBS[verb]
            verb_form = what if phrase in ("Can't", "Won't", "Doesn't") else what + "s"
            fields = {"kind": "diet", "avoid": key}
            out.append(
                _profile(f"{phrase} {verb_form} {item.strip()}", f"diet:{key}", "avoid", True, fields, 0.85, "en.diet")
            )
    m = _RE_EN_DIET_KIND.search(clause)
    if m and _en_guard_ok(clause, m):
        diet = _SPACES.sub(" ", m.group("diet").lower()).replace("-", " ")
        out.append(
            _profile(f"Is {diet}", f"diet:{diet}", "yes", True, {"kind": "diet", "diet": diet}, 0.9, "en.diet_kind")
        )
    return out


def _zh_constraints(clause: str) -> list[Candidate]:
    out = []
    m = _RE_ZH_BUDGET.search(clause)
    if m and not _HYPOTHETICAL_ZH.search(clause, 0, m.start()):
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
    if m and _pre_ok(m):
        for item in _ITEM_SPLIT.split(m.group("x") or m.group("x2")):
            item = _ZH_TAIL.sub("", item).strip()
            if item and not _ZH_BAD_START.match(item) and item not in ("点", "些", "有点", "一点"):
                fields = {"kind": "allergy", "allergen": item}
                out.append(
                    _profile(
                        f"对{item}过敏", f"allergy:{_norm_key(item)}", "allergic", True, fields, 0.95, "zh.allergy"
                    )
                )
    m = _RE_ZH_DIET.match(clause)
    if m and _pre_ok(m):
        verb = m.group("verb")
        for item in _ITEM_SPLIT.split(m.group("x")):
            item = _ZH_CORE_TAIL.sub("", _ZH_TAIL.sub("", item)).strip()
            if item and not _ZH_BAD_START.match(item):
                fields = {"kind": "diet", "avoid": item}
                out.append(_profile(f"{verb}{item}", f"diet:{_norm_key(item)}", "avoid", True, fields, 0.85, "zh.diet"))
    m = _RE_ZH_DIET_KIND.match(clause)
    if m and _pre_ok(m):
        diet = _ZH_DIETS.get(m.group("diet"), m.group("diet"))
        fields = {"kind": "diet", "diet": diet}
        out.append(_profile(m.group("diet"), f"diet:{diet}", "yes", True, fields, 0.9, "zh.diet_kind"))
    return out


def _profile_candidates(clause: str) -> list[Candidate]:
    out = []
    padded = " " + clause.lower()
    if not padded.isascii() and _PROFILE_ZH_KEYS(padded):
        found = _zh_preference(clause)
        if found:
            out.append(found)
        out += _zh_identity(clause) + _zh_relations(clause) + _zh_constraints(clause)
    if (len(clause) < 40 or _PROFILE_EN_KEYS(padded)) and _LATIN_LETTERS.search(clause) and not _is_zh(clause):
        found = _en_preference(clause)
        if found:
            out.append(found)
        out += _en_identity(clause) + _en_relations(clause) + _en_constraints(clause)
    return out


# -- Task rules ---------------------------------------------------------------------------------------------
_EN_DONE_PARTICIPLES = (
    r"done|finished|completed|complete|ready|working|set\s+up|installed|configured|deployed|fixed|resolved|merged"
    r"|sorted(?:\s+out)?|up\s+and\s+running|paired|connected|built|created|implemented|booked|ordered|sent|submitted"
    r"|updated|migrated|tested|published|released|shipped|approved|signed|paid|packed|cleaned|written|uploaded"
    r"|enabled|solved|finalized|finalised|confirmed|scheduled|reserved|purchased|bought"
)
# "<thing> is installed": the verb is found first and the thing is read from the words before it (a pattern
# that captures the words first would try every position of the clause).
_RE_EN_DONE_STATE = re.compile(
    r"(?:\s+(?:is|are|has\s+been|have\s+been|was|were|got)|'s)\s+"
    r"(?:now\s+|all\s+|finally\s+|already\s+|fully\s+|successfully\s+|properly\s+|officially\s+)*"
    rf"(?P<part>{_EN_DONE_PARTICIPLES})\b(?P<after>\s+\w+)?"
    r"|\s+(?:works|work|worked|is\s+working|are\s+working)\s+now\b",
    _I,
)
_RE_EN_DONE_ELLIPTIC = re.compile(
    r"^(?P<item>(?:[\w'./+#-]+\s+){0,3}[\w./+#-]+)\s+(?P<part>installed|configured|set\s+up|deployed|fixed|resolved"
    r"|merged|paired|connected|built|created|implemented|booked|ordered|sent|submitted|updated|migrated|tested|published"
    r"|released|shipped|done|finished|completed|solved)(?:\s+(?:too|as\s+well|now|already|successfully))?$",
    _I,
)
_RE_EN_DONE_ACTION = re.compile(
    r"\b(?:i|we)(?:'ve|\s+have)?\s+(?:just\s+|finally\s+|already\s+|now\s+|successfully\s+|also\s+)*"
    r"(?P<verb>finished|completed|set\s+up|installed|configured|deployed|fixed|built|created|wrote|written|implemented"
    r"|added|connected|paired|booked|bought|ordered|sent|submitted|updated|migrated|resolved|tested|published|released"
    r"|shipped|cleaned\s+up|packed|paid|uploaded|enabled|done|solved|finalized|finalised|reserved|purchased)\s+"
    r"(?P<item>.+)",
    _I,
)
_RE_EN_DONE_WITH = re.compile(
    r"\b(?:i'm|i\s+am|we're|we\s+are)\s+(?:now\s+|finally\s+|all\s+)?(?:done|finished)\s+with\s+(?P<item>.+)"
    r"|^(?:(?:done|finished|completed)\s*[:：]|✅|✔️?|☑️?|\[x\])\s*(?P<item2>.+)",
    _I,
)
_EN_PARTICIPLE = {"wrote": "written", "done": "done", "set up": "set up", "cleaned up": "cleaned up"}
_EN_CONDITIONAL = re.compile(
    r"\b(?:if|once|when|whenever|after|before|until|unless|whether|make\s+sure|ensure|check|verify|should|will|would"
    r"|can|could|need|needs|must|not|never|hope|hopefully)\b|n't\b",
    _I,
)
_RE_EN_NEXT = re.compile(
    r"\b(?:the\s+)?next\s+(?:step|steps|thing|task)\s*(?:is|are|will\s+be|would\s+be|:|-)\s*(?:to\s+)?(?P<item>.+)"
    r"|^(?:todo|to-do|remaining|next\s+up|next)\s*[:：]\s*(?P<item2>.+)"
    r"|^next,\s*(?P<item3>.+)"
    r"|\b(?:next|then|after\s+that|afterwards|later|tomorrow),?\s+(?:i'll|i\s+will|we'll|we\s+will|i'm\s+going\s+to"
    r"|we're\s+going\s+to|i\s+need\s+to|we\s+need\s+to|i\s+have\s+to|we\s+have\s+to|i\s+should|we\s+should|let's"
    r"|you\s+(?:should|need\s+to|can|will)|you'll)\s+(?P<item4>.+)"
    r"|\b(?:i|we)\s+(?:still|also)\s+(?:need|have|got)\s+to\s+(?P<item5>.+)",
    _I,
)
_RE_EN_BLOCKER = re.compile(
    r"\b(?:blocked|stuck|held\s+up|hung\s+up)\s+(?:on|by|at|with)\s+(?P<item>.+)"
    r"|\b(?:i'm|i\s+am|we're|we\s+are|still)\s+(?:still\s+)?waiting\s+(?:on|for)\s+(?P<wait>.+)"
    r"|\b(?:i|we)\s+(?:can't|cannot|couldn't)\s+get\s+(?P<get>.+?)\s+to\s+(?P<get_verb>work|connect|start|load|pair)"
    r"|^(?:error|problem|issue|blocker)\s*[:：]\s*(?P<error>.+)"
    r"|\s+(?:still\s+)?(?P<fail>(?:doesn't|does\s+not|isn't|is\s+not|won't|will\s+not|can't|cannot|keeps?)\s+"
    r"(?:work|working|connect|connecting|start|starting|load|loading|respond|responding|pair|pairing|boot|booting"
    r"|failing|crashing|turn\s+on|show\s+up))\b",
    _I,
)
_RE_EN_PROGRESS = re.compile(
    r"\b(?:progress|completion)\s*(?:is|:|at|=|now|about|around|roughly|\s)*\s*(?P<pct>\d{1,3})\s*%"
    r"|(?P<pct2>\d{1,3})\s*%\s*(?:done|complete|completed|finished|through|of\s+the\s+way)"
    r"|\bstep\s+(?P<a>\d{1,2})\s*(?:of|/|out\s+of)\s*(?P<b>\d{1,2})\b",
    _I,
)
_RE_EN_STAGE = re.compile(
    r"\b(?:current\s+)?(?:stage|phase)\s*(?:is|:|=)\s*(?:now\s+)?(?P<stage>.+)"
    r"|\b(?:we're|we\s+are|i'm|i\s+am)\s+(?:now\s+)?(?:in|at|on|moving\s+to|entering)\s+the\s+"
    r"(?P<stage2>[\w\s-]{2,40}?)\s+(?:stage|phase)\b"
    r"|\b(?:moving|moved)\s+(?:on\s+)?to\s+the\s+(?P<stage3>[\w\s-]{2,40}?)\s+(?:stage|phase)\b",
    _I,
)
_RE_EN_GOAL = re.compile(
    r"\b(?:i\s+(?:really\s+)?(?:want|need|would\s+like|am\s+trying|plan|am\s+planning|hope|intend)\s+to"
    r"|i'd\s+like\s+to|i'm\s+trying\s+to|i'm\s+planning\s+to|i'm\s+working\s+on|i\s+am\s+working\s+on"
    r"|(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?help\s+me(?:\s+to|\s+with)?)\s+(?P<goal>.+)",
    _I,
)
_RE_EN_GOAL_EXPLICIT = re.compile(
    r"\b(?:my|our|the)\s+(?:main\s+|overall\s+|new\s+)?(?:goal|task|objective|aim)\s+(?:is|will\s+be|:)\s*(?:to\s+)?"
    r"(?P<goal>.+)|^(?:goal|task|new\s+goal|new\s+task)\s*:\s*(?P<goal2>.+)",
    _I,
)
_EN_ITEM_LEAD = re.compile(
    r"^(?:(?:ok|okay|so|well|now|and|also|great|cool|good\s+news|yay|finally|alright|then|btw|good|nice|awesome"
    r"|perfect|yes|yeah|the|a|an|my|our|your)\b[\s,!:-]*|update\s*:\s*)+",
    _I,
)
_EN_ITEM_TAIL = re.compile(r"(?:\s+(?:for\s+(?:you|me|now|us)|already|successfully|as\s+well|today|now|yet))+$", _I)
_EN_DETERMINER = re.compile(r"\b(?:the|my|our|your|their|his|her|this|that)\s+", _I)
_EN_GOAL_BAD = re.compile(r"^(?:know|ask|say|tell|see|understand|check|confirm|be\s+sure|make\s+sure\s+you)\b", _I)

_ZH_FILLER_LEAD = "(?:(?:好的|好|嗯+|ok|OK|太好了|终于|现在|目前|我们|我|已经|总算|刚刚?|今天)[，,\\s]*)*"
_RE_ZH_DONE_BEFORE = re.compile(
    rf"^{_ZH_FILLER_LEAD}(?P<item>[^，。]{{1,20}}?)(?:已经|已|都|也|终于|总算|全部|基本|刚刚?)*"
    r"(?P<verb>(?:配置|安装|部署|设置|修复|调试|配对|连接|搭建|测试|上线|升级|更新|迁移|提交|发布|处理|解决|预订|预定|购买|付款)?"
    r"(?:完成|完毕|搞定|成功|弄好|做完|装好|配好|修好|调好|连好|做好|写好|订好|买好|搞好|弄完|写完|解决))了?(?:啦|了|呢|哦)?$"
)
_RE_ZH_DONE_AFTER = re.compile(
    rf"^{_ZH_FILLER_LEAD}(?:已经|已|终于|刚刚?|总算)?(?P<verb>完成了?|搞定了?|做完了?|弄好了?|弄完了?|配置好了?|装好了?|写完了?|修好了?)"
    r"(?P<item>[^，。]{2,20})$"
)
_RE_ZH_NEXT = re.compile(
    r"(?:下一步|接下来|下面要|之后要|然后要|还需要|还得|待办[:：]|TODO[:：])(?:是|就是|要|需要|得|打算|准备|我们|我|你|再)*[:：]?\s*"
    r"(?P<item>[^，。]{2,30})"
)
_RE_ZH_BLOCKER = re.compile(
    r"卡在(?:了)?(?P<item>[^，。]{1,20})|被(?P<item2>[^，。]{1,15}?)卡住了?|在等(?P<item3>[^，。]{2,20})"
    r"|^(?P<fail>[^，。]{1,15}?(?:一直|还是|总是|老是)?(?:不工作|不能用|用不了|连不上|打不开|启动不了|不响应|没反应|报错|出错|失败|有问题|坏了))了?$"
    r"|^(?:问题|错误|报错)(?:是|：|:)(?P<item4>[^，。]{2,30})"
)
_RE_ZH_PROGRESS = re.compile(
    r"(?:进度|完成度)(?:是|为|已经|已|到了?|达到|大概|大约|约|：|:|\s)*(?P<pct>\d{1,3})\s*[%％]"
    r"|(?:完成了?|做了|搞定了?)(?:大约|约|大概)?\s*(?P<pct2>\d{1,3})\s*[%％]"
    r"|第\s*(?P<a>\d{1,2}|[一二三四五六七八九十]{1,3})\s*步[^。]{0,4}?(?:共|一共|总共)\s*(?P<b>\d{1,2}|[一二三四五六七八九十]{1,3})\s*步"
    r"|(?P<a2>\d{1,2})\s*/\s*(?P<b2>\d{1,2})\s*步"
)
_RE_ZH_STAGE = re.compile(
    r"(?:当前|目前|现在)?(?:阶段|状态)(?:是|为|：|:)\s*(?P<stage>[^，。]{2,30})"
    r"|(?:进入|到了|到达|来到)(?:了)?(?P<stage2>[^，。]{2,20}?)阶段"
    r"|(?:现在|目前)?(?:在|处于)(?P<stage3>[^，。]{2,20}?)阶段"
)
_RE_ZH_GOAL = re.compile(
    rf"{_ZH_LEAD}(?:你)?(?:能不能|可不可以|可以|能否|请|麻烦)?(?:请)?(?:帮我们|帮我|帮忙)(?P<goal>[^。？?]{{2,60}})"
    rf"|{_ZH_LEAD}我(?:们)?(?:想要|想|要|打算|准备|需要|计划)(?P<goal2>[^。？?]{{2,60}})"
)
_RE_ZH_GOAL_EXPLICIT = re.compile(r"(?:我的|我们的)?(?:目标|任务)(?:是|：|:)(?P<goal>[^。？?]{2,60})")
_ZH_GOAL_BAD = re.compile("^(?:想|问|知道|说|看看|了解|确认|去厕所|睡|休息)")
_ZH_GOAL_TAIL = re.compile("(?:好吗|可以吗|行吗|吗|吧|呢|谢谢|哈|啊|呀|。|！|!)+$")
_ZH_STAGE_DONE = re.compile("(?:完成|完毕|搞定|好了|成功|结束)$")
_EN_STAGE_DONE = re.compile(rf"(?:^|\s)(?:{_EN_DONE_PARTICIPLES})$", _I)
_STAGE_PLACEHOLDERS = frozenset(
    "pending todo to do in progress in_progress started running waiting new open none null unknown active "
    "进行中 待办 未开始 进行 处理中 等待".split(" ")
)
_STATE_STAGE_KEYS = ("stage", "task_stage", "status")
_STATE_GOAL_KEYS = ("goal", "task")
_STATE_DONE_WORDS = frozenset(["done", "completed", "complete", "finished", "success", "完成", "已完成", "结束"])

_STOPWORDS = frozenset(
    "the a an to my our your is are was were be been has have had it of for in on at with and now up its this that "
    "all i we you".split()
)
_WORD = re.compile(rf"[a-z0-9]+|[{_CJK}]+")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:
        word = word[:-1]
    return word


def _item_tokens(text: str) -> frozenset:
    """Words (stemmed) and CJK character pairs: "pair the lights" ≈ "lights paired", "配置网络" ≈ "网络配置"."""
    tokens = set()
    for word in _WORD.findall(text.lower()):
        if _CJK_CHAR.match(word):
            tokens.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
        elif word not in _STOPWORDS:
            tokens.add(_stem(word))
    return frozenset(tokens)


def _same_item(a: frozenset, b: frozenset) -> bool:
    if not a or not b:
        return False
    return len(a & b) / min(len(a), len(b)) >= 0.6


class _TaskSummary:
    """The running summary of one session's task, merged one signal at a time."""

    DONE_LIMIT = 8
    NEXT_LIMIT = 5
    BLOCKER_LIMIT = 5

    def __init__(self, previous: dict):
        # The previous fields may come from the LLM extractor or an API edit: accept loose shapes.
        self.goal = _scalar(previous.get("goal"))
        self.stage = _scalar(previous.get("stage"))
        self.progress = _pct(previous.get("progress"))
        self.done = _str_list(previous.get("done"))
        self.next = _str_list(previous.get("next"))
        self.blockers = _str_list(previous.get("blockers"))

    def add_done(self, item: str) -> None:
        tokens = _item_tokens(item)
        if not any(_same_item(_item_tokens(d), tokens) for d in self.done):
            self.done.append(item)
        self.next = [n for n in self.next if not _same_item(_item_tokens(n), tokens)]
        self.blockers = [b for b in self.blockers if not _same_item(_item_tokens(b), tokens)]

    def add_next(self, item: str) -> None:
        tokens = _item_tokens(item)
        if any(_same_item(_item_tokens(x), tokens) for x in self.done + self.next):
            return
        self.next.append(item)

    def add_blocker(self, item: str) -> None:
        tokens = _item_tokens(item)
        if not any(_same_item(_item_tokens(x), tokens) for x in self.blockers):
            self.blockers.append(item)

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        if _ZH_STAGE_DONE.search(stage) or _EN_STAGE_DONE.search(stage):
            self.add_done(stage)

    def fields(self, slot: str) -> dict:
        return {
            "slot": slot,
            "goal": self.goal,
            "stage": self.stage,
            "progress": self.progress,
            "done": self.done[-self.DONE_LIMIT :],
            "next": self.next[-self.NEXT_LIMIT :],
            "blockers": self.blockers[-self.BLOCKER_LIMIT :],
        }


def _task_content(fields: dict, zh: bool) -> str:
    progress = fields["progress"]
    parts = []
    if zh:
        if fields["goal"]:
            parts.append(f"任务：{fields['goal']}。")
        if fields["stage"]:
            parts.append(f"阶段：{fields['stage']}" + (f"（进度{progress}%）" if progress is not None else "") + "。")
        elif progress is not None:
            parts.append(f"进度：{progress}%。")
        for label, key in (("已完成", "done"), ("下一步", "next"), ("阻碍", "blockers")):
            if fields[key]:
                parts.append(f"{label}：{'；'.join(fields[key])}。")
        return "".join(parts)
    if fields["goal"]:
        parts.append(f"Task: {fields['goal']}.")
    if fields["stage"]:
        parts.append(f"Stage: {fields['stage']}" + (f" ({progress}%)" if progress is not None else "") + ".")
    elif progress is not None:
        parts.append(f"Progress: {progress}%.")
    for label, key in (("Done", "done"), ("Next", "next"), ("Blockers", "blockers")):
        if fields[key]:
            parts.append(f"{label}: {'; '.join(fields[key])}.")
    return " ".join(parts)


def _sentence_case(item: str, clause: str) -> str:
    """Lower-case an item that starts its clause ("Network configured."), but keep "API", "Wi-Fi"."""
    if clause.startswith(item) and item[:1].isupper() and item[1:2].islower():
        return item[0].lower() + item[1:]
    return item


def _words_before(text: str, end: int, count: int) -> str:
    return " ".join(text[max(0, end - 80) : end].split()[-count:])


_EN_ITEM_CUT = re.compile(
    r"\s+(?:before|after|until|once|when|while|so\s+that|in\s+order\s+to|instead\s+of|rather\s+than)\b.*$", _I
)


def _en_item(raw: str, *, after_determiner: bool = False) -> str | None:
    text = _EN_FILLER_TAIL.sub("", _EN_ITEM_CUT.sub("", _EN_OBJ_CUT.sub("", raw))).strip(" ,.!:")
    text = _EN_ITEM_TAIL.sub("", text)
    if after_determiner:
        ends = [m.end() for m in _EN_DETERMINER.finditer(text)]
        if ends:
            text = text[ends[-1] :]
    text = _EN_ITEM_LEAD.sub("", text).strip(" ,.!:")
    words = text.split()
    if not words or words[0].lower() in _EN_BAD_FIRST_WORDS or words[0].lower() in ("i", "i'm", "we", "we're"):
        return None
    if len(words) > 10:
        text = " ".join(words[:10])
    return text


_ZH_ITEM_LEAD = re.compile("^(?:我们|我|你|会|要|就|再|将|先|得|需要|一下|了|把)+")


def _zh_item(raw: str) -> str | None:
    text = _ZH_GOAL_TAIL.sub("", _ZH_TAIL.sub("", raw)).strip()
    text = _ZH_ITEM_LEAD.sub("", text)
    if len(text) < 2 or _ZH_BAD_START.match(text):
        return None
    return text[:30]


def _pct(value) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = value * 100 if isinstance(value, float) and 0 < value <= 1 else value
    else:
        m = _AMOUNT_NUMBER.search(str(value))
        if not m:
            return None
        number = float(m.group(0).replace(",", ""))
    return max(0, min(100, round(number)))


def _step_pct(a: str, b: str) -> int | None:
    first, total = _number(a), _number(b)
    if not first or not total or first > total:
        return None
    return round(100 * first / total)


# Each family of task rules runs only on clauses holding one of its words; a message is read at all only when
# it holds a word of some family.
_TASK_WORDS = {
    "goal": (
        "want|need|would like|'d like|trying|plan|hope|intend|working on|help|goal|task|objective|aim",
        "帮我|帮忙|我想|我要|我们想|我们要|打算|准备|需要|计划|目标|任务",
    ),
    "done": (
        "done|finished|complete|ready|working|set up|installed|configured|deployed|fixed|resolved|merged|sorted"
        "|up and running|paired|connected|built|created|implemented|booked|ordered|sent|submitted|updated|migrated"
        "|tested|published|released|shipped|approved|signed|paid|packed|cleaned|written|wrote|uploaded|enabled|solved"
        "|finaliz|finalis|confirmed|scheduled|reserved|purchased|bought|added|works|worked",
        "✅|✔|☑|[x]|完成|完毕|搞定|成功|弄好|做完|装好|配好|修好|调好|连好|做好|写好|订好|买好|搞好|弄完|写完|解决",
    ),
    "next": (
        "next|todo|to-do|remaining|then|after that|afterwards|later|tomorrow|still|also",
        "下一步|接下来|下面要|之后要|然后要|还需要|还得|待办|todo",
    ),
    "blocker": (
        "blocked|stuck|held up|hung up|waiting|can't|cannot|couldn't|error|problem|issue|blocker|doesn't|does not"
        "|isn't|is not|won't|will not|keep",
        "卡在|卡住|被|在等|不工作|不能用|用不了|连不上|打不开|启动不了|不响应|没反应|报错|出错|失败|有问题|坏了|问题|错误",
    ),
    "progress": ("progress|completion|step", "%|％|进度|完成度|步"),
    "stage": ("stage|phase", "阶段|状态"),
}
_TASK_GATES = {family: _Keywords(en.split("|"), zh.split("|")) for family, (en, zh) in _TASK_WORDS.items()}
_TASK_KEYS = _Keywords(*(words.split("|") for pair in _TASK_WORDS.values() for words in pair))


def _scan_task_clause(clause: str, question: bool, role: str, summary: _TaskSummary, *, goal_seen: bool) -> bool:
    """Apply one clause's task signals to the summary; True when it held any."""
    padded = " " + clause.lower()
    zh = not padded.isascii() and _has_cjk(clause)
    found = False
    if role == "user" and _TASK_GATES["goal"](padded):
        found = (_zh_goal if zh else _en_goal)(clause, question, summary, goal_seen)
    if question:
        return found
    families = (
        ("done", _zh_done, _en_done),
        ("next", _zh_next, _en_next),
        ("blocker", _zh_blocker, _en_blocker),
        ("stage", _zh_stage, _en_stage),
    )
    for family, chinese, english in families:
        if _TASK_GATES[family](padded) and (chinese if zh else english)(clause, summary):
            found = True
    return found


def _scan_task_sentence(sentence: str, summary: _TaskSummary) -> bool:
    """Progress is read from whole sentences: "第2步，共4步" spans two clauses."""
    if not _TASK_GATES["progress"](" " + sentence.lower()):
        return False
    if _has_cjk(sentence):
        return _progress(_RE_ZH_PROGRESS.search(sentence), summary)
    return _progress(_RE_EN_PROGRESS.search(sentence), summary)


def _zh_goal(clause: str, question: bool, summary: _TaskSummary, goal_seen: bool) -> bool:
    m = _RE_ZH_GOAL_EXPLICIT.search(clause)
    if m and not question:
        goal = _zh_item(m.group("goal"))
        if goal:
            summary.goal = goal
            return True
    m = _RE_ZH_GOAL.match(clause)
    if m:
        goal = _zh_item((m.group("goal") or m.group("goal2")).replace("一下", ""))
        if goal and not _ZH_GOAL_BAD.match(goal):
            if not summary.goal and not goal_seen:
                summary.goal = goal
                return True
            if m.group("goal2") and "需要" in clause:
                summary.add_next(goal)
                return True
    return False


def _en_goal(clause: str, question: bool, summary: _TaskSummary, goal_seen: bool) -> bool:
    m = _RE_EN_GOAL_EXPLICIT.search(clause)
    if m and not question:
        goal = _en_item(m.group("goal") or m.group("goal2"))
        if goal:
            summary.goal = goal
            return True
    m = _RE_EN_GOAL.search(clause)
    if m and not _HYPOTHETICAL_EN.search(clause, 0, m.start()):
        goal = _en_item(m.group("goal"))
        if goal and not _EN_GOAL_BAD.match(goal):
            if not summary.goal and not goal_seen:
                summary.goal = goal
                return True
            if _EN_OBLIGATION.search(m.group(0)):  # "I need to X" once the goal is known: a next step
                summary.add_next(goal)
                return True
    return False


_EN_OBLIGATION = re.compile(r"\bneed\s+to|have\s+to", _I)


def _zh_done(clause: str, summary: _TaskSummary) -> bool:
    m = _RE_ZH_DONE_AFTER.match(clause)
    if m:
        item = _zh_item(m.group("item"))
        if item:
            summary.add_done(item + m.group("verb").rstrip("了"))
            return True
        return False
    m = _RE_ZH_DONE_BEFORE.match(clause)
    if m and not _HYPOTHETICAL_ZH.search(m.group("item")):
        item = _zh_item(m.group("item"))
        if item and not _ZH_NOT_DONE.search(item):
            summary.add_done(item + m.group("verb"))
            return True
    return False


_ZH_NOT_DONE = re.compile("没|不|未|如果|等")


_EN_COMPLEMENT = re.compile(r"\s+(?:with|using|via|by|for|from)\b.*$", _I)


def _en_done(clause: str, summary: _TaskSummary) -> bool:
    found = False
    m = _RE_EN_DONE_WITH.search(clause)
    if m:
        item = _en_item(m.group("item") or m.group("item2"))
        if item:
            summary.add_done(f"{item} done" if m.group("item") else item)
            found = True
    m = _RE_EN_DONE_ACTION.search(clause)
    if m and not _EN_CONDITIONAL.search(clause, 0, m.start()):
        item = _en_item(_EN_COMPLEMENT.sub("", m.group("item")))  # "the README with the new variables" → "README"
        if item:
            verb = _SPACES.sub(" ", m.group("verb").lower())
            summary.add_done(f"{item} {_EN_PARTICIPLE.get(verb, verb)}")
            found = True
    state_matched = False
    start = 0  # "the firmware is updated and the thermostat works now": two things done
    for m in _RE_EN_DONE_STATE.finditer(clause):
        state_matched = True
        if _EN_CONDITIONAL.search(clause, start, m.start()):
            break
        part = _SPACES.sub(" ", (m.group("part") or "working").lower())
        after = (m.group("after") or "").strip().lower()
        if not (part in ("ready", "working", "done", "set up") and after in ("to", "for", "on", "with", "at")):
            item = _en_item(_words_before(clause[start:], m.start() - start, 6), after_determiner=True)
            item = item and _sentence_case(item, clause)
            if item:
                summary.add_done(f"{item} {part}")
                found = True
        start = m.end()
    m = None if state_matched else _RE_EN_DONE_ELLIPTIC.match(clause)
    if m:
        item = _en_item(m.group("item"), after_determiner=True)
        item = item and _sentence_case(item, clause)
        if item:
            summary.add_done(f"{item} {_SPACES.sub(' ', m.group('part').lower())}")
            return True
    return found


def _zh_next(clause: str, summary: _TaskSummary) -> bool:
    m = _RE_ZH_NEXT.search(clause)
    item = m and _zh_item(m.group("item"))
    if item:
        summary.add_next(item)
    return bool(item)


def _en_next(clause: str, summary: _TaskSummary) -> bool:
    m = _RE_EN_NEXT.search(clause)
    item = m and _en_item(next(filter(None, m.group("item", "item2", "item3", "item4", "item5"))))
    if item:
        summary.add_next(item)
    return bool(item)


def _zh_blocker(clause: str, summary: _TaskSummary) -> bool:
    m = _RE_ZH_BLOCKER.search(clause)
    item = m and _zh_item(next(filter(None, m.group("item", "item2", "item3", "fail", "item4"))))
    if item:
        if m.group("item"):  # "卡在温控器上": stuck at the thermostat
            item = _ZH_PLACE_WORDS.sub("", item) or item
        summary.add_blocker(("等" + item) if m.group("item3") else item)
    return bool(item)


_ZH_PLACE_WORDS = re.compile("(?:上|这里|这一步|那里)$")


def _en_blocker(clause: str, summary: _TaskSummary) -> bool:
    m = _RE_EN_BLOCKER.search(clause)
    if not m or (_HYPOTHETICAL_EN.search(clause, 0, m.start()) and not m.group("fail")):
        return False
    if m.group("get"):
        item = _en_item(m.group("get"))
        item = item and f"{item} won't {m.group('get_verb').lower()}"
    elif m.group("wait"):
        item = _en_item(m.group("wait"))
        item = item and f"waiting for {item}"
    elif m.group("fail"):
        item = _en_item(_words_before(clause, m.start(), 5), after_determiner=True)
        item = item and f"{_sentence_case(item, clause)} {_SPACES.sub(' ', m.group('fail'))}"
    else:
        item = _en_item(m.group("item") or m.group("error"))
    if item:
        summary.add_blocker(item)
    return bool(item)


def _progress(m: re.Match | None, summary: _TaskSummary) -> bool:
    if not m:
        return False
    groups = m.groupdict()
    percent = groups.get("pct") or groups.get("pct2")
    if percent:
        value = _pct(percent)
    else:
        first, total = groups.get("a") or groups.get("a2"), groups.get("b") or groups.get("b2")
        value = _step_pct(first, total) if first and total else None
    if value is None:
        return False
    summary.progress = value
    return True


def _zh_stage(clause: str, summary: _TaskSummary) -> bool:
    m = _RE_ZH_STAGE.search(clause)
    stage = m and _zh_item(m.group("stage") or m.group("stage2") or m.group("stage3"))
    if stage:
        summary.set_stage(stage)
    return bool(stage)


def _en_stage(clause: str, summary: _TaskSummary) -> bool:
    m = _RE_EN_STAGE.search(clause)
    stage = m and _en_item(m.group("stage") or m.group("stage2") or m.group("stage3"))
    if stage:
        summary.set_stage(stage)
    return bool(stage)


def _str_list(value) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list | tuple):
        return [text for text in (_scalar(x) for x in value) if text]
    return []


def _scalar(value) -> str:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value).strip()[:120]
    return ""


# -- Fact rules ---------------------------------------------------------------------------------------------
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
    r"|(?P<kw2>下次)(?P<mod>一定要|要|得|记得|应该|别|不要|注意|必须)(?P<x2>.{2,})"
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
    rf"{_ZH_LEAD}(?P<t1>{_TIME_ZH})?[，,]?我(?P<t2>{_TIME_ZH})?(?:也|刚|刚刚|终于|已经|曾经)?"
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


def _fact(type_: str, content: str, kind: str, confidence: float, reason: str, **extra) -> Candidate | None:
    content = content.strip()
    key = _norm_key(content)
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


def _fact_candidates(sentence: str, question: bool, type_: str) -> list[Candidate]:
    out = []
    zh = _has_cjk(sentence)
    if zh:
        m = _RE_ZH_REMEMBER.match(sentence)
        if m and _ZH_REMEMBER_PRE.match(m.group("pre")):
            text = _ZH_FACT_TAIL.sub("", m.group("x")).strip("，, ")
            if len(text) >= 2 and not text.startswith(("了", "吗")):
                found = _fact(type_, text, "remember", 0.95, "zh.remember")
                return [found] if found else []
    else:
        m = _RE_EN_REMEMBER.match(sentence)
        if m and _EN_REMEMBER_PRE.match(m.group("pre")) and (not question or _EN_ASKING.search(m.group("pre"))):
            kw = _SPACES.sub(" ", m.group("kw").lower())
            text = _EN_FACT_TAIL.sub("", m.group("x")).strip()
            needs_link = kw in ("note", "write down", "note down")
            if text and not _EN_REMEMBER_BAD.match(text) and (m.group("link") or not needs_link):
                if kw == "note to self":
                    text = f"Note to self: {text}"
                elif text.lower().startswith("to "):
                    text = f"Remember {text}"
                found = _fact(type_, _cap(text), "remember", 0.95, "en.remember")
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
                text = "下次" + m.group("mod") + _ZH_FACT_TAIL.sub("", m.group("x2"))
            else:
                text = m.group("kw3") + _ZH_FACT_TAIL.sub("", m.group("x3"))
            found = _fact(type_, text, "lesson", 0.85, "zh.lesson")
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
            found = _fact(type_, text, "procedure", 0.8, "zh.procedure", goal=goal, steps=_ZH_FACT_TAIL.sub("", steps))
            if found:
                out.append(found)
        for clause in _clauses(sentence):
            m = _RE_ZH_EVENT.match(clause)
            if m and (
                m.group("t1") or m.group("t2") or m.group("verb") in ("去过", "到过", "游览了", "参观了", "参加了")
            ):
                place = _ZH_TAIL.sub("", m.group("x"))
                if place and not _ZH_BAD_START.match(place):
                    when = m.group("t1") or m.group("t2") or ""
                    found = _fact(type_, f"{when}{m.group('verb')}{place}", "event", 0.8, "zh.event", when=when)
                    if found:
                        out.append(found)
        return out
    m = _RE_EN_LESSON.search(sentence)
    if m and not _HYPOTHETICAL_EN.search(sentence, 0, m.start()):
        kw = _SPACES.sub(" ", m.group("kw").lower())
        text = _EN_FACT_TAIL.sub("", m.group("x")).strip()
        if text and text.split()[0].lower() not in ("it", "that", "this") or len(text.split()) > 3:
            label, kind = next(((label, kind) for key, label, kind in _EN_LESSON_LABEL if key in kw))
            found = _fact(type_, label + _swap_pronouns(text), kind, 0.85, "en.lesson")
            if found:
                out.append(found)
    m = _RE_EN_PROCEDURE.match(sentence)
    if m:
        goal = m.group("x") or m.group("x2") or m.group("x3")
        steps = _EN_FACT_TAIL.sub("", m.group("y") or m.group("y2") or m.group("y3"))
        found = _fact(type_, f"To {goal}: {steps}", "procedure", 0.8, "en.procedure", goal=goal, steps=steps)
        if found:
            out.append(found)
    for clause in _clauses(sentence):
        m = _RE_EN_EVENT.search(clause)
        if not m or _HYPOTHETICAL_EN.search(clause, 0, m.start()):
            continue
        when = _RE_EN_TIME.search(clause)
        rest = _EN_FILLER_TAIL.sub("", _EN_OBJ_CUT.sub("", m.group("x"))).strip(" ,.!")
        capitalised = any(word[:1].isupper() for word in rest.split()[:3])
        if not (when or capitalised) or (not rest and "married" not in m.group("verb").lower()):
            continue
        verb = _SPACES.sub(" ", m.group("verb"))
        text = _cap(f"{verb} {_swap_pronouns(rest)}".strip())
        found = _fact(type_, text, "event", 0.8 if when else 0.7, "en.event", when=when.group(0) if when else "")
        if found:
            out.append(found)
    return out


# -- Cheap filters: which messages are worth the rules, and the confidence score ----------------------------
_EN_PROFILE_KEYWORDS = [
    *"like|love|enjoy|adore|prefer|rather|switched to|changed to|lean toward|hate|dislike|detest|loathe|stand|bear"
    "|avoid|fan of|fond of|into|crazy about|obsessed|passionate|keen on|big on|favorite|favourite|fave|preference"
    "|usually|always|often|normally|typically|generally|tend to|never|rarely|regularly|mostly|habitually|person"
    "|introvert|extrovert|ambivert|night owl|early bird|early riser|perfectionist|minimalist|foodie|homebody"
    "|workaholic|neat freak|procrastinator|sleeper|picky eater|learner|my name|name's|go by|call me|called|named"
    "|living|based|staying|located|live|reside|moved|relocated|retired|turned|years old|year old|yrs|y/o|budget|spend"
    "|pay|cost|afford|price|no more than|not more than|at most|allergic|allerg|vegetarian|vegan|pescatarian"
    "|intolerant|gluten|diabetic|celiac|coeliac|halal|kosher|diet".split("|"),
    *_combine("i'm |i am ", "a|an|from|called|now|currently|originally|1|2|3|4|5|6|7|8|9|not|into|turning|almost"),
    *_combine("hi|hello|hey", ", i'm| i'm|, i am| i am|, this is| this is"),
    *_combine("work ", "as|at|for|in"),
    *_combine("can't |cannot |can not |don't |do not |never |no longer |won't ", "eat|drink|have"),
    *_combine("my ", "|".join(k.replace(r"\s+", " ") for k in _EN_RELATIONS)),
    *_combine("my ", "older|elder|big|younger|little|baby|oldest|youngest|eldest|new|1|2|3|4|5|6|7|8|9"),
]
_ZH_PROFILE_KEYWORDS = [
    *"喜欢|爱|偏好|倾向|宁愿|宁可|讨厌|受不了|反感|厌恶|接受不了|不能接受|不想要|以后|今后|往后|从现在起|从今以后|习惯|一般|通常|平时|平常|总是|经常"
    "|老是|每天|每周|每晚|向来|一向|从不|从来不|很少|急性子|慢性子|夜猫子|完美主义|吃货|宅男|宅女|社恐|i人|e人|路痴|工作狂|起床困难户|拖延|的人|叫|名字"
    "|姓名|住在|定居|生活|居住|常住|搬|家在|来自|我是|我在|工作|上班|任职|实习|退休|岁|预算|不超过|不要超过|别超过|不能超过|最多|顶多|控制在|不高于|过敏"
    "|不吃|不能吃|吃不了|不敢吃|不喝|不能喝|喝不了|忌口|戒了|吃素|素食|全素|纯素|清真|乳糖|糖尿病|兴趣".split("|"),
    *_combine("我|我的|我家|我家的", "|".join(_ZH_RELATIONS)),
]
_EN_FACT_KEYWORDS = [
    *"remember|note|keep in mind|forget|write down|for the record|fyi|lesson|takeaway|today i learned|learned|learnt"
    "|turned out|turns out|hindsight|retrospect|next time|should have|went to|went on|visited|travel|flew to"
    "|drove to|trip to|attended|got back|came back|returned from|spent|stayed in|hiked|climbed|ran a|ran my"
    "|graduated|married|new job|moved to|how to|, first|, just|, simply|, you need|, you have|, you must"
    "|, you should|, start by|, begin by".split("|"),
    *_combine("way |trick |step |steps |procedure |process |recipe |method ", "to|for"),
]
_ZH_FACT_KEYWORDS = (
    "记一下|记住|记下|记着|别忘|不要忘|备忘|记录|经验|教训|心得|总结|结论|下次|事实证明|发现|才知道|学到了|原来|去了|去过|到过|游览|参观|参加|逛了|玩了|回了"
    "|爬了|步骤|方法|流程|办法|做法|诀窍|窍门|技巧|先".split("|")
)
_PROFILE_EN_KEYS = _Keywords(_EN_PROFILE_KEYWORDS)
_PROFILE_ZH_KEYS = _Keywords(_ZH_PROFILE_KEYWORDS)
_PROFILE_KEYS = _Keywords(_EN_PROFILE_KEYWORDS, _ZH_PROFILE_KEYWORDS)
_FACT_KEYS = _Keywords(_EN_FACT_KEYWORDS, _ZH_FACT_KEYWORDS)

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
    *_combine("i ", "like|really like|also like|enjoy|usually|always|never|avoid"),
    *_combine("i'm |i am ", "a |an |from "),
    *_combine("my ", "wife|husband|partner|son|daughter|kid|mom|mum|mother|dad|father|brother|sister|boss|dog|cat"),
    *"next step|is done|are done|finished|completed|progress|stage|phase|blocked|stuck|turned out|i went to"
    "|i visited|the way to".split("|"),
]
_SCORE_MEDIUM_WORDS_ZH = (
    "喜欢|习惯|我是|岁|老婆|老公|女儿|儿子|妈妈|爸爸|下一步|完成|搞定|进度|阶段|卡在|原来|去了|步骤|不吃".split("|")
)
_SCORE_STRONG = _Keywords(_SCORE_STRONG_WORDS, _SCORE_STRONG_WORDS_ZH)
_SCORE_ANY = _Keywords(_SCORE_STRONG_WORDS, _SCORE_STRONG_WORDS_ZH, _SCORE_MEDIUM_WORDS, _SCORE_MEDIUM_WORDS_ZH)
_SCORE_MEDIUM_ASSISTANT = _Keywords(_SCORE_MEDIUM_WORDS, _SCORE_MEDIUM_WORDS_ZH)
_ACK_WORDS = (
    r"(?:ok(?:ay)?|thanks?|thank\s+you|thx|ty|hi|hello|hey|yes|yeah|yep|no|nope|sure|cool|great|nice|good|got\s+it"
    r"|sounds\s+good|perfect|lol|haha|bye|好的|好|谢谢|嗯+|是的|对|哈哈+|收到|明白|可以|行|没问题|再见|你好)"
)
_SCORE_ACK = re.compile(rf"^[\W_]*{_ACK_WORDS}(?:[\W_]*{_ACK_WORDS})*[\W_]*$", _I)
_SCORE_LETTER = re.compile(r"[^\W\d_]")
_SCORE_FIRST_PERSON = re.compile(_WORD_START + r"(?:i|i'm|i've|my|me)\b")


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
    if len(padded) < 41 and (_SCORE_ACK.match(padded) or not _SCORE_LETTER.search(padded)):
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


# -- The extractor ------------------------------------------------------------------------------------------
def _normalise_text(text: str) -> str:
    return text.replace("’", "'").replace("‘", "'").replace("＄", "$")


def _dedupe(candidates: list[Candidate]) -> list[Candidate]:
    """One candidate per (type, slot, value): the latest wording, the union of sources, the highest confidence."""
    by_key: dict[tuple, Candidate] = {}
    for candidate in candidates:
        key = (candidate.type, candidate.slot, candidate.value)
        earlier = by_key.pop(key, None)
        if earlier is not None:
            sources = earlier.source_message_ids + [
                s for s in candidate.source_message_ids if s not in earlier.source_message_ids
            ]
            candidate.source_message_ids = sources
            candidate.confidence = max(candidate.confidence, earlier.confidence)
        by_key[key] = candidate  # re-inserted last: the order follows each slot's latest statement
    return list(by_key.values())


class RulesExtractor(Extractor):
    """English and Chinese pattern rules; no network, no model, no prompt (a custom prompt is ignored)."""

    name = "rules"

    def extract(
        self,
        *,
        strategy_type: str,
        prompt: str,
        messages: list[SourceMessage],
        existing: list[dict],
        state: dict | None = None,
        state_changes: dict | None = None,
        session_id: str = "",
    ) -> Extraction:
        started = time.perf_counter()
        ordered = sorted(messages, key=lambda message: message.seq)
        if strategy_type == "profile":
            candidates, scanned = self._profile(ordered)
        elif strategy_type == "task":
            candidates, scanned = self._task(ordered, existing, state or {}, state_changes or {}, session_id)
        elif strategy_type in ("fact", "custom"):
            candidates, scanned = self._facts(ordered, strategy_type)
        else:
            candidates, scanned = [], 0
        candidates = _dedupe(candidates)
        return Extraction(
            candidates=candidates,
            latency_ms=(time.perf_counter() - started) * 1000,
            detail=f"rules: {len(candidates)} candidate(s) from {len(ordered)} message(s), {scanned} scanned",
        )

    @staticmethod
    def _profile(messages: list[SourceMessage]) -> tuple[list[Candidate], int]:
        out, scanned = [], 0
        for message in messages:
            if message.role != "user":
                continue
            text = _normalise_text(message.content)
            if len(text) > 40 and not _PROFILE_KEYS(" " + text.lower()):
                continue
            scanned += 1
            for sentence, question in _sentences(text):
                if question:
                    continue
                for clause in _clauses(sentence):
                    for candidate in _profile_candidates(clause):
                        candidate.source_message_ids = [message.id]
                        out.append(candidate)
        return out, scanned

    @staticmethod
    def _facts(messages: list[SourceMessage], type_: str) -> tuple[list[Candidate], int]:
        out, scanned = [], 0
        for message in messages:
            if message.role != "user":
                continue
            text = _normalise_text(message.content)
            if not _FACT_KEYS(" " + text.lower()):
                continue
            scanned += 1
            for sentence, question in _sentences(text):
                for candidate in _fact_candidates(sentence, question, type_):
                    candidate.source_message_ids = [message.id]
                    out.append(candidate)
        return out, scanned

    @staticmethod
    def _task(
        messages: list[SourceMessage], existing: list[dict], state: dict, state_changes: dict, session_id: str
    ) -> tuple[list[Candidate], int]:
        slot = f"task:{session_id}"
        previous = next((r for r in existing if (r.get("fields") or {}).get("slot") == slot), None)
        previous_fields = (previous or {}).get("fields") or {}
        summary = _TaskSummary(previous_fields)
        sources: list[str] = []
        texts: list[str] = []
        scanned = 0
        first_user = next((m for m in messages if m.role == "user"), None)
        for message in messages:
            if message.role not in ("user", "assistant"):
                continue
            text = _normalise_text(message.content)
            if not _TASK_KEYS(" " + text.lower()):
                continue
            scanned += 1
            hit = False
            goal_seen = bool(summary.goal)
            for sentence, question in _sentences(text):
                for clause in _clauses(sentence):
                    hit = _scan_task_clause(clause, question, message.role, summary, goal_seen=goal_seen) or hit
                if not question:
                    hit = _scan_task_sentence(sentence, summary) or hit
            if hit:
                sources.append(message.id)
                texts.append(message.content)

        state_signal = False
        for key in _STATE_GOAL_KEYS:
            goal = _scalar(state.get(key)) or _scalar((state_changes.get(key) or [None, None])[-1])
            if goal:
                summary.goal, state_signal = goal, True
                texts.append(goal)
                break
        for key in _STATE_STAGE_KEYS:
            change = state_changes.get(key)
            if isinstance(change, list | tuple) and len(change) == 2:
                old, new = _scalar(change[0]), _scalar(change[1])
                if key != "status" and old and old != new and old.lower() not in _STAGE_PLACEHOLDERS:
                    summary.add_done(old)  # a stage left behind is a stage completed
                if new:
                    if new.lower() in _STATE_DONE_WORDS and summary.progress is None:
                        summary.progress = 100
                    if key != "status" or not summary.stage:
                        summary.set_stage(new)
                    state_signal = True
                    texts.append(new)
                    break
            current = _scalar(state.get(key))
            if current and current.lower() not in _STAGE_PLACEHOLDERS:
                if current.lower() in _STATE_DONE_WORDS and summary.progress is None:
                    summary.progress = 100
                if key != "status" or not summary.stage:
                    if current != summary.stage:
                        summary.set_stage(current)
                state_signal = True
                texts.append(current)
                break
        progress_value = state_changes.get("progress", [None, state.get("progress")])
        progress = _pct(progress_value[-1] if isinstance(progress_value, list | tuple) else progress_value)
        if progress is not None:
            summary.progress, state_signal = progress, True

        if not sources and not state_signal:
            return [], scanned
        if previous is None and not summary.goal and first_user is not None and first_user.seq <= 3:
            # a new session's opening request is its goal, said or not with "help me"
            first_sentence = next(iter(_sentences(_normalise_text(first_user.content))), ("", False))[0]
            if len(first_sentence) >= 8 and not _SCORE_ACK.match(first_sentence):
                summary.goal = first_sentence[:120]
        fields = summary.fields(slot)
        if previous is not None and all(fields[k] == previous_fields.get(k) for k in fields):
            return [], scanned
        if not any(fields[k] for k in ("goal", "stage", "done", "next", "blockers")) and fields["progress"] is None:
            return [], scanned
        sample = " ".join(texts) or str((previous or {}).get("content") or "")
        content = _task_content(fields, _is_zh(sample))
        reason = "rule task." + "+".join(x for x, on in (("messages", sources), ("state", state_signal)) if on)
        candidate = Candidate(
            type="task",
            content=content,
            slot=slot,
            value=fields["stage"] or (fields["done"][-1] if fields["done"] else ""),
            exclusive=False,
            fields=fields,
            confidence=0.9 if state_signal else 0.8,
            source_message_ids=sources,
            reason=reason,
        )
        return [candidate], scanned
