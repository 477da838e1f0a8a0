"""Consolidation: each candidate an extractor proposes becomes ADD, UPDATE, INVALIDATE or NOOP.

A candidate is compared with the user's valid records of its type that are about the same thing (the same
`slot` in their fields): the same value restated updates that record (newest wording, merged fields, extended
provenance) or changes nothing; a different value of an exclusive slot (a changed preference, a new city)
invalidates the old record, which stays in history, and adds the new one. A candidate about something new is
added — through record_create, whose own dedup still merges a restatement worded differently.
"""

from __future__ import annotations

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
