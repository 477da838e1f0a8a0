"""The task rules: one running summary per session (goal, stage, progress, done, next, blockers), merged from
the previous summary, the new user and assistant messages, and the session's state."""

from __future__ import annotations

import re

from strategies_app.extractors.base import Candidate, SourceMessage

from .text import (
    ACKNOWLEDGEMENT,
    AMOUNT_NUMBER,
    CJK,
    CJK_CHAR,
    EN_BAD_FIRST_WORDS,
    EN_FILLER_TAIL,
    EN_OBJ_CUT,
    HYPOTHETICAL_EN,
    HYPOTHETICAL_ZH,
    SPACES,
    ZH_BAD_START,
    ZH_LEAD,
    ZH_TAIL,
    Keywords,
    clauses,
    has_cjk,
    is_zh,
    normalise_text,
    parse_number,
    sentences,
)

_I = re.IGNORECASE

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
    rf"{ZH_LEAD}(?:你)?(?:能不能|可不可以|可以|能否|请|麻烦)?(?:请)?(?:帮我们|帮我|帮忙)(?P<goal>[^。？?]{{2,60}})"
    rf"|{ZH_LEAD}我(?:们)?(?:想要|想|要|打算|准备|需要|计划)(?P<goal2>[^。？?]{{2,60}})"
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

# "Hey John", "Hi there, long time no see", "你好呀": an opening that asks nothing.
_GREETING = re.compile(
    r"^(?:(?:hi|hey|hello|hiya|yo|howdy|greetings|good\s+(?:morning|afternoon|evening)|long\s+time\s+no\s+(?:see|talk)"
    r"|how\s+are\s+(?:you|ya)|how's\s+it\s+going|what's\s+up|thanks?|thank\s+you)\b[\w\s,!'-]{0,30}$"
    r"|(?:你好|您好|嗨|哈喽|早上好|晚上好|下午好|好久不见|在吗)[呀啊哈，,！!\s]*$)",
    _I,
)
_STOPWORDS = frozenset(
    "the a an to my our your is are was were be been has have had it of for in on at with and now up its this that "
    "all i we you".split()
)
_WORD = re.compile(rf"[a-z0-9]+|[{CJK}]+")


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
        if CJK_CHAR.match(word):
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
    text = EN_FILLER_TAIL.sub("", _EN_ITEM_CUT.sub("", EN_OBJ_CUT.sub("", raw))).strip(" ,.!:")
    text = _EN_ITEM_TAIL.sub("", text)
    if after_determiner:
        ends = [m.end() for m in _EN_DETERMINER.finditer(text)]
        if ends:
            text = text[ends[-1] :]
    text = _EN_ITEM_LEAD.sub("", text).strip(" ,.!:")
    words = text.split()
    if not words or words[0].lower() in EN_BAD_FIRST_WORDS or words[0].lower() in ("i", "i'm", "we", "we're"):
        return None
    if len(words) > 10:
        text = " ".join(words[:10])
    return text


_ZH_ITEM_LEAD = re.compile("^(?:我们|我|你|会|要|就|再|将|先|得|需要|一下|了|把)+")


def _zh_item(raw: str) -> str | None:
    text = _ZH_GOAL_TAIL.sub("", ZH_TAIL.sub("", raw)).strip()
    text = _ZH_ITEM_LEAD.sub("", text)
    if len(text) < 2 or ZH_BAD_START.match(text):
        return None
    return text[:30]


def _pct(value) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = value * 100 if isinstance(value, float) and 0 < value <= 1 else value
    else:
        m = AMOUNT_NUMBER.search(str(value))
        if not m:
            return None
        number = float(m.group(0).replace(",", ""))
    return max(0, min(100, round(number)))


def _step_pct(a: str, b: str) -> int | None:
    first, total = parse_number(a), parse_number(b)
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
_TASK_GATES = {family: Keywords(en.split("|"), zh.split("|")) for family, (en, zh) in _TASK_WORDS.items()}
_TASK_KEYS = Keywords(*(words.split("|") for pair in _TASK_WORDS.values() for words in pair))


def _scan_task_clause(clause: str, question: bool, role: str, summary: _TaskSummary, *, goal_seen: bool) -> bool:
    """Apply one clause's task signals to the summary; True when it held any."""
    padded = " " + clause.lower()
    zh = not padded.isascii() and has_cjk(clause)
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
    if has_cjk(sentence):
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
    if m and not HYPOTHETICAL_EN.search(clause, 0, m.start()):
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
    if m and not HYPOTHETICAL_ZH.search(m.group("item")):
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
            verb = SPACES.sub(" ", m.group("verb").lower())
            summary.add_done(f"{item} {_EN_PARTICIPLE.get(verb, verb)}")
            found = True
    state_matched = False
    start = 0  # "the firmware is updated and the thermostat works now": two things done
    for m in _RE_EN_DONE_STATE.finditer(clause):
        state_matched = True
        if _EN_CONDITIONAL.search(clause, start, m.start()):
            break
        part = SPACES.sub(" ", (m.group("part") or "working").lower())
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
            summary.add_done(f"{item} {SPACES.sub(' ', m.group('part').lower())}")
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
    if not m or (HYPOTHETICAL_EN.search(clause, 0, m.start()) and not m.group("fail")):
        return False
    if m.group("get"):
        item = _en_item(m.group("get"))
        item = item and f"{item} won't {m.group('get_verb').lower()}"
    elif m.group("wait"):
        item = _en_item(m.group("wait"))
        item = item and f"waiting for {item}"
    elif m.group("fail"):
        item = _en_item(_words_before(clause, m.start(), 5), after_determiner=True)
        item = item and f"{_sentence_case(item, clause)} {SPACES.sub(' ', m.group('fail'))}"
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


def task_candidates(
    messages: list[SourceMessage], *, existing: list[dict], state: dict, state_changes: dict, session_id: str
) -> tuple[list[Candidate], int]:
    """At most one candidate, the session's merged summary, and how many messages passed the keyword filter."""
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
        text = normalise_text(message.content)
        if not _TASK_KEYS(" " + text.lower()):
            continue
        scanned += 1
        hit = False
        goal_seen = bool(summary.goal)
        for sentence, question in sentences(text):
            for clause in clauses(sentence):
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
        opening = [s for s, _ in sentences(normalise_text(first_user.content)) if not _GREETING.match(s)]
        first_sentence = opening[0] if opening else ""
        if len(first_sentence) >= 8 and not ACKNOWLEDGEMENT.match(first_sentence):
            summary.goal = first_sentence[:120]
    fields = summary.fields(slot)
    if previous is not None and all(fields[k] == previous_fields.get(k) for k in fields):
        return [], scanned
    if not any(fields[k] for k in ("goal", "stage", "done", "next", "blockers")) and fields["progress"] is None:
        return [], scanned
    sample = " ".join(texts) or str((previous or {}).get("content") or "")
    content = _task_content(fields, is_zh(sample))
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
