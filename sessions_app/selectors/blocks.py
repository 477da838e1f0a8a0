"""Claude Code's 5-hour usage blocks of one user, computed as ccusage's `blocks` command computes them, with the
burn rate and projection of the active block and the percent of the user's plan (docs/accounting.md, "Plan windows").

ccusage's rules (github.com/ryoppippi/ccusage: `rust/crates/ccusage/src/blocks.rs`, before it
`apps/ccusage/src/session-blocks.ts`), which `session_blocks` follows:

- The entries, in time order. The first one starts a block at its time floored to the (UTC) hour.
- An entry more than 5 hours after its block's start, or more than 5 hours after the entry before it, starts a new
  block (floored to the hour); one exactly 5 hours after either still joins the current block. When it comes more
  than 5 hours after the entry before it, a gap block spans [that entry + 5 hours, this entry].
- A block ends 5 hours after its start. It is active while now is before its end and less than 5 hours after its
  last entry.
- Its tokens are input + output + cache read + cache write (ccusage's "totalTokens"); its cost is its entries'.
- The burn rate of the active block: its tokens per minute and cost per hour over the minutes from its first entry to
  its last (none when those are the same instant), and the tokens per minute of input + output alone (ccusage's
  "for indicator"). Its projection: the minutes left to its end (rounded to whole minutes, as ccusage rounds them),
  times the rate, added to what it used.

An entry here is one LLM request (an `LlmRequest`: the largest tokens of each kind its messages reported, which is
exactly what it added to the counters, at the time of its first message), or a message that is usage outside any
request (a chat turn's answer, tokens posted without a request id: accounting rule 3). For Claude Code's logs these
are ccusage's entries: one per API response, its streamed lines counted once.

Only the entries near the window are read: blocks computed from an entry that starts a block whatever came before it
(the first entry of all, or one more than 5 hours after the entry before it) are exactly the blocks computed from
the first entry of all. `block_anchor` finds the latest such entry at or before the window's start, reading back a
day first, further only while it finds none.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.db import connection
from django.db.models import BigIntegerField, F, IntegerField, Q, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone

from sessions_app.models import LlmRequest, Message, Session, Tenant
from sessions_app.models.ledger import UNREQUESTED_USAGE
from sessions_app.pricing import Cost, PriceBook, money
from sessions_app.selectors.plans import Amounts, Limits, plan_body, plan_for, plan_usage

BLOCK_HOURS = 5
BLOCK = timedelta(hours=BLOCK_HOURS)
RECENT = timedelta(days=3)  # the default window: ccusage's `blocks --recent` (3 days, and the active block)
WINDOW_MAX = timedelta(days=31)  # the longest window one call reads
# How far back `block_anchor` reads, in turn, for an entry that starts a block: a day holds one for most people.
LOOKBACKS = (timedelta(days=1), timedelta(days=7), timedelta(days=35), timedelta(days=400), None)
# The token kinds of an entry, in this order everywhere below.
ENTRY_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
ONE_HOUR = "cache_creation_1h_tokens"  # a part of cache_creation_tokens, priced apart
INPUT, OUTPUT = 0, 1


# -- the blocks: pure ---------------------------------------------------------------------------------------
class Entry(NamedTuple):
    """One LLM request, or one message with usage outside any request (a tuple: a window reads thousands)."""

    at: datetime
    model: str
    tokens: tuple[int, int, int, int]  # ENTRY_TOKENS
    requests: int = 1
    one_hour: int = 0  # of the cache writes, those kept for an hour (priced apart: pricing.COST_TERMS)


@dataclass
class Block:
    start: datetime
    end: datetime
    is_gap: bool = False
    is_active: bool = False
    entries: int = 0
    requests: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None  # ccusage's actualEndTime
    tokens: list[int] = field(default_factory=lambda: [0] * len(ENTRY_TOKENS))
    by_model: dict[str, list[int]] = field(default_factory=dict)  # in the order the models were first used
    one_hour_by_model: dict[str, int] = field(default_factory=dict)
    cost: Cost = field(default_factory=Cost)

    @property
    def id(self) -> str:
        """ccusage's id: the start in RFC 3339 with milliseconds; a gap's with `gap-` before it."""
        stamp = self.start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.start.microsecond // 1000:03d}Z"
        return f"gap-{stamp}" if self.is_gap else stamp

    @property
    def all_tokens(self) -> int:
        return sum(self.tokens)

    @property
    def input_output_tokens(self) -> int:
        return self.tokens[INPUT] + self.tokens[OUTPUT]

    @property
    def models(self) -> list[str]:
        return [model for model in self.by_model if model]

    def add(self, entry: Entry) -> None:
        self.entries += 1
        self.requests += entry.requests
        self.first_at = self.first_at or entry.at
        self.last_at = entry.at
        sums = self.by_model.get(entry.model)
        if sums is None:
            sums = self.by_model[entry.model] = [0] * len(ENTRY_TOKENS)
        for index, value in enumerate(entry.tokens):
            self.tokens[index] += value
            sums[index] += value
        if entry.one_hour:
            self.one_hour_by_model[entry.model] = self.one_hour_by_model.get(entry.model, 0) + entry.one_hour


def floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def session_blocks(entries: Iterable[Entry], *, now: datetime, duration: timedelta = BLOCK) -> list[Block]:
    """The blocks of `entries` (in any order), gap blocks included, oldest first: ccusage's `identifySessionBlocks`."""
    blocks: list[Block] = []
    current: Block | None = None
    for entry in sorted(entries, key=lambda e: e.at):  # stable: entries of one instant keep their order
        if current is not None:
            since_start, since_last = entry.at - current.start, entry.at - current.last_at
            if since_start > duration or since_last > duration:
                blocks.append(_closed(current, now=now, duration=duration))
                if since_last > duration:
                    blocks.append(Block(start=current.last_at + duration, end=entry.at, is_gap=True))
                current = None
        if current is None:
            start = floor_hour(entry.at)
            current = Block(start=start, end=start + duration)
        current.add(entry)
    if current is not None:
        blocks.append(_closed(current, now=now, duration=duration))
    return blocks


def _closed(block: Block, *, now: datetime, duration: timedelta) -> Block:
    block.is_active = now - block.last_at < duration and now < block.end
    return block


def price_blocks(blocks: Iterable[Block], *, book: PriceBook) -> None:
    """Each block's cost: its tokens summed per model, each model's sums priced (cost is linear in tokens, so this is
    the sum of its entries' costs)."""
    for block in blocks:
        block.cost = Cost()
        for model, sums in block.by_model.items():
            tokens = {**dict(zip(ENTRY_TOKENS, sums, strict=True)), ONE_HOUR: block.one_hour_by_model.get(model, 0)}
            block.cost.add(book, model, tokens, block.start.astimezone(UTC).date())


@dataclass(frozen=True)
class BurnRate:
    tokens_per_minute: float
    tokens_per_minute_for_indicator: float  # input + output only
    cost_per_hour: Decimal
    requests_per_minute: float


@dataclass(frozen=True)
class Projection:
    all_tokens: int
    input_output_tokens: int
    cost: Decimal
    requests: int
    remaining_minutes: int


def _round_half_up(value: float) -> int:
    """Rust's f64::round of a value that is not negative (Python's round() rounds halves to even)."""
    return math.floor(value + 0.5)


def burn_rate(block: Block) -> BurnRate | None:
    """ccusage's calculateBurnRate: over the minutes from the block's first entry to its last."""
    if block.is_gap or not block.entries:
        return None
    minutes = (block.last_at - block.first_at).total_seconds() / 60
    if minutes <= 0:
        return None
    return BurnRate(
        tokens_per_minute=block.all_tokens / minutes,
        tokens_per_minute_for_indicator=block.input_output_tokens / minutes,
        cost_per_hour=block.cost.usd / Decimal(repr(minutes)) * 60,
        requests_per_minute=block.requests / minutes,
    )


def projection(block: Block, *, now: datetime) -> Projection | None:
    """ccusage's projectBlockUsage: an active block's totals at its end if its burn rate goes on."""
    if not block.is_active or block.is_gap:
        return None
    rate = burn_rate(block)
    if rate is None:
        return None
    remaining = _round_half_up(max((block.end - now).total_seconds(), 0) / 60)
    return Projection(
        all_tokens=_round_half_up(block.all_tokens + rate.tokens_per_minute * remaining),
        input_output_tokens=_round_half_up(
            block.input_output_tokens + rate.tokens_per_minute_for_indicator * remaining
        ),
        cost=block.cost.usd + rate.cost_per_hour / 60 * remaining,
        requests=_round_half_up(block.requests + rate.requests_per_minute * remaining),
        remaining_minutes=remaining,
    )


# -- the ledger's entries -----------------------------------------------------------------------------------
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _microseconds(model) -> RawSQL:
    """A row's `created_at` as microseconds since the epoch (an integer reads ten times faster than a timestamp)."""
    column = f'"{model._meta.db_table}"."created_at"'
    return RawSQL(f"(extract(epoch from {column}) * 1000000)::bigint", (), output_field=BigIntegerField())


def _moment(microseconds: int) -> datetime:
    return _EPOCH + timedelta(microseconds=microseconds)


@dataclass(frozen=True)
class BlockScope:
    """Whose entries: one user of one tenant, narrowed to a machine, a tool or a project if given."""

    tenant_id: object
    user_id: str
    machine: str | None = None
    tool: str | None = None
    project: str | None = None

    def session_ids(self, *, active_since: datetime | None):
        """The subquery of the sessions, those with a message at or after `active_since` (their last message's time
        is kept on the row) when it is given."""
        sessions = Session.objects.filter(tenant_id=self.tenant_id, user_id=self.user_id)
        for name in ("machine", "tool", "project"):
            if getattr(self, name) is not None:
                sessions = sessions.filter(**{name: getattr(self, name)})
        if active_since is not None:
            sessions = sessions.filter(last_message_at__gte=active_since)
        return sessions.order_by().values("pk")

    def _sources(self, *, lower: datetime | None, upper: datetime | None, upper_inclusive: bool = False):
        """The two querysets of entries with lower <= at < upper (<= upper): requests, and usage outside them."""
        window = Q()
        if lower is not None:
            window &= Q(created_at__gte=lower)
        if upper is not None:
            window &= Q(created_at__lte=upper) if upper_inclusive else Q(created_at__lt=upper)
        sessions = self.session_ids(active_since=lower)
        requests = LlmRequest.objects.filter(window, session_id__in=sessions)
        unrequested = Message.objects.filter(window, UNREQUESTED_USAGE, session_id__in=sessions)
        return requests, unrequested

    def entries(self, *, lower: datetime | None, upper: datetime | None = None) -> list[Entry]:
        """The entries with lower <= at < upper, oldest first: two index range scans (llmrequest_session_created,
        message_unrequested_usage) over the sessions active since `lower`."""
        requests, unrequested = self._sources(lower=lower, upper=upper)
        request_rows = (
            requests.order_by("created_at")
            .annotate(at_us=_microseconds(LlmRequest))
            .values_list("at_us", "model", *ENTRY_TOKENS, ONE_HOUR)
        )
        message_rows = (
            unrequested.order_by("created_at")
            .annotate(
                at_us=_microseconds(Message),
                **{
                    f"{name}_or_0": Coalesce(F(name), Value(0), output_field=BigIntegerField())
                    for name in (*ENTRY_TOKENS, ONE_HOUR)
                },
                calls=Coalesce(F("api_calls"), Value(0), output_field=IntegerField()),
            )
            .values_list("at_us", "model", *(f"{name}_or_0" for name in ENTRY_TOKENS), "calls", f"{ONE_HOUR}_or_0")
        )
        # Straight from the cursor, times as integers: at thousands of entries, the ORM's rows and the parsing of
        # timestamps cost more than the query.
        with connection.cursor() as cursor:
            cursor.execute(*request_rows.query.sql_with_params())
            from_requests = [Entry(_moment(row[0]), row[1], row[2:6], 1, row[6]) for row in cursor.fetchall()]
            cursor.execute(*message_rows.query.sql_with_params())
            from_messages = [Entry(_moment(row[0]), row[1], row[2:6], row[6], row[7]) for row in cursor.fetchall()]
        if not from_messages:
            return from_requests
        return list(heapq.merge(from_requests, from_messages, key=lambda e: e.at))

    def latest_pause(self, *, lower: datetime | None, upper: datetime) -> tuple[datetime | None, datetime | None]:
        """Of the entries with lower <= at <= upper: the time of the latest one more than 5 hours after the entry
        before it (among them), and the time of the first. One query: the database pairs each with the one before."""
        requests, unrequested = self._sources(lower=lower, upper=upper, upper_inclusive=True)
        request_sql, request_params = requests.values("created_at").order_by().query.sql_with_params()
        message_sql, message_params = unrequested.values("created_at").order_by().query.sql_with_params()
        sql = f"""
            SELECT max(at) FILTER (WHERE at - before > %s), min(at)
            FROM (SELECT created_at AS at, lag(created_at) OVER (ORDER BY created_at) AS before
                  FROM ({request_sql} UNION ALL {message_sql}) AS entries) AS paired
        """
        with connection.cursor() as cursor:
            cursor.execute(sql, [BLOCK, *request_params, *message_params])
            return cursor.fetchone()

    def exists_before(self, moment: datetime) -> bool:
        requests, unrequested = self._sources(lower=None, upper=moment)
        return requests.exists() or unrequested.exists()

    def first_time_from(self, moment: datetime) -> datetime | None:
        """The time of the first entry at or after `moment`."""
        times = [
            rows.filter(created_at__gte=moment, session_id__in=self.session_ids(active_since=moment))
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first()
            for rows in (LlmRequest.objects, Message.objects.filter(UNREQUESTED_USAGE))
        ]
        times = [time for time in times if time is not None]
        return min(times) if times else None


def block_anchor(scope: BlockScope, *, at: datetime) -> datetime | None:
    """The time of the latest entry at or before `at` that starts a block whatever came before it (the first entry of
    all, or one more than 5 hours after the entry before it); None when no entry is at or before `at`."""
    for lookback in LOOKBACKS:
        lower = at - lookback if lookback is not None else None
        after_pause, first = scope.latest_pause(lower=lower, upper=at)
        if first is None:
            if lower is None:
                return None
            continue  # the last entry before `lower` may be followed by a gap block that lasts past `at`
        if after_pause is not None:
            return after_pause
        # No pause among them: the first is the anchor if whatever came before it came before `lower`, more than 5
        # hours earlier (the gap block between them ends at it, not after `at`), or nothing did.
        if lower is None or first - lower > BLOCK or not scope.exists_before(lower):
            return first
    raise AssertionError("the last lookback reads every entry")  # pragma: no cover


def scope_blocks(
    scope: BlockScope, *, since: datetime, until: datetime | None, now: datetime, book: PriceBook
) -> list[Block]:
    """The blocks that overlap [since, until), each whole (its entries after `until` too), priced."""
    anchor = block_anchor(scope, at=since)
    upper = until + BLOCK if until is not None else None  # a block that starts before `until` ends before this
    entries: list[Entry] = scope.entries(lower=anchor if anchor is not None else since, upper=upper)
    if upper is not None:
        # The entry after them, with no usage: it closes the last block and makes the gap block before it.
        following = scope.first_time_from(upper)
        if following is not None:
            entries.append(Entry(following, "", (0, 0, 0, 0), 0))
    blocks = [
        block
        for block in session_blocks(entries, now=now)
        if block.end > since and (until is None or block.start < until)
    ]
    price_blocks(blocks, book=book)
    return blocks


# -- the report ---------------------------------------------------------------------------------------------
def block_body(block: Block, *, now: datetime, limits: Limits | None) -> dict:
    """A block as the API shows it (ccusage's JSON, in snake case), with its percent of the plan's limits."""
    rate = burn_rate(block) if block.is_active else None  # ccusage shows the rate of the active block only
    ahead = projection(block, now=now)
    usage = None
    if limits is not None and not block.is_gap:
        used = Amounts(
            tokens=limits.counted_tokens(input_output=block.input_output_tokens, all_tokens=block.all_tokens),
            cost=block.cost.usd,
            messages=block.requests,
        )
        projected = None
        if ahead is not None:
            projected = Amounts(
                tokens=limits.counted_tokens(input_output=ahead.input_output_tokens, all_tokens=ahead.all_tokens),
                cost=ahead.cost,
                messages=ahead.requests,
            )
        usage = plan_usage(limits=limits, used=used, projected=projected)
    return {
        "id": block.id,
        "start_time": block.start,
        "end_time": block.end,
        "actual_end_time": block.last_at,
        "is_active": block.is_active,
        "is_gap": block.is_gap,
        "entries": block.entries,
        "requests": block.requests,
        **dict(zip(ENTRY_TOKENS, block.tokens, strict=True)),
        "all_tokens": block.all_tokens,
        **block.cost.as_fields(),
        "models": block.models,
        "burn_rate": None
        if rate is None
        else {
            "tokens_per_minute": round(rate.tokens_per_minute, 3),
            "tokens_per_minute_for_indicator": round(rate.tokens_per_minute_for_indicator, 3),
            "cost_per_hour": money(rate.cost_per_hour),
        },
        "projection": None
        if ahead is None
        else {
            "all_tokens": ahead.all_tokens,
            "input_output_tokens": ahead.input_output_tokens,
            "cost_usd": money(ahead.cost),
            "requests": ahead.requests,
            "remaining_minutes": ahead.remaining_minutes,
        },
        "plan_usage": usage,
    }


def usage_blocks(
    *,
    tenant: Tenant,
    user_id: str,
    machine: str | None = None,
    tool: str | None = None,
    project: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    now: datetime | None = None,
    book: PriceBook | None = None,
) -> dict:
    """One user's blocks that overlap [since, until) (`since` by default 3 days before `until` or now, as ccusage's
    `--recent`), oldest first, with the active block's burn rate and projection, and each block's percent of the
    user's plan."""
    now = now or timezone.now()
    since = since if since is not None else (until or now) - RECENT
    scope = BlockScope(tenant_id=tenant.pk, user_id=user_id, machine=machine, tool=tool, project=project)
    blocks = scope_blocks(scope, since=since, until=until, now=now, book=book or PriceBook.load())
    plan = plan_for(tenant=tenant, user_id=user_id)
    limits = Limits.per_block(plan) if plan is not None else None
    bodies = [block_body(block, now=now, limits=limits) for block in blocks]
    unpriced = set().union(*(block.cost.unpriced_models for block in blocks)) if blocks else set()
    return {
        "user_id": user_id,
        "machine": machine,
        "tool": tool,
        "project": project,
        "since": since,
        "until": until,
        "now": now,
        "block_hours": BLOCK_HOURS,
        "plan": plan_body(plan),
        "results": bodies,
        "active_block": next((body for body in bodies if body["is_active"]), None),
        "unpriced_models": sorted(unpriced),
    }
