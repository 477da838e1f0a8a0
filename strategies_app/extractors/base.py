"""The types every extractor shares: what a run gives it (the context and its messages), the memories it
proposes, its answer.

Pure Python (no Django imports), so an extractor can be tested and benchmarked without a database.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime

from platform_kit.redaction import REDACTED, holds_secret

RECORD_TYPES = ("profile", "task", "fact", "custom")


@dataclass(frozen=True)
class SourceMessage:
    """What an extractor reads: one message of a session."""

    id: str  # message uuid as str
    seq: int
    role: str  # "user" | "assistant" | "toolResult" | "error" | "system"
    content: str
    created_at: datetime | None = None
    # Who said it, when the message names a person (metadata.speaker): in a chat between people (LoCoMo, a
    # group chat) both sides are people, and every record says whose it is.
    speaker: str = ""


@dataclass
class Candidate:
    """One memory an extractor proposes; consolidation decides whether it adds, updates or replaces a record.

    ``slot`` is the stable, lower-case key of what the memory is about ("prefer:lighting", "identity:name",
    "task:<session id>"). When ``exclusive`` is true a different ``value`` for the same slot replaces
    (invalidates) the old memory; otherwise both can stand.
    """

    type: str  # "profile" | "task" | "fact" | "custom"
    content: str  # a self-contained statement in the user's language: "Prefers soft lighting at night"
    slot: str
    value: str  # normalised value for the slot: "like"/"dislike", the name, the amount...
    exclusive: bool
    fields: dict = field(default_factory=dict)  # JSON-serialisable structured fields
    confidence: float = 0.8
    source_message_ids: list[str] = field(default_factory=list)
    reason: str = ""  # which rule fired, e.g. "rule en.prefer"

    def as_dict(self) -> dict:
        return asdict(self)

    def holds_secret(self) -> bool:
        """Whether the memory would keep a credential (in its text or fields), or the mark of one redacted at
        write ("the user's API key is [REDACTED]" is no memory worth having): it is never written."""
        fields = json.dumps(self.fields, ensure_ascii=False, default=str)
        return REDACTED in self.content or REDACTED in fields or holds_secret(self.content) or holds_secret(fields)


@dataclass
class Extraction:
    """An extractor's answer, with what it cost (tokens are 0 for the rules)."""

    candidates: list[Candidate]
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class ExtractionContext:
    """What a run knows when it asks an extractor: the strategy's type and prompt, the new messages, the user's
    related records and the session.

    ``existing`` holds the user's related valid records as dicts ``{"id", "type", "content", "fields"}``
    (this session's task record among them); ``state`` is the session's current state and
    ``state_changes`` is ``{key: [old, new]}`` when a state change triggered the run.
    """

    strategy_type: str  # "profile" | "task" | "fact" | "custom"
    prompt: str  # the strategy version's prompt (the rules do not read it)
    messages: list[SourceMessage]
    existing: list[dict]
    state: dict | None = None
    state_changes: dict | None = None
    session_id: str = ""
    user_id: str = ""
    session_name: str = ""


class Extractor:
    """The interface: the built-in rules and the LLM extractor both subclass it."""

    name: str = ""
    calls_model: bool = False  # True when an Extraction's latency_ms is a model's (it goes to run.llm_latency_ms)

    def extract(self, context: ExtractionContext) -> Extraction:
        raise NotImplementedError
