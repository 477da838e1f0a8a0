"""What a message adds to the usage counters: the counting rules of ../shared/seeds/000, written once.

1. **Messages.** Every message adds 1 to `messages` and 1 to its role's counter (`schema.ROLE_COUNTERS`).
2. **Tokens.** A message's tokens are what it reports; its `total_tokens`, when it gives none but gives input
   or output tokens, is input + output (cache reads and writes are counted on their own). Cache writes are
   counted by lifetime too: `cache_creation_tokens` is the sum of `cache_creation_5m_tokens` and
   `cache_creation_1h_tokens`; a write whose lifetime is not reported is a 5-minute one (`cache_writes`).
3. **Requests.** A message with a `request_id` or an `auth_type` is (part of) an LLM request. Messages sharing
   a `request_id` in a session are one request, counted once, with its first message. For each token kind a
   request keeps the largest value any of its messages reported, and a message adds only how much it grew
   that value: an agent that logs one response over several lines with growing usage is counted once, never
   summed. A message with an `auth_type` and no `request_id` is a request of its own. A message that is no
   request adds its own tokens. A completed chat turn's answer says how many requests it made (`api_calls`)
   and adds its own tokens.
4. **Conversations.** A message naming a conversation goes to it (the first use of a name opens it); a user
   message naming none starts a new one; any other message joins the session's current conversation.
5. **Roll-ups.** A message counts in the UTC hour it was created, under its model (else its request's);
   a conversation in the hour and under the own model of the message that started it; a session once, with
   its first message.

The message service's append (`services/messages.py`) and a chat turn's completion (`services/turns.py`)
count with these functions; `count_usage` folds them over a list of messages (the importers' summaries,
the tests' oracle); the audits' recount (`selectors/recount.py`) restates them in SQL over the stored
messages, and a test checks that it agrees with this module.

Counts are kept in tallies: lists of integers in `schema.ROLLUP_FIELDS` order, not Counters (an import adds
tens of thousands of messages in one call, and each touches three tallies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from enum import Enum

from sessions_app.schema import (
    LONG_CONTEXT_FIELDS,
    LONG_CONTEXT_TOKENS,
    MEASURE_FIELDS,
    REPORTED_COST_FIELDS,
    ROLE_COUNTERS,
    ROLLUP_FIELDS,
    SESSION_COUNTER_FIELDS,
)

_NOT_STATS = frozenset((*LONG_CONTEXT_FIELDS, *REPORTED_COST_FIELDS))  # measures the stats API does not list

# -- tallies ------------------------------------------------------------------------------------------------
POSITION = {name: index for index, name in enumerate(ROLLUP_FIELDS)}
REQUESTS, MESSAGES = POSITION["requests"], POSITION["messages"]
CONVERSATIONS, SESSIONS = POSITION["conversations"], POSITION["sessions"]
ROLE_POSITION = {role: POSITION[counter] for role, counter in ROLE_COUNTERS.items()}
TOKEN_POSITIONS = tuple(POSITION[name] for name in MEASURE_FIELDS)


def empty_tally() -> list[int]:
    return [0] * len(ROLLUP_FIELDS)


def tally_message(tally: list[int], role: str, requests: int, tokens: tuple[int, ...]) -> None:
    """Rules 1 and 3: add one message of `role`, the `requests` it opens and the `tokens` it adds."""
    tally[MESSAGES] += 1
    tally[ROLE_POSITION[role]] += 1
    tally[REQUESTS] += requests
    for position, value in zip(TOKEN_POSITIONS, tokens, strict=True):
        if value:
            tally[position] += value


def tally_growth(tally: list[int], tokens: tuple[int, ...]) -> None:
    """Rule 3 for a message completed in place (an import reading more of a response it stored): only what
    the new version grew the tokens by — it is no new message and opens no new request."""
    for position, value in zip(TOKEN_POSITIONS, tokens, strict=True):
        if value:
            tally[position] += value


def tally_as_dict(tally: list[int], fields: tuple[str, ...] = ROLLUP_FIELDS) -> dict[str, int]:
    return dict(zip(fields, tally, strict=False))


# -- tokens and requests ------------------------------------------------------------------------------------
def total_tokens(input_tokens: int | None, output_tokens: int | None, total: int | None) -> int | None:
    """Rule 2: the total as reported, else input + output when the message reports either."""
    if total is None and (input_tokens is not None or output_tokens is not None):
        return (input_tokens or 0) + (output_tokens or 0)
    return total


def cache_writes(
    written: int | None, five_minutes: int | None, one_hour: int | None
) -> tuple[int | None, int | None, int | None]:
    """Rule 2's cache writes: (all, 5-minute, 1-hour), all being their sum. A message that reports only the sum
    wrote for 5 minutes (the API's default lifetime: Anthropic's `cache_control` "ephemeral" lasts 5 minutes
    unless it says `"ttl": "1h"`); one that reports only the lifetimes has their sum. None: no cache write
    reported. The messages API refuses lifetimes that add up to more than the sum it is given."""
    if written is None and five_minutes is None and one_hour is None:
        return None, None, None
    one_hour = one_hour or 0
    if written is None:
        written = (five_minutes or 0) + one_hour
    return written, max(written - one_hour, 0), min(one_hour, written)


def long_context(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None,
    written: int | None,
    one_hour: int | None,
) -> tuple[int | None, ...]:
    """Rule 2's long-context tokens (LONG_CONTEXT_FIELDS): the same tokens again when the prompt (input, cache reads
    and cache writes) is over schema.LONG_CONTEXT_TOKENS, else none. A request keeps the largest of each, as of
    its tokens: its lines repeat the same prompt."""
    if (input_tokens or 0) + (cache_read or 0) + (written or 0) <= LONG_CONTEXT_TOKENS:
        return (None,) * len(LONG_CONTEXT_FIELDS)
    return (input_tokens or 0, output_tokens or 0, cache_read or 0, written or 0, one_hour or 0)


def message_tokens(message: Mapping) -> tuple[int | None, ...]:
    """A message's measures in MEASURE_FIELDS order (None where it reports nothing): its tokens, their total, cache
    writes and long-context tokens by rule 2, and the cost its source reported (with 1 request that reported one)."""
    get = message.get
    input_tokens, output_tokens = get("input_tokens"), get("output_tokens")
    total = total_tokens(input_tokens, output_tokens, get("total_tokens"))
    written, five_minutes, one_hour = cache_writes(
        get("cache_creation_tokens"), get("cache_creation_5m_tokens"), get("cache_creation_1h_tokens")
    )
    reported = get("reported_cost_nano_usd")
    if reported is None and get("reported_cost_usd") is not None:  # an import's or the telemetry's item
        reported = int(Decimal(str(get("reported_cost_usd"))).scaleb(9).to_integral_value(ROUND_HALF_UP))
    cache_read = get("cache_read_tokens")
    tokens = (input_tokens, output_tokens, cache_read, written, five_minutes, one_hour, total)
    long = long_context(input_tokens, output_tokens, cache_read, written, one_hour)
    return (*tokens, *long, reported, None if reported is None else 1)


def is_request(message: Mapping) -> bool:
    """Rule 3: a message with a request_id or an auth_type is (part of) an LLM request."""
    return bool(message.get("request_id") or message.get("auth_type"))


def request_growth(largest: dict, tokens: tuple[int | None, ...]) -> tuple[int, ...]:
    """Rule 3: what a message of a request adds — how much it grew the request's largest value of each kind.
    `largest` ({token field: value}, e.g. an LlmRequest's attributes) is raised to the new largest values."""
    growth = []
    for name, value in zip(MEASURE_FIELDS, tokens, strict=True):
        before = largest[name]
        if value is not None and value > before:
            largest[name] = value
            growth.append(value - before)
        else:
            growth.append(0)
    return tuple(growth)


def own_tokens(tokens: tuple[int | None, ...]) -> tuple[int, ...]:
    """Rule 3: what a message that is no request (or a turn's answer) adds — its own tokens."""
    return tuple(value or 0 for value in tokens)


# -- conversations ------------------------------------------------------------------------------------------
class Round(Enum):
    """Where a message that names no conversation goes (rule 4)."""

    NEW = "a user message starts a new conversation"
    CURRENT = "any other message joins the session's current conversation"


def conversation_target(message: Mapping) -> str | Round:
    """Rule 4: the conversation reference the message names, else Round.NEW (a user message) or Round.CURRENT
    (any other role: a tool result, an error or a system line never starts a round)."""
    reference = message.get("conversation")
    if reference:
        return reference
    return Round.NEW if message["role"] == "user" else Round.CURRENT


# -- roll-ups -----------------------------------------------------------------------------------------------
def hour_of(moment: datetime) -> datetime:
    """The UTC hour a moment falls in (roll-ups are keyed by UTC hours, whatever offset a client sent)."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def turn_answer_usage(message) -> tuple[tuple[datetime, str], dict[str, int]]:
    """Rule 3's chat turn: what a turn's stored assistant message adds on its own — the requests its client
    reported (`api_calls`; none while it streams) and its own tokens — and the roll-up key it counts under."""
    tally = empty_tally()
    tokens = own_tokens(tuple(getattr(message, name) for name in MEASURE_FIELDS))
    tally_message(tally, message.role, message.api_calls or 0, tokens)
    return (hour_of(message.created_at), message.model or ""), tally_as_dict(tally)


# -- the rules folded over a list of messages ---------------------------------------------------------------
class SessionAccount:
    """The counters a fresh session's messages add up to, message by message, by the rules above: the
    session's counters and its roll-up tallies by (hour, model). A repeated `external_id` counts once, as the
    message service stores it once."""

    def __init__(self):
        self.tally = empty_tally()
        self.rollups: dict[tuple[datetime | None, str], list[int]] = {}
        self.requests: dict[str, dict] = {}  # request key → the largest tokens of each kind, and its model
        self.conversations: set[str] = set()
        self.external_ids: set[str] = set()
        self.messages = 0

    def rollup(self, created_at, model: str) -> list[int]:
        key = (hour_of(_moment(created_at)) if created_at else None, model)
        tally = self.rollups.get(key)
        if tally is None:
            tally = self.rollups[key] = empty_tally()
        return tally

    def add(self, message: Mapping) -> None:
        external_id = message.get("external_id")
        if external_id:
            if external_id in self.external_ids:
                return
            self.external_ids.add(external_id)
        created_at, model = message.get("created_at"), message.get("model") or ""
        target = conversation_target(message)
        if target is Round.NEW or (target is not Round.CURRENT and target not in self.conversations):
            if target is not Round.NEW:
                self.conversations.add(target)
            self.tally[CONVERSATIONS] += 1
            self.rollup(created_at, model)[CONVERSATIONS] += 1
        tokens = message_tokens(message)
        requests = 0
        if is_request(message):
            key = message.get("request_id") or f"\0{len(self.requests)}"  # no request_id: a request of its own
            request = self.requests.get(key)
            if request is None:
                request = self.requests[key] = {**dict.fromkeys(MEASURE_FIELDS, 0), "model": ""}
                requests = 1
            request["model"] = request["model"] or model
            added = request_growth(request, tokens)
            model = model or request["model"]
        else:
            added = own_tokens(tokens)
        tally_message(self.tally, message["role"], requests, added)
        rollup = self.rollup(created_at, model)
        tally_message(rollup, message["role"], requests, added)
        if self.messages == 0:
            rollup[SESSIONS] += 1
        self.messages += 1

    def counters(self) -> dict[str, int]:
        """The session's counters (what `GET …/stats/` will say)."""
        return {name: value for name, value in self.measures().items() if name not in _NOT_STATS}

    def measures(self) -> dict[str, int]:
        """The session's counters and its other measures (long-context tokens, reported cost)."""
        return tally_as_dict(self.tally, SESSION_COUNTER_FIELDS)


def count_usage(messages: Iterable) -> dict[str, int]:
    """The counters the message service derives from these messages for a fresh session: requests,
    conversations, messages by role and tokens by kind. Takes message dicts (the messages API's body) or the
    importers' ParsedMessages (anything with `to_ingest()`)."""
    account = SessionAccount()
    for message in messages:
        account.add(message.to_ingest() if hasattr(message, "to_ingest") else message)
    return account.counters()


def _moment(value) -> datetime:
    return datetime.fromisoformat(value) if isinstance(value, str) else value
