"""The text helpers every family of rules shares: sentences and clauses, CJK detection, keyword filters,
cleaning what a rule captured (objects, topics, pronouns, slot keys), numbers and amounts.
"""

from __future__ import annotations

import re

_I = re.IGNORECASE
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_CHAR = re.compile(f"[{CJK}]")
LATIN_LETTERS = re.compile(r"[A-Za-z]{2,}")


# -- Messages -----------------------------------------------------------------------------------------------
def normalise_text(text: str) -> str:
    """Curly apostrophes and the full-width dollar sign as the patterns spell them ("'", "$")."""
    return text.replace("’", "'").replace("‘", "'").replace("＄", "$")


# A message of nothing but acknowledgements and greetings: "ok thanks", "好的谢谢".
_ACK_WORDS = (
    r"(?:ok(?:ay)?|thanks?|thank\s+you|thx|ty|hi|hello|hey|yes|yeah|yep|no|nope|sure|cool|great|nice|good|got\s+it"
    r"|sounds\s+good|perfect|lol|haha|bye|好的|好|谢谢|嗯+|是的|对|哈哈+|收到|明白|可以|行|没问题|再见|你好)"
)
ACKNOWLEDGEMENT = re.compile(rf"^[\W_]*{_ACK_WORDS}(?:[\W_]*{_ACK_WORDS})*[\W_]*$", _I)


# -- Sentences and clauses ----------------------------------------------------------------------------------
# A sentence ends at . ! ? (full or half width), ; or a new line; a period between two digits does not end it
# (mended after the split: lookarounds in the pattern would cost more than the split itself).
_SENTENCE_SPLIT = re.compile(r"([.!?。！？；;\n…]+)")
# Profile and task rules read clauses: a Chinese comma always starts one; English splits on "but" and on
# "and I ..." / "and hate ..." (so "I like tea but hate coffee" is two statements).
_CLAUSE_SPLIT = re.compile(
    rf"[，,]\s*(?:但是|但|不过|可是|而且|并且|所以)?(?=\s*[{CJK}])|，|但是|不过|可是"
    r"|\s(?:but|though|although|whereas|however|except\s+that)\s"
    r"|,\s+(?:and|so)\s+(?=(?i:i|i'm|i've|my|also)\b)"
    r"|[,;]\s+(?=(?i:i|i'm|i'd|i've|i'll)\s)"
    r"|\sand\s+(?=(?i:i(?!\s+(?:are|were|both|all)\b)|i'm|i've|my)\s|(?:also\s+|really\s+)?(?:hate|love|like|dislike|prefer|enjoy|can't\s+stand"
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
    r"[吗么]$|呢$|(?<![没不])什么|哪|(?<![不没])怎么|为什么|为啥|是否|要不要|是不是|有没有|能不能|可不可以|多少|几[个天岁点]|喜不喜欢|[？?]"
)
HYPOTHETICAL_EN = re.compile(
    r"\b(?:if|unless|whether|wonder|doubt|not|never|suppose|imagine|pretend|assume|said|says|asked)\b|n't\b", _I
)
HYPOTHETICAL_ZH = re.compile("如果|假如|要是|假设|万一|倘若|不知道|是否|以为|说|问")
# The connectives a Chinese clause may open with (但是, 其实, 对了 ...): Chinese rules are anchored at the clause
# start, after them.
ZH_LEAD = (
    r"^(?:(?:但是|但|不过|可是|而且|并且|其实|另外|还有|嗯+|哦|噢|对了|好的|好吧|所以|总之|反正|说实话|老实说|说真的|话说)"
    r"[，,\s]*)*"
)


# Dots, question and exclamation marks that end no sentence are masked before the split and restored after:
# inside URLs, between two word characters ("auth.py", "v1.2.3", "3.14", "e.g"), and after common
# abbreviations ("Dr. Smith", "e.g. tea", "the U.S. team"). Private-use characters stand in for them.
_MASK = {".": "\ue000", "?": "\ue001", "!": "\ue002"}
_UNMASK = str.maketrans({v: k for k, v in _MASK.items()})
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'，。！？]+[^\s<>\"'，。！？.,;:!?)\]]", _I)
_INNER_DOT = re.compile(r"(?<=[\w\ue000])\.(?=[A-Za-z0-9_])")
_ABBREVIATION = re.compile(
    r"(?<![\w\ue000])(?:(?:mr|mrs|ms|mx|dr|prof|sr|jr|st|mt|ft|vs|no|nos|approx|dept|est|fig|inc|ltd|co|corp|gen|gov"
    r"|sgt|capt|lt|col|rev|hon|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
    r"|e\ue000g|i\ue000e|u\ue000s|u\ue000k|u\ue000n|a\ue000m|p\ue000m|ph\ue000d|cf|al|etc)\.(?=\s+[\w(\"'$])",
    _I,
)
# "etc." and "a.m." end a sentence when the next word is capitalised; the others never do.
_ENDS_BEFORE_CAPITAL = re.compile(r"(?:etc|a\ue000m|p\ue000m)\.$", _I)


def _mask(text: str) -> str:
    if "." not in text and "?" not in text and "!" not in text:
        return text
    text = _URL.sub(lambda m: m.group(0).translate(str.maketrans(_MASK)), text)
    text = _INNER_DOT.sub("\ue000", text)

    def abbreviation(m: re.Match) -> str:
        following = text[m.end() :].lstrip()[:1]
        if following.isupper() and _ENDS_BEFORE_CAPITAL.search(m.group(0)):
            return m.group(0)
        return m.group(0)[:-1] + "\ue000"

    return _ABBREVIATION.sub(abbreviation, text)


def sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, is_question) pairs of a message. A dot in a file name, version, decimal, URL or after an
    abbreviation ends no sentence."""
    parts = _SENTENCE_SPLIT.split(_mask(text))
    out = []
    for i in range(0, len(parts), 2):
        piece = parts[i]
        end = parts[i + 1] if i + 1 < len(parts) else ""
        sentence = piece.strip().lstrip(_TRIM_START).rstrip(_TRIM_END).translate(_UNMASK)
        if not sentence:
            continue
        question = "?" in end or "？" in end or bool(_EN_QUESTION.match(sentence))
        if not question and not sentence.isascii() and CJK_CHAR.search(sentence):
            question = bool(_ZH_QUESTION.search(sentence))
        out.append((sentence, question))
    return out


def clauses(sentence: str) -> list[str]:
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


def has_cjk(text: str) -> bool:
    return CJK_CHAR.search(text) is not None


def is_zh(text: str) -> bool:
    """Mostly Chinese: more CJK characters than Latin words."""
    cjk = len(CJK_CHAR.findall(text))
    return cjk > 0 and cjk >= len(LATIN_LETTERS.findall(text))


# -- Keyword filters ----------------------------------------------------------------------------------------
# Python's regex engine tries every branch of an alternation at every position, so a list of a few hundred
# keywords costs ~100 µs per message. Built as a trie ("l(?:ike|ove|ive)|p(?:refer|...)") behind a class of the
# characters a word follows, the engine skips straight to word starts and tests one branch per first letter:
# a few µs. Keywords are lower-case; matchers read " " + text.lower().
WORD_START = "[\\s(\\[\"“'‘/*>#-]"


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


class Keywords:
    """Is any of the keywords in a text? Words that start with a Latin letter or digit must start a word;
    the others (Chinese, "%", ", first") may start anywhere."""

    def __init__(self, *word_lists):
        words = {word for words in word_lists for word in words if word}
        at_word_start = sorted(w for w in words if w[0].isascii() and w[0].isalnum())
        anywhere = sorted(words.difference(at_word_start))
        self._word = re.compile(WORD_START + _trie(at_word_start)).search if at_word_start else None
        self._other = re.compile(_trie(anywhere)).search if anywhere else None

    def __call__(self, padded: str) -> bool:
        """padded: " " + the lower-cased text."""
        return bool(self._word and self._word(padded) or self._other and self._other(padded))


def combine(*parts: str) -> list[str]:
    """Every concatenation of one word from each part: combine("can't ", "eat|drink") → ["can't eat", ...]."""
    out = [""]
    for part in parts:
        out = [head + tail for head in out for tail in part.split("|")]
    return out


# -- Normalising what a rule captured -----------------------------------------------------------------------
EN_OBJ_CUT = re.compile(
    r"(?:\s*[,;:]\s*|\s+)(?:because|cause|cuz|since|as\s+(?:it|they|i|that|long)|so\s+that|so|which|who|but|though"
    r"|although|if|unless|and\s+(?:i|it|that|they|we|my|you|he|she)|whereas|except|lol|haha|hehe)\b.*$"
    r"|\s*,\s*(?:i|i'm|i'd|i've|i'll|it|it's|that's|they|they're|we|we're|which|so|next|then|after\s+that"
    r"|afterwards|tomorrow)\b.*$"
    r"|\s*,\s*(?:the|a|my|our|their|its)\s+[\w-]+\s+(?:is|are|was|were|look|looks|make|makes)\b.*$"
    r"|\s*[;(\[—–]\s*.*$|\s*-\s+.*$",
    _I,
)
EN_FILLER_TAIL = re.compile(
    r"(?:[\s,]+(?:please|pls|now|right now|nowadays|these days|anymore|any more|instead|though|too|as well|a lot"
    r"|a bit|so much|very much|really|actually|honestly|lately|recently|for now|in general|generally|overall"
    r"|most of all"
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
EN_ARTICLE = re.compile(r"^(?:the|a|an|some|any|my|our)\s+", _I)
_EN_TO = re.compile(r"^to\s+", _I)
_EN_PREP_CUT = re.compile(r"\s+(?:on|in|at|for|with|during|from|by|to|when|while|than|over|instead|rather)\b.*$", _I)
EN_BAD_FIRST_WORDS = frozenset(
    "it it's its that that's this these those them they you your yours him her his what how where which who whom "
    "why when everything anything something nothing so too very much yes no not one ones all both either neither "
    "here there doing being i i'm i've i'd me we we're us".split()
)
_EN_BAD_OBJECT = re.compile(
    r"^(?:a|an|some)\s+(?:new|different|other|few|couple)\b|^to\s+(?:hear|see|say|know|think|read|watch|tell)$"
    r"|^the\s+way\b|^(?:an?\s+)?(?:event|thing|place|something)$|^to$|^the\s+(?:idea|thought|feelings?)\b"
    r"|^(?:the\s+)?(?:idea|plan|suggestion|answer|result|results|option|version|approach|way\s+you|first\s+one"
    r"|second\s+one|last\s+one|other\s+one|new\s+one|one|latter|former|above|previous\s+one|current\s+one)$"
    r"|^the\s+(?:new|old|first|second|third|last|other|current|previous|above|latter|former)\b",
    _I,
)
_EN_VOCATIVE = re.compile(r"^((?:the|this|that)\s+[a-z]+)\s+(?-i:[A-Z][a-z]+)$", _I)
# Words that point at something outside the record: a record holding them means nothing alone.
_EN_DANGLING = re.compile(
    r"\b(?:it|it's|its|they|them|they're|their|theirs|this|that|these|those|he|she|him|her|hers|there|here|such|ones?|same"
    r"|stuff\s+like\s+that)\b",
    _I,
)
_EN_NOT_AN_OBJECT = frozenset(
    "everywhere everyone everybody anywhere anyone somewhere someone nowhere nobody makes made gets got is are was "
    "were has had does did seeing hearing knowing how why when where who whom whose seeing".split()
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
ZH_TAIL = re.compile(r"[了啊呀吧呢哦啦嘛哈呐么噢喔~～\s!！。.,，]+$")
ZH_CORE_TAIL = re.compile("(?:一点儿?|一些|点儿|的|了|啊|呀|吧|呢|哦|啦|嘛)+$")
ZH_BAD_START = re.compile("^(?:你|他|她|它|这|那|什么|哪|怎么|谁|为什么|多少|啥)")
# "用第二种方法", "选上面那个": a pick among options just offered, not a lasting preference
_ZH_BAD_OBJECT = re.compile(
    "^(?:用|选|选择)?(?:第[一二三四五六七八九十两\\d]+[个种条项套版]|上面|下面|前者|后者|前一个|后一个|这|那|你)"
)
_ZH_CATEGORY = (
    (re.compile("(?:茶|咖啡|果汁|可乐|啤酒|红酒|白酒|牛奶|拿铁|饮料)$"), "饮品"),
    (re.compile("(?:高铁|火车|飞机|动车|汽车|自驾|地铁|公交|打车|开车|骑车)$"), "出行"),
)
_NON_WORD = re.compile(rf"[^\w{CJK}]+")
SPACES = re.compile(r"\s+")


def swap_pronouns(text: str) -> str:
    return _EN_PRONOUN.sub(lambda m: _EN_PRONOUN_SWAP[m.group(0).lower()], text)


def upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def norm_key(text: str, limit: int = 80) -> str:
    """Lower-case, punctuation-free, single-spaced: the part of a slot that names a thing."""
    return SPACES.sub(" ", _NON_WORD.sub(" ", text.lower())).strip()[:limit].strip()


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def clean_en_object(raw: str) -> tuple[str, str, str] | None:
    """(text for the content, normalised core, context qualifier) of an English object, or None if it names
    nothing worth remembering ("it", "that", "the idea", a whole story)."""
    text = EN_OBJ_CUT.sub("", raw)
    qualifiers = []
    for _ in range(3):
        text = EN_FILLER_TAIL.sub("", text)
        m = _EN_QUALIFIER_TAIL.search(text)
        if not m:
            break
        qualifiers.insert(0, m.group("q"))
        text = text[: m.start()]
    text = _EN_VOCATIVE.sub("", text.strip(" ,.!"))  # "the thought Nate": Nate is who it is said to
    if not text:
        return None
    words = text.split()
    if words[0].lower() in EN_BAD_FIRST_WORDS or _EN_BAD_OBJECT.search(text) or len(words) > 10:
        return None
    if _EN_ABOUT_YOU.search(text):  # "the way you structured this" is about the conversation, not the user
        return None
    if _EN_DANGLING.search(text):  # "the smell and taste it adds to dishes", "that world": about what the reader
        return None  # never sees
    if words[0].lower() in _EN_NOT_AN_OBJECT:  # "love everywhere", "love makes writing fun"
        return None
    core = norm_key(EN_ARTICLE.sub("", text))
    if not core:
        return None
    qualifier = " ".join(qualifiers)
    shown = f"{text} {qualifier}" if qualifier else text
    return swap_pronouns(shown), core, qualifier


_EN_BARE_VERBS = frozenset(
    "go walk stay take eat drink read watch play spend travel cook listen sleep work live do have visit see try use "
    "get make sit stick ride drive fly hike swim run bake paint write learn study relax chill hang".split()
)


def en_topic(core: str) -> str:
    """Head noun of an English preference object: "soft lighting at night" → "lighting",
    "window seats on long flights" → "seat", "travelling by train" → "transport"."""
    first = core.split(" ", 1)[0]
    verb_phrase = core.startswith("to ") or first.endswith("ing") or (first in _EN_BARE_VERBS and " " in core)
    phrase = _EN_TO.sub("", core) if verb_phrase else _EN_PREP_CUT.sub("", core)
    words = phrase.split()
    if not words:
        return core
    head = _singular(words[-1])
    return _EN_CATEGORY.get(head, head)


def clean_zh_object(raw: str) -> tuple[str, str] | None:
    """(text for the content, normalised core) of a Chinese object, or None."""
    text = ZH_TAIL.sub("", _ZH_OBJ_CUT.sub("", raw)).strip()
    if not text or ZH_BAD_START.match(text) or _ZH_BAD_OBJECT.match(text) or len(text) > 24:
        return None
    core = ZH_CORE_TAIL.sub("", text)
    if not core:
        return None
    return text, norm_key(core)


_LATIN_TAIL = re.compile(r"[a-z][a-z0-9+#.\- ]*$")


def zh_topic(core: str) -> str:
    for pattern, category in _ZH_CATEGORY:
        if pattern.search(core):
            return category
    latin = _LATIN_TAIL.search(core)
    if latin:  # "用python": the thing is the Latin word
        return en_topic(latin.group(0))
    cjk = "".join(CJK_CHAR.findall(core))
    if len(cjk) >= 2:
        return cjk[-2:]
    return core if not cjk else cjk


# -- Numbers and amounts ------------------------------------------------------------------------------------
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


def parse_number(text: str) -> int | None:
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text and all(ch in _ZH_DIGITS or ch in _ZH_UNITS for ch in text):
        return _zh_number(text)
    return None


NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
CURRENCY_AMOUNT = (
    rf"(?:[$€£¥￥]\s?(?:{NUM})(?:\s?(?:k|m|thousand|grand|million)\b)?(?:\s?(?:usd|eur|gbp|cny|rmb|jpy|aud|cad|hkd"
    rf"|sgd)\b)?|(?:{NUM})\s?(?:k|thousand|grand|million)?\s?(?:dollars?|bucks|usd|eur|euros?|pounds?|gbp|yuan|rmb"
    rf"|cny|yen|jpy|aud|cad|hkd|sgd)\b|(?:{NUM})\s?(?:[kw]\s?)?(?:元|块钱?|人民币|美元|美金|欧元|英镑|日元|刀)"
    rf"|(?:{NUM})\s?[万千]\s?(?:元|块钱?|人民币|美元|美金|欧元|英镑|日元|刀)?"
    r"|[零一二三四五六七八九十两百千万]+\s?(?:元|块钱?|万|千))"
)
AMOUNT_NUMBER = re.compile(NUM)
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


def parse_amount(text: str) -> tuple[float | None, str]:
    currency = next((code for pattern, code in _CURRENCIES if pattern.search(text)), "")
    m = AMOUNT_NUMBER.search(text)
    if m:
        amount = float(m.group(0).replace(",", ""))
    else:
        cjk = "".join(ch for ch in text if ch in _ZH_DIGITS or ch in _ZH_UNITS)
        return (float(_zh_number(cjk)) if cjk else None), currency
    mult = _AMOUNT_MULTIPLIER.search(text[m.end() :])
    if mult:
        amount *= 1_000_000 if mult.group("m") else 10_000 if mult.group("w") else 1000
    return amount, currency


def amount_value(amount: float | None, currency: str, shown: str) -> tuple[str, dict]:
    if amount is None:
        return norm_key(shown), {}
    number = int(amount) if amount == int(amount) else amount
    return (f"{number} {currency}".strip(), {"amount": number, "currency": currency})
