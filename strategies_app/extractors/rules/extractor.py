"""``RulesExtractor``: runs the rules of a strategy's type over a batch of messages and merges what they find."""

from __future__ import annotations

import time

from platform_kit.redaction import mentions_secret
from strategies_app.extractors.base import Candidate, Extraction, ExtractionContext, Extractor

from .fact import fact_candidates
from .profile import profile_candidates
from .speaker import with_speakers
from .task import task_candidates


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

    def extract(self, context: ExtractionContext) -> Extraction:
        started = time.perf_counter()
        ordered = with_speakers(sorted(context.messages, key=lambda message: message.seq))
        strategy_type = context.strategy_type
        if strategy_type == "profile":
            candidates, scanned = profile_candidates(ordered)
        elif strategy_type == "task":
            # A chat between named people has no agent task: their greetings and news are no task's progress.
            candidates, scanned = task_candidates(
                [message for message in ordered if not message.speaker],
                existing=context.existing,
                state=context.state or {},
                state_changes=context.state_changes or {},
                session_id=context.session_id,
            )
        elif strategy_type in ("fact", "custom"):
            candidates, scanned = fact_candidates(ordered, strategy_type)
        else:
            candidates, scanned = [], 0
        # What a user says about a credential is never a memory of the profile or fact kind (the fact rules skip
        # such sentences already); a task's summary may name one ("fix the password reset"), but hold none.
        candidates = [
            candidate
            for candidate in _dedupe(candidates)
            if not candidate.holds_secret() and (strategy_type == "task" or not mentions_secret(candidate.content))
        ]
        return Extraction(
            candidates=candidates,
            latency_ms=(time.perf_counter() - started) * 1000,
            detail=f"rules: {len(candidates)} candidate(s) from {len(ordered)} message(s), {scanned} scanned",
        )
