"""What the profile rules share: the candidate they make, the checks that a clause states what it says (rather than
supposing or reporting it), the subject and adverb patterns of the Chinese rules, and how a Chinese job title ends."""

from __future__ import annotations

import re

from strategies_app.extractors.base import Candidate

from ..text import HYPOTHETICAL_EN, HYPOTHETICAL_ZH

# A Chinese clause may drop its subject ("预算5000元，喜欢人文历史"), so Chinese rules are anchored at the clause
# start: an optional connective (ZH_LEAD), then either "我" (after at most a few words such as "晚上") or nothing.
ZH_SUBJ = r"(?:(?P<pre>[^你他她它們们如假万倘，,。？?]{0,6}?)我|)"
ZH_SUBJ2 = ZH_SUBJ.replace("pre", "pre2")
ZH_ADV = (
    "(?:最近|这些天|这阵子|如今|现在|目前|以后|今后|从现在起|从今以后|往后|其实|还是|一般|平时|通常|真的|真|很|挺|也|都|还|就|特别|非常|比较|最"
    "|更|蛮|超级|超|一直|从小就?|本来就?|向来|一向|确实|倒是|主要|已经|越来越|开始|反而|倒|再|就是)*"
)
ZH_JOB_SUFFIX = re.compile(
    "(?:工程师|程序员|程序猿|码农|设计师|老师|教师|医生|护士|律师|会计|经理|总监|学生|研究生|博士生?|研究员|教授|作家|记者|编辑|厨师"
    "|司机|销售|运营|架构师|分析师|顾问|创业者|老板|主管|公务员|警察|军人|农民|工人|自由职业者?|画家|歌手|演员|摄影师|翻译"
    "|科学家|药剂师|飞行员|建筑师|秘书|助理|实习生|全职妈妈|全职爸爸|家庭主妇|产品经理|测试|店长|导游|主播|博主|UP主|up主)$"
)


def profile_candidate(
    content: str, slot: str, value: str, exclusive: bool, fields: dict, confidence: float, reason: str
):
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


def zh_asserted(m: re.Match) -> bool:
    """The few words a Chinese rule allows before "我" hold no 如果, 假如, 说, 问 ...: the clause states it, rather
    than supposing or reporting it."""
    groups = m.groupdict()
    pre = groups.get("pre") or groups.get("pre2")
    return not pre or not HYPOTHETICAL_ZH.search(pre)


def en_asserted(clause: str, m: re.Match) -> bool:
    """No "if", "not", "never", "said" ... before the match: the clause states it, rather than supposing, denying
    or reporting it."""
    return not HYPOTHETICAL_EN.search(clause, 0, m.start())
