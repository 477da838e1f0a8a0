"""Consolidation: each candidate an extractor proposes becomes ADD, UPDATE, INVALIDATE or NOOP.

A candidate is compared with the user's valid records of its type that are about the same thing (the same
`slot` in their fields): the same value restated updates that record (newest wording, merged fields, extended
provenance) or changes nothing; a different value of an exclusive slot (a changed preference, a new city)
invalidates the old record, which stays in history, and adds the new one. A candidate about something new is
added — through record_create, whose own dedup still merges a restatement worded differently.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from memory_app.models import Record
from memory_app.services import RecordClosed, record_create, record_invalidate, record_update
from sessions_app.models import Session, Tenant
from strategies_app.extractors.base import Candidate

ADD, UPDATE, INVALIDATE, NOOP = "ADD", "UPDATE", "INVALIDATE", "NOOP"


@dataclass
class Decision:
    action: str
    record: str
    content: str
    slot: str
    reason: str
    source_message_ids: list[str]

    def as_dict(self) -> dict:
        return asdict(self)


def _same_slot(*, tenant: Tenant, user_id: str, type: str, slot: str) -> list[Record]:
    return list(
        Record.objects.select_for_update()
        .filter(tenant=tenant, user_id=user_id, namespace="", type=type, valid=True, fields__slot=slot)
        .order_by("-updated_at")
    )


# A preference about a thing contradicts the opposite preference about the same thing, even when the two name it
# differently: "不喜欢博物馆" ends "喜欢逛博物馆", "Is not into museums" ends "Loves visiting museums".
_POSITIVE, _NEGATIVE = frozenset({"like", "prefer"}), frozenset({"dislike"})
_ZH_LEADING_VERB = re.compile(
    "^(?:去|逛|看|吃|喝|玩|听|参观|打|做|学|养|穿|用|读|写|画|弹|唱|跳|爬|骑|开|坐|待在|呆在|在)+"
)
_EN_LEADING_VERB = re.compile(
    r"^(?:(?:going|go|visiting|visit|watching|watch|eating|eat|drinking|drink|playing|play|reading|read|listening"
    r"|listen|doing|do|having|have|walking|walk|taking|take|spending|spend|to|the|a|an|some|my|their)\s+(?:to\s+)?)+",
    re.IGNORECASE,
)
_EN_WORD = re.compile(r"[a-z0-9]+")
_EN_STOP = frozenset("the a an to of in on at for and or with by from my their any some anymore now".split())


def _terms(text: str) -> tuple[str, frozenset]:
    """(Chinese characters, English words singular) of a preference's object, without a leading verb."""
    cjk = "".join(ch for ch in _ZH_LEADING_VERB.sub("", text) if "\u3400" <= ch <= "\u9fff")
    words = frozenset(
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
        for w in _EN_WORD.findall(_EN_LEADING_VERB.sub("", text.lower()))
        if w not in _EN_STOP
    )
    return cjk, words


def _same_object(a: str, b: str) -> bool:
    cjk_a, words_a = _terms(a)
    cjk_b, words_b = _terms(b)
    if len(cjk_a) >= 2 and len(cjk_b) >= 2 and (cjk_a in cjk_b or cjk_b in cjk_a):
        return True
    return bool(words_a and words_b) and (words_a <= words_b or words_b <= words_a)


def _opposite_preferences(*, tenant: Tenant, user_id: str, candidate: Candidate) -> list[Record]:
    """The user's valid preferences of the other polarity about the same thing (and the same speaker)."""
    fields = candidate.fields
    polarity, thing = fields.get("polarity"), fields.get("object")
    if fields.get("kind") != "preference" or not thing or polarity not in _POSITIVE | _NEGATIVE:
        return []
    opposite = _NEGATIVE if polarity in _POSITIVE else _POSITIVE
    rows = Record.objects.select_for_update().filter(
        tenant=tenant,
        user_id=user_id,
        namespace="",
        type=candidate.type,
        valid=True,
        fields__kind="preference",
        fields__polarity__in=sorted(opposite),
    )
    speaker = fields.get("speaker", "")
    return [
        r
        for r in rows
        if (r.fields.get("speaker") or "") == speaker and _same_object(str(r.fields.get("object") or ""), thing)
    ]


def consolidate(
    *,
    tenant: Tenant,
    user_id: str,
    session: Session | None,
    candidates: list[Candidate],
    strategy: str,
    strategy_version: int,
) -> list[Decision]:
    """Apply the candidates in order (inside the caller's transaction); the decisions, with reasons."""
    actor = f"strategy:{strategy}"
    # The strategy (at its version) is recorded as the writer of every record it adds or changes.
    written_by_strategy = {"strategy": strategy, "strategy_version": strategy_version, "actor": actor}
    session_ids = [session.pk] if session is not None else []
    decisions: list[Decision] = []

    def decide(action, record_id, candidate, reason):
        decisions.append(
            Decision(action, str(record_id), candidate.content, candidate.slot, reason, candidate.source_message_ids)
        )

    for candidate in candidates:
        fields = {**candidate.fields, "slot": candidate.slot, "value": candidate.value}
        explicit = fields.pop("invalidates", None) or []
        related = _same_slot(tenant=tenant, user_id=user_id, type=candidate.type, slot=candidate.slot)
        contradicted = [r for r in related if candidate.exclusive and r.fields.get("value") != candidate.value]
        contradicted += _opposite_preferences(tenant=tenant, user_id=user_id, candidate=candidate)
        contradicted += [r for r in Record.objects.filter(tenant=tenant, user_id=user_id, valid=True, pk__in=explicit)]
        for record in {r.pk: r for r in contradicted}.values():
            try:
                record_invalidate(
                    tenant=tenant, record_id=record.pk, actor=actor, reason=f"contradicted by: {candidate.content}"
                )
            except RecordClosed:
                continue
            decide(INVALIDATE, record.pk, candidate, f"{record.content!r} no longer holds ({candidate.reason})")
        survivors = [r for r in related if r not in contradicted]
        if survivors:
            target = survivors[0]
            merged = {**target.fields, **fields}
            known = {str(i) for i in target.source_messages.values_list("id", flat=True)}
            new_sources = [i for i in candidate.source_message_ids if i not in known]
            if target.content == candidate.content and merged == target.fields and not new_sources:
                decide(NOOP, target.pk, candidate, "already remembered, from the same messages")
                continue
            record_update(
                tenant=tenant,
                record_id=target.pk,
                content=candidate.content,
                fields=merged,
                confidence=max(target.confidence, candidate.confidence),
                source_session_ids=session_ids,
                source_message_ids=candidate.source_message_ids,
                reason=f"restated ({candidate.reason})",
                **written_by_strategy,
            )
            decide(UPDATE, target.pk, candidate, f"about the same thing as before ({candidate.slot})")
            continue
        write = record_create(
            tenant=tenant,
            user_id=user_id,
            type=candidate.type,
            content=candidate.content,
            fields=fields,
            confidence=candidate.confidence,
            source_session_ids=session_ids,
            source_message_ids=candidate.source_message_ids,
            **written_by_strategy,
        )
        if write.created:
            decide(ADD, write.record.pk, candidate, f"new ({candidate.reason})")
        else:
            decide(UPDATE, write.record.pk, candidate, "restates a record worded differently; merged")
    return decisions
