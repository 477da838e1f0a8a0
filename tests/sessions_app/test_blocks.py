"""5-hour blocks as ccusage's `blocks` computes them (sessions_app/selectors/blocks.py): hand-computed edge cases,
a line-by-line port of ccusage's TypeScript over random streams, and the blocks read from the ledger near a window
against the blocks of every entry the user ever had (the exact scan)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from sessions_app.models import ModelPrice, Session
from sessions_app.pricing import PriceBook
from sessions_app.selectors.blocks import (
    BLOCK,
    BlockScope,
    Entry,
    block_anchor,
    burn_rate,
    price_blocks,
    projection,
    scope_blocks,
    session_blocks,
    usage_blocks,
)
from tests.support.api import post_messages
from tests.support.factories import SessionFactory

HOUR_MS = 3_600_000
BLOCK_MS = 5 * HOUR_MS


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def entry(moment: str, tokens=(1000, 500, 0, 0), model="claude-sonnet-4-5", requests=1) -> Entry:
    return Entry(at(moment), model, tuple(tokens), requests)


LATER = at("2030-01-01T00:00:00Z")  # a "now" long after every entry: no block is active


def shape(blocks) -> list[tuple]:
    return [(b.start.isoformat(), b.end.isoformat(), b.is_gap, b.entries) for b in blocks]


# -- ccusage's rules, computed by hand -----------------------------------------------------------------------
def test_a_block_starts_at_its_first_entry_floored_to_the_hour_and_lasts_five_hours():
    blocks = session_blocks(
        [entry("2024-01-01T12:10:00Z", (200, 100, 300, 50), "claude-opus-4-1"), entry("2024-01-01T10:55:30Z")],
        now=LATER,
    )
    assert len(blocks) == 1
    block = blocks[0]
    assert (block.start, block.end, block.last_at) == (
        at("2024-01-01T10:00:00Z"),
        at("2024-01-01T15:00:00Z"),
        at("2024-01-01T12:10:00Z"),
    )
    assert block.id == "2024-01-01T10:00:00.000Z"  # ccusage's id: the start, RFC 3339 with milliseconds
    assert (block.entries, block.tokens, block.all_tokens) == (2, [1200, 600, 300, 50], 2150)
    assert block.models == ["claude-sonnet-4-5", "claude-opus-4-1"]  # in the order first used (sorted by time)
    assert block.is_active is False


def test_an_entry_exactly_five_hours_after_the_block_start_still_joins_it():
    on_the_dot = session_blocks(
        [entry("2024-01-01T10:30:00Z"), entry("2024-01-01T14:00:00Z"), entry("2024-01-01T15:00:00Z")], now=LATER
    )
    assert shape(on_the_dot) == [("2024-01-01T10:00:00+00:00", "2024-01-01T15:00:00+00:00", False, 3)]
    a_second_later = session_blocks(
        [entry("2024-01-01T10:30:00Z"), entry("2024-01-01T14:00:00Z"), entry("2024-01-01T15:00:01Z")], now=LATER
    )
    assert shape(a_second_later) == [
        ("2024-01-01T10:00:00+00:00", "2024-01-01T15:00:00+00:00", False, 2),
        ("2024-01-01T15:00:00+00:00", "2024-01-01T20:00:00+00:00", False, 1),  # 1 h after the last: no gap
    ]


def test_an_entry_exactly_five_hours_after_the_last_one_makes_no_gap():
    blocks = session_blocks(
        [entry("2024-01-01T10:00:00Z"), entry("2024-01-01T10:20:00Z"), entry("2024-01-01T15:20:00Z")], now=LATER
    )
    assert shape(blocks) == [
        ("2024-01-01T10:00:00+00:00", "2024-01-01T15:00:00+00:00", False, 2),
        ("2024-01-01T15:00:00+00:00", "2024-01-01T20:00:00+00:00", False, 1),
    ]
    # Both at once: 5 h after the block's start and after the entry before it: it joins.
    assert shape(session_blocks([entry("2024-01-01T10:00:00Z"), entry("2024-01-01T15:00:00Z")], now=LATER)) == [
        ("2024-01-01T10:00:00+00:00", "2024-01-01T15:00:00+00:00", False, 2)
    ]


def test_more_than_five_hours_without_entries_is_a_gap_block():
    blocks = session_blocks(
        [entry("2024-01-01T10:00:00Z"), entry("2024-01-01T12:00:00Z"), entry("2024-01-01T18:00:00Z")], now=LATER
    )
    assert shape(blocks) == [
        ("2024-01-01T10:00:00+00:00", "2024-01-01T15:00:00+00:00", False, 2),
        ("2024-01-01T17:00:00+00:00", "2024-01-01T18:00:00+00:00", True, 0),  # last entry + 5 h → the next entry
        ("2024-01-01T18:00:00+00:00", "2024-01-01T23:00:00+00:00", False, 1),
    ]
    gap = blocks[1]
    assert gap.id == "gap-2024-01-01T17:00:00.000Z"
    assert (gap.all_tokens, gap.last_at, burn_rate(gap), projection(gap, now=at("2024-01-01T17:30:00Z"))) == (
        0,
        None,
        None,
        None,
    )
    # A microsecond over 5 h since the last entry is a gap too (of a microsecond).
    tiny = session_blocks([entry("2024-01-01T10:00:00Z"), entry("2024-01-01T15:00:00.000001Z")], now=LATER)
    assert [b.is_gap for b in tiny] == [False, True, False]
    assert (tiny[1].start, tiny[1].end) == (at("2024-01-01T15:00:00Z"), at("2024-01-01T15:00:00.000001Z"))


def test_a_block_crosses_midnight():
    blocks = session_blocks(
        [entry("2024-03-09T22:30:00Z"), entry("2024-03-10T01:45:00Z"), entry("2024-03-10T03:10:00Z")], now=LATER
    )
    assert shape(blocks) == [
        ("2024-03-09T22:00:00+00:00", "2024-03-10T03:00:00+00:00", False, 2),
        ("2024-03-10T03:00:00+00:00", "2024-03-10T08:00:00+00:00", False, 1),  # 5 h 10 min after 22:00
    ]


@pytest.fixture
def sonnet_price(db):
    ModelPrice.objects.create(
        model="claude-sonnet-4-5",
        input_usd_per_mtok=3,
        output_usd_per_mtok=15,
        cache_read_usd_per_mtok=Decimal("0.3"),
        cache_write_usd_per_mtok=Decimal("3.75"),
    )


def test_the_active_block_burn_rate_and_projection_at_a_fixed_now(sonnet_price):
    entries = [
        entry("2024-01-01T10:05:00Z", (1000, 500, 2000, 300)),
        entry("2024-01-01T10:35:00Z", (2000, 1000, 4000, 700)),
    ]
    now = at("2024-01-01T11:00:30Z")
    [block] = session_blocks(entries, now=now)
    price_blocks([block], book=PriceBook.load())
    assert block.is_active
    # 3,000 input × $3 + 1,500 output × $15 + 6,000 cache read × $0.3 + 1,000 cache write × $3.75, per million
    assert block.cost.usd == Decimal("0.03705")
    rate = burn_rate(block)  # over the 30 minutes from the first entry to the last
    assert rate.tokens_per_minute == pytest.approx(11_500 / 30)
    assert rate.tokens_per_minute_for_indicator == pytest.approx(4_500 / 30)
    assert rate.cost_per_hour == Decimal("0.0741")
    ahead = projection(block, now=now)
    assert ahead.remaining_minutes == 240  # 239.5 minutes to 15:00, rounded half up as ccusage's Rust rounds
    assert ahead.all_tokens == 11_500 + 92_000
    assert ahead.input_output_tokens == 4_500 + 36_000
    assert ahead.requests == 2 + 16
    assert ahead.cost == Decimal("0.03705") + Decimal("0.0741") / 60 * 240


def test_a_block_is_active_until_its_end_and_only_within_five_hours_of_its_last_entry():
    entries = [entry("2024-01-01T10:00:00Z"), entry("2024-01-01T10:10:00Z")]
    assert session_blocks(entries, now=at("2024-01-01T14:59:59.999999Z"))[0].is_active
    assert not session_blocks(entries, now=at("2024-01-01T15:00:00Z"))[0].is_active
    # A clock behind the entries' (now before them) still finds the block active, as ccusage does.
    assert session_blocks(entries, now=at("2024-01-01T09:00:00Z"))[0].is_active
    one = session_blocks([entry("2024-01-01T10:00:00Z")], now=at("2024-01-01T10:30:00Z"))[0]
    assert one.is_active and burn_rate(one) is None and projection(one, now=at("2024-01-01T10:30:00Z")) is None


def test_messages_with_usage_outside_a_request_count_their_tokens_and_calls():
    blocks = session_blocks(
        [entry("2024-01-01T10:00:00Z"), entry("2024-01-01T10:05:00Z", (10, 20, 0, 0), "", 3)], now=LATER
    )
    assert (blocks[0].entries, blocks[0].requests, blocks[0].models) == (2, 4, ["claude-sonnet-4-5"])


# -- against ccusage's TypeScript, ported line by line ------------------------------------------------------
def ccusage_blocks(entries: list[tuple[int, tuple]], now_ms: int) -> list[tuple]:
    """apps/ccusage/src/session-blocks.ts, identifySessionBlocks/createBlock/createGapBlock, in milliseconds."""
    entries = sorted(entries, key=lambda e: e[0])
    blocks, start, current = [], None, []

    def create(start_ms, items):
        last = items[-1][0]
        tokens = tuple(sum(item[1][k] for item in items) for k in range(4))
        active = now_ms - last < BLOCK_MS and now_ms < start_ms + BLOCK_MS
        return (start_ms, start_ms + BLOCK_MS, False, len(items), tokens, active)

    for time_ms, tokens in entries:
        if start is None:
            start, current = time_ms // HOUR_MS * HOUR_MS, [(time_ms, tokens)]
            continue
        since_start, since_last = time_ms - start, time_ms - current[-1][0]
        if since_start > BLOCK_MS or since_last > BLOCK_MS:
            blocks.append(create(start, current))
            if since_last > BLOCK_MS:
                blocks.append((current[-1][0] + BLOCK_MS, time_ms, True, 0, (0, 0, 0, 0), False))
            start, current = time_ms // HOUR_MS * HOUR_MS, [(time_ms, tokens)]
        else:
            current.append((time_ms, tokens))
    if current:
        blocks.append(create(start, current))
    return blocks


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


@pytest.mark.parametrize("seed", range(40))
def test_random_streams_give_ccusages_blocks(seed):
    rng = random.Random(seed)
    origin = at("2025-06-01T00:00:00Z")
    moment, entries = origin, []
    for _ in range(rng.randint(1, 120)):
        # Bursts, pauses, long gaps, and instants on the hour and on the 5-hour mark.
        moment += rng.choice(
            [
                timedelta(seconds=rng.randint(0, 600)),
                timedelta(minutes=rng.randint(10, 200)),
                BLOCK,
                timedelta(hours=rng.randint(5, 30)),
            ]
        )
        entries.append(Entry(moment, "m", tuple(rng.randint(0, 5000) for _ in range(4))))
    now = moment + rng.choice([timedelta(0), timedelta(minutes=30), timedelta(hours=6)])
    ours = [
        (_ms(b.start), _ms(b.end), b.is_gap, b.entries, tuple(b.tokens), b.is_active)
        for b in session_blocks(rng.sample(entries, len(entries)), now=now)
    ]
    assert ours == ccusage_blocks([(_ms(e.at), e.tokens) for e in entries], _ms(now))


# -- from the ledger ----------------------------------------------------------------------------------------
def answer(request_id: str, moment: datetime, input_tokens: int, output_tokens: int, **extra) -> dict:
    return {
        "role": "assistant",
        "content": "ok",
        "request_id": request_id,
        "model": "claude-sonnet-4-5",
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "created_at": moment.isoformat(),
        **extra,
    }


def exact_scan(scope: BlockScope, *, since, until, now):
    """Every entry the user ever had, every block computed from them, then those overlapping the window."""
    blocks = session_blocks(scope.entries(lower=None), now=now)
    chosen = [b for b in blocks if b.end > since and (until is None or b.start < until)]
    price_blocks(chosen, book=PriceBook.load())
    return chosen


def comparable(blocks) -> list[tuple]:
    return [(b.id, b.end, b.last_at, b.is_active, b.entries, b.requests, tuple(b.tokens), b.cost.usd) for b in blocks]


@pytest.fixture
def history(api, sonnet_price):
    """xiaoming's usage over ten days in two sessions on two machines: bursts, nights off, a round-the-clock stretch
    of three days (no 5-hour pause), a streamed response in two lines, and tokens posted without a request."""
    laptop = SessionFactory(tenant=api.tenant, user_id="xiaoming", tool="claude-code", machine="laptop")
    server = SessionFactory(tenant=api.tenant, user_id="xiaoming", tool="claude-code", machine="server")
    rng = random.Random(7)
    moment, items = at("2026-02-01T08:00:00Z"), {laptop: [], server: []}
    for index in range(400):
        if 150 <= index < 250:
            moment += timedelta(minutes=rng.randint(20, 80))  # round the clock
        elif index == 300:
            moment += timedelta(days=3)  # away for three days
        else:
            moment += rng.choice([timedelta(minutes=rng.randint(1, 40))] * 6 + [timedelta(hours=rng.randint(5, 14))])
        where = laptop if rng.random() < 0.7 else server
        items[where].append(
            answer(
                f"r{index}", moment, rng.randint(1, 9000), rng.randint(1, 2000), cache_read_tokens=rng.randint(0, 50000)
            )
        )
    # A streamed response: two lines of one request, the second with the final usage (counted once, the largest).
    items[laptop].append(answer("stream", moment + timedelta(minutes=1), 10, 5))
    items[laptop].append(answer("stream", moment + timedelta(minutes=1, seconds=3), 10, 900))
    # Tokens posted as no request (a chat app's answer without a request id).
    items[server].append(
        {
            "role": "assistant",
            "content": "hi",
            "model": "claude-sonnet-4-5",
            "input_tokens": 70,
            "output_tokens": 30,
            "created_at": (moment + timedelta(minutes=2)).isoformat(),
        }
    )
    for session, rows in items.items():
        for start in range(0, len(rows), 500):
            post_messages(api, session, rows[start : start + 500])
    return {"first": at("2026-02-01T08:00:00Z"), "last": moment + timedelta(minutes=2), "sessions": [laptop, server]}


def test_blocks_near_a_window_are_the_blocks_of_the_whole_history(api, history):
    scope = BlockScope(tenant_id=api.tenant.pk, user_id="xiaoming")
    book = PriceBook.load()
    first, last = history["first"], history["last"]
    span = last - first
    times = [e.at for e in scope.entries(lower=None)]
    away = next(later for earlier, later in zip(times, times[1:], strict=False) if later - earlier > timedelta(days=2))
    moments = [first - timedelta(hours=1), first, first + span / 3, first + span / 2, last - timedelta(hours=2), last]
    moments += [away - timedelta(days=2), away - timedelta(hours=3), away]  # in a long pause: a gap block spans it
    for since in moments:
        for until in (None, since + timedelta(hours=7), since + timedelta(days=2)):
            now = last + timedelta(minutes=30)
            ours = scope_blocks(scope, since=since, until=until, now=now, book=book)
            assert comparable(ours) == comparable(exact_scan(scope, since=since, until=until, now=now)), (since, until)
    everything = exact_scan(scope, since=first - timedelta(days=1), until=None, now=last)
    assert any(b.is_gap for b in everything) and any(b.entries > 1 for b in everything)


def test_the_anchor_is_the_latest_entry_after_a_pause_of_more_than_five_hours(api, history):
    scope = BlockScope(tenant_id=api.tenant.pk, user_id="xiaoming")
    times = [e.at for e in scope.entries(lower=None)]
    for probe in (times[10], times[200], times[-1], times[0] - timedelta(seconds=1)):
        expected = None
        for index, moment in enumerate(times):
            if moment <= probe and (index == 0 or moment - times[index - 1] > BLOCK):
                expected = moment
        assert block_anchor(scope, at=probe) == expected


def test_every_token_the_ledger_counted_is_in_one_block(api, history):
    """The blocks' tokens add up to the sessions' counters, which the message service keeps (accounting rules)."""
    scope = BlockScope(tenant_id=api.tenant.pk, user_id="xiaoming")
    blocks = exact_scan(scope, since=history["first"] - timedelta(days=1), until=None, now=LATER)
    sessions = Session.objects.filter(tenant=api.tenant, user_id="xiaoming")
    counted = [
        sum(getattr(s, name) for s in sessions)
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
    ]
    assert [sum(b.tokens[k] for b in blocks) for k in range(4)] == counted
    assert sum(b.requests for b in blocks) == sum(s.requests for s in sessions)


def test_a_machine_narrows_the_blocks_to_its_sessions(api, history):
    laptop = BlockScope(tenant_id=api.tenant.pk, user_id="xiaoming", machine="laptop")
    server = BlockScope(tenant_id=api.tenant.pk, user_id="xiaoming", machine="server")
    both = BlockScope(tenant_id=api.tenant.pk, user_id="xiaoming")
    counts = [len(scope.entries(lower=None)) for scope in (laptop, server, both)]
    assert counts[0] + counts[1] == counts[2] and counts[0] > counts[1] > 0


def test_usage_blocks_reads_near_the_window_only(api, history, django_assert_max_num_queries):
    """A window of the last day: the plan, the anchor's times (a day back), the entries from it: a few queries,
    none of them reading every session's messages."""
    now = history["last"] + timedelta(minutes=10)
    with django_assert_max_num_queries(8):
        body = usage_blocks(tenant=api.tenant, user_id="xiaoming", since=now - timedelta(days=1), now=now)
    assert body["active_block"] is not None and body["active_block"]["is_active"]
    assert body["active_block"]["projection"]["remaining_minutes"] > 0


def test_round_the_clock_use_reads_back_to_the_last_pause(api, history):
    """Three days without a 5-hour pause: the anchor of a moment in them is days back, found by reading further."""
    scope = BlockScope(tenant_id=api.tenant.pk, user_id="xiaoming")
    times = [e.at for e in scope.entries(lower=None)]
    inside = times[240]  # the 90th entry of the stretch
    anchor = block_anchor(scope, at=inside)
    assert inside - anchor > timedelta(days=1)
    pairs = zip(times, times[1:], strict=False)
    assert all(later - earlier <= BLOCK for earlier, later in pairs if anchor <= earlier < inside)
